import Foundation
import HTTPServer
import KakinCore
import KakinEvents
import KakinEventsListener
import Synchronization

/// A team's backend receiving Kakin's webhooks, on a real loopback HTTP server: `kakin events listen`'s
/// `WebhookListener` (signature checked, deduplicated by event id, a seeded share failed with 500), plus faults a
/// test switches: refuse everything with a status, hang a seeded share of first attempts past Kakin's deadline, or
/// be down (connection refused) and come back on the same port.
final class WebhookReceiver: Sendable {
    struct Faults: Sendable {
        /// Answer every request with this status without reading it (nil: the listener answers).
        var answerAll: Int? = nil
        /// Share of events whose first attempt hangs for `hangMs` before the listener sees it.
        var hangShare = 0.0
        var hangMs: Int64 = 0
        /// Hold every attempt of those events, not only the first (an endpoint that stopped answering in time).
        var hangEveryAttempt = false
    }

    struct Values {
        var faults: Faults
        var printed: [String] = []
        var requests = 0
        var attempts: [String: Int] = [:]
        /// First attempts held past Kakin's deadline.
        var hangs = 0
        /// Requests being answered now.
        var inFlight = 0
    }

    final class State: Sendable {
        let values: Mutex<Values>
        init(_ faults: Faults) { values = Mutex(Values(faults: faults)) }
        func withLock<T>(_ body: (inout Values) -> T) -> T { values.withLock { body(&$0) } }
    }

    let listener: WebhookListener
    private let values: State
    private let server = Mutex<HTTPServer?>(nil)
    let port: Int
    var url: String { "http://127.0.0.1:\(port)/hooks/kakin" }

    init(secret: String, failRate: Double = 0, seed: UInt64 = 1, faults: Faults = Faults()) throws {
        let values = State(faults)
        self.values = values
        listener = WebhookListener(secrets: [Array(secret.utf8)], failRate: failRate, seed: seed, output: { line in
            values.withLock { $0.printed.append(line) }
        })
        let started = try Self.start(port: 0, handler: Self.handler(listener, values))
        port = started.port
        server.withLock { $0 = started }
    }

    private static func start(port: Int, handler: @escaping HTTPHandler) throws -> HTTPServer {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: port)
        configuration.threadCount = 2
        configuration.bodyBytesMax = WebhookListener.bodyBytesMax
        let server = HTTPServer(configuration: configuration, handler: handler,
                                rejectionResponder: { rejection, _ in .text("\(rejection)", status: rejection.suggestedStatus) })
        try server.start()
        return server
    }

    private static func handler(_ listener: WebhookListener, _ values: State) -> HTTPHandler {
        { request in
            let id = request.headers["Kakin-Event-Id"] ?? ""
            values.withLock { $0.inFlight += 1 }
            defer { values.withLock { $0.inFlight -= 1 } }
            let (faults, attempt) = values.withLock { v -> (Faults, Int) in
                v.requests += 1
                v.attempts[id, default: 0] += 1
                return (v.faults, v.attempts[id] ?? 1)
            }
            if let status = faults.answerAll { return .text("refused by the test", status: status) }
            if attempt == 1 || faults.hangEveryAttempt, faults.hangShare > 0, share(id) < faults.hangShare {
                values.withLock { $0.hangs += 1 }
                guard (try? await Task.sleep(for: .milliseconds(faults.hangMs))) != nil else { return .text("cancelled", status: 503) }
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

    func setFaults(_ faults: Faults) { values.withLock { $0.faults = faults } }

    /// Each event printed once, in the order they were first processed (the listener's output lines).
    var printed: [String] { values.withLock { $0.printed } }
    var printedEvents: [JSONValue] { printed.compactMap { try? JSONParser.parse($0) } }
    var requests: Int { values.withLock { $0.requests } }
    var hangs: Int { values.withLock { $0.hangs } }
    var inFlight: Int { values.withLock { $0.inFlight } }

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
        let started = try Self.start(port: port, handler: Self.handler(listener, values))
        server.withLock { $0 = started }
    }

    func stop() async { await goDown() }

    /// Waits until `predicate` holds for the printed events (or `timeoutSeconds` passed); answers whether it did.
    func wait(timeoutSeconds: Double = 30, until predicate: ([JSONValue]) -> Bool) async throws -> Bool {
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while Date() < deadline {
            if predicate(printedEvents) { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return predicate(printedEvents)
    }
}

/// Polls `condition` until it holds or `timeoutSeconds` pass; answers whether it held.
func eventually(timeoutSeconds: Double = 30, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(timeoutSeconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(25))
    }
    return try await condition()
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
        case .failed(let reason): key = reason.hasPrefix("timed out") ? "timed out" : reason.hasPrefix("cannot connect") ? "cannot connect" : reason
        }
        outcomes.withLock { $0[key, default: 0] += 1 }
        return response
    }

    var counts: [String: Int] { outcomes.withLock { $0 } }
}

/// A process killed in the middle of delivering: every send it starts never comes back (its claims stay held until
/// their lease runs out), until `release` ends them as failed.
final class HangingSender: WebhookSender {
    private let state = Mutex<(hung: [String], waiters: [CheckedContinuation<Void, Never>], released: Bool)>(([], [], false))

    func send(_ request: WebhookRequest) async -> WebhookResponse {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.released { return true }
                s.hung.append(request.headers["Kakin-Event-Id"] ?? "")
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
        return .failed(reason: "the process was killed")
    }

    /// Event ids whose delivery was cut off.
    var hung: [String] { state.withLock { $0.hung } }

    func release() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.released = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}
