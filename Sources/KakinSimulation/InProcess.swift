import AppStoreClient
import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinEvents
import KakinStorage
import StoreAPITransport
import Synchronization

/// A store's API client talking to its simulator in the same process: the request is handed to the simulator's router
/// (`AppStoreSimulator.handle`, `GooglePlaySimulator.handle`) instead of a socket. Same paths, same bearer checks.
/// `refuse` answers in the store's place when it says so (the world's Play API faults).
struct InProcessTransport: HTTPTransport {
    var refuse: @Sendable (_ path: String) -> HTTPResponse? = { _ in nil }
    let handle: @Sendable (HTTPRequest) async -> HTTPResponse

    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        guard let components = URLComponents(string: request.url) else { throw .connectionFailed(reason: "bad URL") }
        let items = (components.queryItems ?? []).map { (name: $0.name, value: $0.value ?? "") }
        var headers = HTTPHeaders()
        for h in request.headers { headers.add(h.name, h.value) }
        let answer: HTTPResponse
        if let refused = refuse(components.path) {
            answer = refused
        } else {
            answer = await handle(HTTPRequest(method: request.method, path: components.path, queryItems: items, headers: headers, body: request.body ?? []))
        }
        var out: [String: String] = [:]
        for field in answer.headers { out[field.name] = field.value }
        return HTTPClientResponse(status: answer.status, headers: out, body: answer.body)
    }
}

/// The database with a fault switch: while `full` is set, every write fails as SQLite does on a full disk
/// (`SQLITE_FULL`) and nothing of it is applied. Reads go through.
final class FaultyDatabase: SQLDatabase {
    let inner: any SQLDatabase
    let full = Atomic<Bool>(false)
    /// Writes refused while full (counted for the trace).
    let refused = Atomic<Int>(0)

    init(_ inner: any SQLDatabase) { self.inner = inner }

    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        if full.load(ordering: .relaxed) {
            refused.add(1, ordering: .relaxed)
            throw SQLError(kind: .full, message: "database or disk is full (simulated)")
        }
        return try await inner.write(body)
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await inner.read(body)
    }

    func shortRead<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await inner.shortRead(body)
    }

    func migrate(_ migrations: [SQLMigration]) async throws { try await inner.migrate(migrations) }

    func close() async { await inner.close() }
}

/// The customer's backend receiving Kakin's webhooks: answers 2xx, or (with the webhook fault) fails or times out a
/// seeded share of requests. Records what it acknowledged, for the events invariant.
final class WorldWebhookReceiver: WebhookSender {
    struct Received: Sendable {
        var eventId: String
        var customerId: String
        var sequence: Int64
    }

    struct State {
        var rng: SplitMix64
        var failRate: Double
        /// Acknowledged (2xx) deliveries in arrival order.
        var acknowledged: [Received] = []
        var attempts = 0
    }

    let state: Mutex<State>

    init(seed: UInt64, failRate: Double) {
        state = Mutex(State(rng: SplitMix64(seed: seed ^ 0x7765_6268_6F6F_6B73), failRate: failRate))
    }

    func send(_ request: WebhookRequest) async -> WebhookResponse {
        guard let json = try? JSONParser.parse(request.body), let id = json["id"]?.stringValue, let customer = json["customerId"]?.stringValue,
              case .int(let sequence)? = json["sequence"] else {
            return .answered(status: 400, bodyExcerpt: "not an event")
        }
        let debug = ProcessInfo.processInfo.environment["KAKIN_SIM_DEBUG_CUSTOMER"] == customer
        return state.withLock { s in
            s.attempts += 1
            if debug { print("webhook attempt \(customer) #\(sequence) \(id) \(json["type"]?.stringValue ?? "")") }
            if s.failRate > 0, s.rng.chance(s.failRate) {
                return s.rng.chance(0.5) ? .failed(reason: "timed out (simulated)") : .answered(status: 503, bodyExcerpt: "busy (simulated)")
            }
            s.acknowledged.append(Received(eventId: id, customerId: customer, sequence: sequence))
            return .answered(status: 200, bodyExcerpt: "")
        }
    }

    func takeAcknowledged() -> [Received] { state.withLock { s in defer { s.acknowledged = [] }; return s.acknowledged } }
}

/// The Developer API client's waits between retries, in a world whose time is simulated: none.
struct NoWait: RetrySleeper {
    func sleep(ms: Int64) async throws(CancellationError) {}
}
