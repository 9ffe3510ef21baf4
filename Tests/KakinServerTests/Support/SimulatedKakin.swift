import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer

/// Kakin in local mode for one test: the App Store simulator mounted in-process (its CA trusted, its
/// clock Kakin's, its notifications delivered directly), SQLite in a temporary directory, HTTP on an
/// ephemeral port. The test drives the simulator like QA would and reads Kakin like an app would.
final class SimulatedKakin: Sendable {
    let local: LocalMode
    let runtime: KakinRuntime
    let directory: URL
    var simulator: AppStoreSimulator { local.simulator }
    var app: KakinApp { runtime.app }
    var nowMs: Int64 { simulator.clock.nowMs() }

    static let start2026 = Timestamp.parseRFC3339("2026-01-01T00:00:00Z")!

    static func start(catalog: Catalog = .demo, gracePeriodDays: Int? = nil, ids: (any IDGenerator)? = nil, offerRules: [OfferRule] = [],
                      consumption: ConsumptionInformationPolicy? = nil, auth: Configuration.Auth? = nil, database: Configuration.Database? = nil,
                      apple2026: Apple2026AppSettings = Apple2026AppSettings(),
                      deliveries: @escaping (any NotificationSink) -> any NotificationSink = { $0 },
                      configure: (inout Configuration) -> Void = { _ in },
                      configureRuntime: (inout KakinRuntime.Options) -> Void = { _ in }) async throws -> SimulatedKakin {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // A start that fails (a configuration a test expects refused) leaves no directory it made behind.
        var started = false
        defer { if !started { try? FileManager.default.removeItem(at: dir) } }
        var config = Configuration()
        config.port = 0
        config.database = database ?? .sqlite(path: dir.appendingPathComponent("kakin.db").path)
        config.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox],
                                         catalog: catalog, offerRules: Dictionary(offerRules.map { ($0.offerId, $0) }, uniquingKeysWith: { $1 }))]
        config.apps[0].consumptionInformation = consumption
        config.apps[0].apple2026 = apple2026
        config.auth = auth
        configure(&config)
        var simConfig = SimulatorConfiguration(catalog: catalog)
        simConfig.gracePeriodDays = gracePeriodDays
        let local = try LocalMode(configuration: config, simulatorConfiguration: simConfig, simulatorStartMs: start2026,
                                  logger: Logger(minimum: .error), deliveries: deliveries)
        var options = local.runtimeOptions()
        options.ids = ids ?? options.ids
        configureRuntime(&options)
        let runtime = try await KakinRuntime.start(options)
        try await local.attach(to: runtime)
        started = true
        return SimulatedKakin(local: local, runtime: runtime, directory: dir)
    }

    static func with(catalog: Catalog = .demo, gracePeriodDays: Int? = nil, ids: (any IDGenerator)? = nil, offerRules: [OfferRule] = [],
                     consumption: ConsumptionInformationPolicy? = nil, auth: Configuration.Auth? = nil, database: Configuration.Database? = nil,
                     apple2026: Apple2026AppSettings = Apple2026AppSettings(),
                     deliveries: @escaping (any NotificationSink) -> any NotificationSink = { $0 },
                     configure: (inout Configuration) -> Void = { _ in },
                     configureRuntime: (inout KakinRuntime.Options) -> Void = { _ in },
                     _ body: (SimulatedKakin) async throws -> Void) async throws {
        try await using(try await start(catalog: catalog, gracePeriodDays: gracePeriodDays, ids: ids, offerRules: offerRules,
                                        consumption: consumption, auth: auth, database: database, apple2026: apple2026, deliveries: deliveries,
                                        configure: configure, configureRuntime: configureRuntime),
                        stop: { await $0.stop() }, body)
    }

    init(local: LocalMode, runtime: KakinRuntime, directory: URL) {
        self.local = local
        self.runtime = runtime
        self.directory = directory
    }

    func stop() async {
        await runtime.shutdown(gracePeriodSeconds: 5)
        try? FileManager.default.removeItem(at: directory)
    }

    struct SimulatorRefused: Error, CustomStringConvertible {
        var status: Int
        var body: String
        var description: String { "simulator answered \(status): \(body)" }
    }

    /// Calls the simulator's control API in-process; it answers once Kakin has applied what it was sent
    /// (local mode's read-your-writes). The path may end in a query (`?name=value&…`, not percent-encoded).
    @discardableResult
    func sim(_ method: String, _ pathAndQuery: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        let (path, query) = Self.split(pathAndQuery)
        let request = HTTPRequest(method: method, path: path, rawPath: path, queryItems: query, headers: headers,
                                  body: body?.serialized() ?? [], requestId: "test", remoteAddress: nil)
        let response = await simulator.handle(request)
        guard (200..<300).contains(response.status) else {
            throw SimulatorRefused(status: response.status, body: String(decoding: response.body, as: UTF8.self))
        }
        return (try? JSONParser.parse(response.body)) ?? .null
    }

    /// A path with its query (`/v1/x?a=1&b=2`) as the HTTP edge hands it over.
    static func split(_ pathAndQuery: String) -> (path: String, query: [(name: String, value: String)]) {
        let parts = pathAndQuery.split(separator: "?", maxSplits: 1).map(String.init)
        let query = parts.count > 1 ? parts[1].split(separator: "&").map { item -> (name: String, value: String) in
            let pair = item.split(separator: "=", maxSplits: 1).map(String.init)
            return (pair[0], pair.count > 1 ? pair[1] : "")
        } : []
        return (parts[0], query)
    }

    /// Kakin's own HTTP route, called in-process.
    func kakin(_ method: String, _ pathAndQuery: String, _ body: JSONValue? = nil,
               headers extra: [(String, String)] = []) async -> (status: Int, json: JSONValue) {
        var headers = HTTPHeaders()
        if body != nil { headers.add("Content-Type", "application/json") }
        for (name, value) in extra { headers.add(name, value) }
        let (path, query) = Self.split(pathAndQuery)
        let request = HTTPRequest(method: method, path: path, rawPath: path, queryItems: query, headers: headers,
                                  body: body?.serialized() ?? [], requestId: "test", remoteAddress: nil)
        let response = await app.handle(request)
        return (response.status, (try? JSONParser.parse(response.body)) ?? .null)
    }

    func token(_ customer: String) async throws -> String {
        try await app.services.statusReads.status(customer).customer.appAccountToken
    }

    /// Buys in the simulated App Store with the customer's token; returns the simulator's answer.
    @discardableResult
    func buy(_ customer: String, _ productId: String, offer: JSONValue? = nil, familyShared: Bool = false,
             withToken: Bool = true) async throws -> JSONValue {
        var body: [String: JSONValue] = ["productId": .string(productId)]
        if !familyShared, withToken { body["appAccountToken"] = .string(try await token(customer)) }
        if let offer { body["offer"] = offer }
        if familyShared { body["familyShared"] = true }
        return try await sim("POST", "/simulator/v1/purchases", .object(body))
    }

    @discardableResult
    func action(_ originalTransactionId: String, _ action: String, _ extra: [String: JSONValue] = [:]) async throws -> JSONValue {
        var body = extra
        body["action"] = .string(action)
        return try await sim("POST", "/simulator/v1/subscriptions/\(originalTransactionId)/actions", .object(body))
    }

    func advance(days: Int64) async throws {
        try await sim("POST", "/simulator/v1/clock", ["advanceSeconds": .int(days * 86_400)])
    }

    func advance(to ms: Int64) async throws {
        try await sim("POST", "/simulator/v1/clock", ["to": .string(Timestamp.rfc3339(ms))])
    }

    /// `GET /v1/customers/{id}` through Kakin's own route.
    func status(_ customer: String) async throws -> JSONValue {
        await kakin("GET", "/v1/customers/\(customer)").json
    }

    func subscription(_ customer: String) async throws -> JSONValue {
        try await status(customer)["subscriptions"]?.arrayValue?.first ?? .null
    }
}

/// Deliveries the test controls: cut (the receiver is unreachable: the simulator retries on Apple's
/// schedule), and optionally copied to a second receiver that never misses one.
final class NotificationSwitch: NotificationSink, @unchecked Sendable {
    let inner: any NotificationSink
    let lock = NSLock()
    var reachable = true
    var copy: (@Sendable (String) async -> Void)?

    init(_ inner: any NotificationSink) { self.inner = inner }

    func set(reachable: Bool) { lock.withLock { self.reachable = reachable } }
    func copy(to receiver: @escaping @Sendable (String) async -> Void) { lock.withLock { copy = receiver } }

    func deliver(signedPayload: String) async -> SendAttemptResult {
        let (up, copy) = lock.withLock { (reachable, self.copy) }
        await copy?(signedPayload)
        return up ? await inner.deliver(signedPayload: signedPayload) : .noResponse
    }
}

/// Deterministic ids, so two Kakins fed the same events create the same customers and tokens.
final class SequentialIDs: IDGenerator, @unchecked Sendable {
    let lock = NSLock()
    var uuids = 0
    var ids = 0
    func uuid() -> String {
        let n = lock.withLock { uuids += 1; return uuids }
        return String(format: "00000000-0000-4000-8000-%012d", n)
    }
    func id(prefix: String) -> String { prefix + String(lock.withLock { ids += 1; return ids }) }
}
