import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
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

    static func start(catalog: Catalog = .demo, gracePeriodDays: Int? = nil) async throws -> SimulatedKakin {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-sim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        var config = Configuration()
        config.port = 0
        config.database = .sqlite(path: dir.appendingPathComponent("kakin.db").path)
        config.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox],
                                         catalog: catalog)]
        var simConfig = SimulatorConfiguration(catalog: catalog)
        simConfig.gracePeriodDays = gracePeriodDays
        let local = try LocalMode(configuration: config, simulatorConfiguration: simConfig, simulatorStartMs: start2026,
                                  logger: Logger(minimum: .error))
        let runtime = try await KakinRuntime.start(local.runtimeOptions())
        try await local.attach(to: runtime)
        return SimulatedKakin(local: local, runtime: runtime, directory: dir)
    }

    static func with(catalog: Catalog = .demo, gracePeriodDays: Int? = nil, _ body: (SimulatedKakin) async throws -> Void) async throws {
        let k = try await start(catalog: catalog, gracePeriodDays: gracePeriodDays)
        do {
            try await body(k)
        } catch {
            await k.stop()
            throw error
        }
        await k.stop()
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

    /// Calls the simulator's control API in-process and lets Kakin apply what it was sent.
    @discardableResult
    func sim(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        let request = HTTPRequest(method: method, path: path, rawPath: path, queryItems: [], headers: headers,
                                  body: body?.serialized() ?? [], requestId: "test", remoteAddress: nil)
        let response = await simulator.handle(request)
        guard (200..<300).contains(response.status) else {
            throw SimulatorRefused(status: response.status, body: String(decoding: response.body, as: UTF8.self))
        }
        await app.drainNotifications()
        return (try? JSONParser.parse(response.body)) ?? .null
    }

    func token(_ customer: String) async throws -> String {
        try await app.store.ensureCustomer(customer).appAccountToken
    }

    /// Buys in the simulated App Store with the customer's token; returns the simulator's answer.
    @discardableResult
    func buy(_ customer: String, _ productId: String, offer: JSONValue? = nil, familyShared: Bool = false) async throws -> JSONValue {
        var body: [String: JSONValue] = ["productId": .string(productId)]
        if !familyShared { body["appAccountToken"] = .string(try await token(customer)) }
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
        let request = HTTPRequest(method: "GET", path: "/v1/customers/\(customer)", rawPath: "/v1/customers/\(customer)",
                                  queryItems: [], headers: HTTPHeaders(), body: [], requestId: "test", remoteAddress: nil)
        return try JSONParser.parse(await app.handle(request).body)
    }

    func subscription(_ customer: String) async throws -> JSONValue {
        try await status(customer)["subscriptions"]?.arrayValue?.first ?? .null
    }
}
