import Foundation
import Glibc
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import KakinSQLite
import KakinStorage
import KakinSystem
import Synchronization
import Testing

/// Injected faults: a full disk under load, load past capacity, a body cut off mid-way, oversized heads.
/// Each checks what a client sees and that nothing is half-applied.
@Suite(.serialized) struct Faults {
    /// Kakin over a database in `directory`, with the HTTP limits and extra routes a test needs.
    static func start(directory: URL, http: (inout HTTPServerConfiguration) -> Void = { _ in },
                      extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) async throws -> TestKakin {
        let clock = ManualClock()
        let appStore = try TestAppStore(nowMs: clock.nowMs())
        var config = Configuration()
        config.port = 0
        config.database = .sqlite(path: directory.appendingPathComponent("kakin.db").path)
        config.trustedRootsDER = [appStore.rootDER]
        config.apps = [Configuration.App(bundleId: TestAppStore.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox],
                                         catalog: TestKakin.catalog)]
        var options = KakinRuntime.Options(configuration: config, clock: clock, logger: Logger(minimum: .error), extraRoutes: extraRoutes)
        http(&options.http)
        let runtime = try await KakinRuntime.start(options)
        return TestKakin(runtime: runtime, directory: directory, clock: clock, appStore: appStore)
    }

    static func temporaryDirectory(_ name: String) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        process.waitUntilExit()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, output)
    }

    static func grant(_ k: TestKakin, customer: String, key: String) async throws -> TestKakin.Response {
        try await k.request("POST", "/v1/customers/\(customer)/wallet/grants", json: ["amount": 10, "reason": "load"],
                            headers: ["Idempotency-Key": key])
    }

    // MARK: The disk fills up

    @Test func fullDiskAnswers503RetryableNothingHalfAppliedAndServiceResumesWhenSpaceReturns() async throws {
        let mount = try Self.temporaryDirectory("full-disk")
        defer { try? FileManager.default.removeItem(at: mount) }
        let mounted = try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=6m", "tmpfs", mount.path])
        guard mounted.status == 0 else {
            Issue.record("""
                THE FULL-DISK TEST DID NOT RUN: mounting a 6 MiB tmpfs at \(mount.path) was refused \
                (\(mounted.output.trimmingCharacters(in: .whitespacesAndNewlines))). It needs root (CAP_SYS_ADMIN).
                """)
            return
        }
        defer {
            if (try? Self.run("/bin/umount", [mount.path]))?.status != 0 { _ = try? Self.run("/bin/umount", ["-l", mount.path]) }
        }
        let k = try await Self.start(directory: mount)
        let customers = (0..<4).map { "disk\($0)" }
        for c in customers { #expect(try await Self.grant(k, customer: c, key: "warm-\(c)").status == 201) }

        // Load runs while a filler file eats the remaining space.
        let filler = mount.appendingPathComponent("filler").path
        let filled = Flag()
        let fillTask = Task.detached {
            let fd = open(filler, O_CREAT | O_WRONLY, 0o644)
            defer { close(fd) }
            let chunk = [UInt8](repeating: 0xAB, count: 64 * 1024)
            while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 { usleep(2_000) }
            filled.set()
        }
        struct Outcome: Sendable { var key: String; var customer: String; var status: Int; var code: String?; var retryAfter: String? }
        let outcomes = try await withThrowingTaskGroup(of: [Outcome].self) { group in
            for c in customers {
                group.addTask {
                    var mine: [Outcome] = []
                    var refusedAfterFull = 0
                    for i in 0..<3_000 where refusedAfterFull < 15 {
                        let key = "\(c)-\(i)"
                        let r = try await Self.grant(k, customer: c, key: key)
                        mine.append(Outcome(key: key, customer: c, status: r.status, code: r.errorCode, retryAfter: r.headers["retry-after"]))
                        if r.status != 201, filled.isSet { refusedAfterFull += 1 }
                    }
                    return mine
                }
            }
            return try await group.reduce(into: [Outcome]()) { $0 += $1 }
        }
        await fillTask.value
        let refused = outcomes.filter { $0.status != 201 }
        #expect(filled.isSet, "the filler never hit ENOSPC")
        #expect(!refused.isEmpty, "no request was refused while the disk was full")
        for r in refused {
            #expect(r.status == 503 && r.code == "retryable_failure" && r.retryAfter != nil, "\(r.key): \(r.status) \(r.code ?? "-")")
        }
        // Nothing half-applied: every balance is exactly its acknowledged grants, and the ledger adds up.
        #expect(try await k.ledgerCheckOK())
        for c in customers {
            let acknowledged = outcomes.filter { $0.customer == c && $0.status == 201 }.count + 1
            #expect(try await k.wallet(c).free == Int64(10 * acknowledged))
        }

        // Space comes back: the refused requests go through on retry, without a restart.
        try FileManager.default.removeItem(atPath: filler)
        for r in refused {
            #expect(try await Self.grant(k, customer: r.customer, key: r.key).status == 201, "\(r.key) after space returned")
        }
        #expect(try await k.ledgerCheckOK())
        for c in customers {
            let total = outcomes.filter { $0.customer == c }.count + 1
            #expect(try await k.wallet(c).free == Int64(10 * total))
        }
        await k.runtime.shutdown(gracePeriodSeconds: 5)
    }

    // MARK: Load past capacity

    @Test func overloadedServerAnswers503WithRetryAfterInsteadOfQueueing() async throws {
        let dir = try Self.temporaryDirectory("overload")
        let gate = ReleaseGate()
        let running = Counter()
        let k = try await Self.start(directory: dir, http: { $0.handlersMax = 2 }, extraRoutes: { router in
            router.add("GET", "/test/hold") { _, _ in
                running.increment()
                await gate.wait()
                return .text("held")
            }
        })
        defer { try? FileManager.default.removeItem(at: dir) }
        let holds = (0..<2).map { _ in Task { try await k.request("GET", "/test/hold") } }
        while running.value < 2 { try await Task.sleep(for: .milliseconds(10)) }
        for i in 0..<10 {
            let r = try await k.request("GET", "/v1/customers/over\(i)")
            #expect(r.status == 503)
            #expect(r.errorCode == "service_unavailable")
            #expect(r.errorId == "KKN-1009")
            #expect(r.headers["retry-after"] == "1")
            #expect(r.headers["x-request-id"] == r.json["error"]?["requestId"]?.stringValue)
        }
        #expect(running.value == 2)
        gate.open()
        for h in holds { #expect(try await h.value.status == 200) }
        #expect(try await k.request("GET", "/v1/customers/over0").status == 200)
        await k.stop()
    }

    @Test func fullDatabaseQueueAnswers503WithRetryAfter() async throws {
        let dir = try Self.temporaryDirectory("queue")
        defer { try? FileManager.default.removeItem(at: dir) }
        var options = SQLiteDatabase.Options()
        options.queueDepthMax = 1
        let database = try SQLiteDatabase(path: dir.appendingPathComponent("kakin.db").path, options: options)
        let store = KakinStore(database: database, ids: RandomIDGenerator(), clock: SystemClock())
        try await store.migrate()
        // The writer thread is held inside one body (until the gate opens); one more fits the queue; the rest are refused.
        let gate = DispatchSemaphore(value: 0)
        let holding = Atomic<Bool>(false)
        let slow = Task { try await database.write { _ in holding.store(true, ordering: .relaxed); gate.wait() } }
        #expect(try await eventually { holding.load(ordering: .relaxed) }, "the writer never took the held body")
        let refusals = Counter()
        let attempts = (0..<6).map { i in
            Task { () -> KakinError? in
                do throws(KakinError) {
                    _ = try await store.transaction { r in try r.ensureCustomer("queued\(i)") }
                    return nil
                } catch {
                    refusals.increment()
                    return error
                }
            }
        }
        // Refusals answer at once; the queued one waits for the writer: five of six are refused while it is held.
        #expect(try await eventually { refusals.value >= 5 }, "\(refusals.value) refused")
        gate.signal()
        _ = try await slow.value
        var errors: [KakinError] = []
        for attempt in attempts { if let e = await attempt.value { errors.append(e) } }
        #expect(errors.count == 5)
        for e in errors {
            #expect(e.kind == .serviceUnavailable)
            let response = HTTPResponse.error(e, requestId: "req_1")
            #expect(response.status == 503)
            #expect(response.headers["Retry-After"] == "1")
        }
        await database.close()
    }

    // MARK: Bodies cut off, oversized heads

    @Test func requestBodyThatStopsMidwayIsDiscardedAndChangesNothing() async throws {
        let dir = try Self.temporaryDirectory("cut-body")
        let k = try await Self.start(directory: dir, http: { $0.receiveTimeoutSeconds = 1 })
        defer { try? FileManager.default.removeItem(at: dir) }
        let body = Array(#"{"amount": 10, "reason": "cut"}"#.utf8)
        let head = "POST /v1/customers/cut/wallet/grants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + "Idempotency-Key: cut-1\r\nContent-Length: \(body.count)\r\n\r\n"
        let port = k.runtime.port
        // Half the body, then silence (cut off by the receive timeout), then half the body and a hang-up.
        let answered = try await blockingSocket(port: port) { fd in
            Self.sendAll(fd, Array(head.utf8) + body.prefix(body.count / 2))
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0) > 0
        }
        #expect(!answered)
        // The server is done with each request it read (answered or cut off) when none is in flight: the hang-up comes
        // once the server holds the half-read request, and the checks below once it has let it go.
        let server = k.runtime.server
        #expect(try await eventually { server.inFlightCount == 0 })
        _ = try await blockingSocket(port: port) { fd in
            Self.sendAll(fd, Array(head.utf8) + body.prefix(body.count / 2))
            while server.inFlightCount == 0 { usleep(1_000) }
        }
        #expect(try await eventually { server.inFlightCount == 0 }, "the cut-off request is still in flight")
        #expect(try await k.wallet("cut") == WalletBalance(paid: 0, free: 0))
        #expect(try await k.request("GET", "/v1/customers/cut/wallet/ledger").json["entries"]?.arrayValue?.count == 0)
        // The same key with the whole body is a first-time grant.
        #expect(try await k.request("POST", "/v1/customers/cut/wallet/grants", json: ["amount": 10, "reason": "cut"],
                                    headers: ["Idempotency-Key": "cut-1"]).status == 201)
        #expect(try await k.wallet("cut") == WalletBalance(paid: 0, free: 10))
        await k.stop()
    }

    @Test func oversizedHeadsAnswerTheContractsErrorBodyAndMHDsOwnRefusalsAreTheDocumentedGap() async throws {
        let dir = try Self.temporaryDirectory("heads")
        let k = try await Self.start(directory: dir)
        defer { try? FileManager.default.removeItem(at: dir) }
        let big = String(repeating: "a", count: 20 * 1024)
        let headers = try await k.request("GET", "/v1/customers/u1", headers: ["X-Big": big])
        #expect(headers.status == 431)
        #expect(headers.errorId == "KKN-1040")
        #expect(headers.json["error"]?["code"] == "request_header_fields_too_large")
        #expect(headers.headers["x-request-id"] == headers.json["error"]?["requestId"]?.stringValue)
        let uri = try await k.request("GET", "/v1/customers/u1?q=" + String(repeating: "b", count: 9 * 1024))
        #expect(uri.status == 414)
        #expect(uri.errorId == "KKN-1041")
        #expect(uri.headers["x-request-id"] != nil)
        // Counted like every other answer.
        let metrics = String(decoding: try await k.request("GET", "/metrics").body, as: UTF8.self)
        #expect(metrics.contains("kakin_http_requests_total{method=\"-\",route=\"refused\",status=\"431\"} 1"), "\(metrics)")
        #expect(metrics.contains("kakin_http_requests_total{method=\"-\",route=\"refused\",status=\"414\"} 1"))
        #expect(metrics.contains("kakin_errors_total{id=\"KKN-1040\",code=\"request_header_fields_too_large\"} 1"))
        // libmicrohttpd answers these itself, in HTML and without X-Request-Id (see Sources/HTTPServer/README.md).
        let port = k.runtime.port
        let malformed = try await blockingSocket(port: port) { fd in
            Self.sendAll(fd, Array("GET /v1/customers/u1\r\nHost: x\r\n\r\n".utf8))
            return Self.readAll(fd)
        }
        #expect(malformed.hasPrefix("HTTP/1.1 400"))
        #expect(!malformed.lowercased().contains("x-request-id"))
        let huge = try await blockingSocket(port: port) { fd in
            Self.sendAll(fd, Array("GET /v1/customers/u1 HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "c", count: 200 * 1024))\r\n\r\n".utf8))
            return Self.readAll(fd)
        }
        #expect(huge.hasPrefix("HTTP/1.1 431"))
        #expect(try await k.request("GET", "/v1/customers/u1").status == 200)
        await k.stop()
    }

    // MARK: Sockets

    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }

    static func readAll(_ fd: Int32) -> String {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[0..<n]
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Runs blocking socket work on its own thread (never on Swift's small cooperative pool), on a fresh
/// connection to the loopback port, with a 20 s receive timeout.
func blockingSocket<T: Sendable>(port: Int, _ work: @escaping @Sendable (Int32) -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var timeout = timeval(tv_sec: 20, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                close(fd)
                continuation.resume(throwing: NotificationRefused(status: -1, body: "connect failed: errno \(errno)"))
                return
            }
            let result = work(fd)
            close(fd)
            continuation.resume(returning: result)
        }.start()
    }
}

final class Counter: Sendable {
    private let count = Atomic<Int>(0)
    func increment() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .relaxed) }
    var isSet: Bool { value.load(ordering: .relaxed) }
}

/// Handlers wait here until the test opens it.
final class ReleaseGate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}
