import Foundation
import HTTPServer
import KakinCore
import KakinEvents
import KakinEventsListener
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import KakinTestPostgres
import Synchronization
import Testing

/// Real time: the worker's schedules and signatures, the receiver's tolerance.
struct RealClock: Clock {
    func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

/// Real time moved ahead by what a test says (a lease run out without waiting for it).
final class MovedClock: Clock {
    private let aheadMs = Atomic<Int64>(0)
    func nowMs() -> Int64 { RealClock().nowMs() + aheadMs.load(ordering: .relaxed) }
    func move(byMs ms: Int64) { aheadMs.add(ms, ordering: .relaxed) }
}

final class SequentialIDs: IDGenerator {
    let counter = Atomic<Int>(0)
    func uuid() -> String { String(format: "00000000-0000-4000-8000-%012d", counter.add(1, ordering: .relaxed).newValue) }
    func id(prefix: String) -> String { prefix + String(format: "%06d", counter.add(1, ordering: .relaxed).newValue) }
}

/// `count` migrated databases on one store (one SQLite file, or one PostgreSQL schema): processes sharing it.
func withStores(_ backend: Backend, count: Int = 1, _ body: ([KakinStore]) async throws -> Void) async throws {
    func run(_ open: () throws -> any SQLDatabase) async throws {
        var databases: [any SQLDatabase] = []
        do {
            for _ in 0..<count { databases.append(try open()) }
            try await databases[0].migrate(KakinStore.migrations)
            try await body(databases.map { KakinStore(database: $0, ids: SequentialIDs(), clock: RealClock()) })
        } catch {
            for d in databases { await d.close() }
            throw error
        }
        for d in databases { await d.close() }
    }
    switch backend {
    case .sqlite:
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.db").path
        try await run { try SQLiteDatabase(path: path) }
    case .postgresql:
        try await OutboxTestGate.shared.run {
            try await TestPostgres.withSchema { schema in
                try await run { try PostgresDatabase(url: schema.url, options: .init(writerConnections: 1, readerConnections: 1)) }
            }
        }
    }
}

/// A webhook receiver on a real local HTTP server: `kakin events listen`'s `WebhookListener`, plus faults a test
/// turns on — hanging some first attempts past the sender's deadline (their answer comes too late), answering
/// every request with a status without reading it, or being down (connection refused).
final class TestReceiver: Sendable {
    struct Faults: Sendable {
        /// Share of events whose first attempt hangs for `hangMs` before the listener sees it.
        var hangShare = 0.0
        var hangMs: Int64 = 0
        /// Hang on every attempt of those events, not only the first (an endpoint that never answers in time).
        var hangEveryAttempt = false
        /// Answer every request with this status without reading it (nil: the listener answers).
        var answerAll: Int? = nil
    }

    final class State: Sendable {
        struct Values {
            var faults: Faults
            var printed: [String] = []
            var attempts: [String: Int] = [:]
            var requests = 0
        }
        let values: Mutex<Values>
        init(_ faults: Faults) { values = Mutex(Values(faults: faults)) }
    }

    let listener: WebhookListener
    let state: State
    private let server = Mutex<HTTPServer?>(nil)
    let port: Int

    var url: String { "http://127.0.0.1:\(port)/hooks/kakin" }

    init(secrets: [[UInt8]], failRate: Double = 0, seed: UInt64 = 1, faults: Faults = Faults()) throws {
        let state = State(faults)
        let listener = WebhookListener(secrets: secrets, failRate: failRate, seed: seed, output: { line in
            state.values.withLock { $0.printed.append(line) }
        })
        let server = try Self.start(port: 0, Self.handler(listener, state))
        self.state = state
        self.listener = listener
        self.port = server.port
        self.server.withLock { $0 = server }
    }

    static func start(port: Int, _ handler: @escaping HTTPHandler) throws -> HTTPServer {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: port)
        configuration.threadCount = 2
        configuration.bodyBytesMax = WebhookListener.bodyBytesMax
        let server = HTTPServer(configuration: configuration, handler: handler,
                                rejectionResponder: { rejection, _ in .text("\(rejection)", status: rejection.suggestedStatus) })
        try server.start()
        return server
    }

    static func handler(_ listener: WebhookListener, _ state: State) -> HTTPHandler {
        { request in
            let id = request.headers["Kakin-Event-Id"] ?? ""
            let (attempt, faults) = state.values.withLock { v -> (Int, Faults) in
                v.requests += 1
                v.attempts[id, default: 0] += 1
                return (v.attempts[id] ?? 1, v.faults)
            }
            if let status = faults.answerAll { return .text("refused by the test", status: status) }
            if attempt == 1 || faults.hangEveryAttempt, faults.hangShare > 0, share(id) < faults.hangShare {
                guard (try? await Task.sleep(for: .milliseconds(faults.hangMs))) != nil else { return .text("cancelled", status: 503) }
                if faults.hangEveryAttempt { return .text("too late", status: 504) }
            }
            return await listener.handle(request)
        }
    }

    /// A fixed draw in [0, 1) per event id.
    static func share(_ id: String) -> Double {
        var h: UInt64 = 0x1234_5678_9abc_def0
        for b in id.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        var random = SeededRandom(seed: h)
        return Double(random.next() >> 11) / Double(1 << 53)
    }

    func setFaults(_ faults: Faults) { state.values.withLock { $0.faults = faults } }

    var printed: [String] { state.values.withLock { $0.printed } }
    var requests: Int { state.values.withLock { $0.requests } }

    /// Connection refused from now on, until `comeBack`.
    func goDown() async {
        let running = server.withLock { s -> HTTPServer? in
            defer { s = nil }
            return s
        }
        await running?.shutdown(gracePeriodSeconds: 0.2)
    }

    /// Listens again on the same port.
    func comeBack() throws {
        let started = try Self.start(port: port, Self.handler(listener, state))
        server.withLock { $0 = started }
    }

    func stop() async { await goDown() }

    /// Waits until `count` events were printed (or `timeoutSeconds` passed); answers whether they were.
    func waitForPrinted(_ count: Int, timeoutSeconds: Double = 60) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            if printed.count >= count { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return printed.count >= count
    }
}

/// Reads `value` until `done` holds for it (or `timeoutSeconds` passed); answers the last reading. A test waits on the very
/// condition it then asserts: on a loaded machine anything else may still be under way.
func polled<T>(timeoutSeconds: Double = 60, _ value: () async throws -> T, until done: (T) -> Bool) async throws -> T {
    let deadline = Date().addingTimeInterval(timeoutSeconds)
    var last = try await value()
    while !done(last), Date() < deadline {
        try await Task.sleep(for: .milliseconds(20))
        last = try await value()
    }
    return last
}

/// The printed events, grouped per customer in the order they were printed: `[customerId: [sequence]]`, with the ids.
func printedByCustomer(_ lines: [String]) -> (sequences: [String: [Int64]], ids: [String]) {
    var sequences: [String: [Int64]] = [:]
    var ids: [String] = []
    for line in lines {
        guard let event = Event(payload: line) else {
            Issue.record("printed a line that is not an event: \(line.prefix(200))")
            continue
        }
        sequences[event.customerId, default: []].append(event.sequence)
        ids.append(event.id)
    }
    return (sequences, ids)
}

/// Worker options scaled for tests: a 200 ms deadline per attempt, retries from 10 ms doubling to 100 ms.
func testWorkerOptions(windowMs: Int64 = 120_000) -> WebhookDeliveryWorker.Options {
    var o = WebhookDeliveryWorker.Options()
    o.timeoutMs = 200
    o.leaseMs = 5_000
    o.pollIntervalMs = 20
    o.concurrencyPerEndpoint = 4
    o.schedule = RetrySchedule(firstDelayMs: 10, delayMaxMs: 100, windowMs: windowMs)
    return o
}

/// The real sender, counting what came of each attempt (so a test can show its faults really happened).
final class CountingSender: WebhookSender {
    let base = HTTPWebhookSender()
    let outcomes = Mutex<[String: Int]>([:])

    func send(_ request: WebhookRequest) async -> WebhookResponse {
        let response = await base.send(request)
        let key: String
        switch response {
        case .answered(let status, _): key = "\(status)"
        case .failed(let reason): key = reason.hasPrefix("timed out") ? "timed out" : reason
        }
        outcomes.withLock { $0[key, default: 0] += 1 }
        return response
    }

    var counts: [String: Int] { outcomes.withLock { $0 } }
}
