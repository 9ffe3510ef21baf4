import AppStoreSecurity
import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import KakinTestPostgres
import Testing

/// Notifications arrive late, twice and out of order; the final state must not care. A seeded run of the
/// simulator produces ≥ 1,000 customers' histories (subscriptions with plan changes, offers, billing
/// failures, cancellations and refunds; coins and their refunds; non-consumables and passes). One Kakin
/// applies the notifications in the order they were sent; another applies them shuffled, with a quarter of
/// them delivered twice. Every customer's status (and wallet) must be identical. The shuffled Kakin runs on SQLite
/// and, as a second case, on the test run's PostgreSQL cluster: the same answers from both engines.
@Suite struct OrderIndependence {
    static let customers = 1000
    static let seed: UInt64 = 20_261_130

    /// Captures every notification in the order the simulator sends it.
    final class Recorder: NotificationSink, @unchecked Sendable {
        let lock = NSLock()
        var payloads: [String] = []
        func deliver(signedPayload: String) async -> SendAttemptResult {
            lock.withLock { payloads.append(signedPayload) }
            return .success
        }
    }

    /// A non-durable (for speed) SQLite file.
    static func sqlite(_ dir: URL, _ name: String) throws -> any SQLDatabase {
        var options = SQLiteDatabase.Options()
        options.durable = false
        return try SQLiteDatabase(path: dir.appendingPathComponent("\(name).db").path, options: options)
    }

    /// A Kakin without HTTP: the app's own ingestion path over `db`.
    static func receiver(_ db: any SQLDatabase, root: [UInt8], clock: any Clock) async throws -> KakinApp {
        let store = KakinStore(database: db, ids: SequentialIDs(), clock: clock)
        try await store.migrate()
        let verifier = try SignedDataVerifier(trustedRoots: [root],
                                              apps: [AppIdentity(bundleId: Catalog.demoBundleId, environments: [.sandbox])],
                                              clock: { clock.nowMs() })
        let app = KakinApp(store: store, verifier: verifier,
                           settings: .init(apps: [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId,
                                                                    environments: [.sandbox], catalog: .demo)]),
                           clock: clock, logger: Logger(minimum: .error))
        return app
    }

    static func call(_ sim: AppStoreSimulator, _ method: String, _ path: String, _ body: JSONValue) async -> JSONValue? {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        let r = await sim.handle(HTTPRequest(method: method, path: path, rawPath: path, queryItems: [], headers: headers,
                                             body: body.serialized(), requestId: "t", remoteAddress: nil))
        return (200..<300).contains(r.status) ? try? JSONParser.parse(r.body) : nil
    }

    static func withoutVersion(_ status: JSONValue) -> JSONValue {
        guard case .object(var o) = status else { return status }
        o["version"] = nil
        return .object(o)
    }

    /// The status evaluated over every stored transaction of the customer, not only its status inputs.
    static func wholeHistoryStatus(_ app: KakinApp, _ customerId: String) async throws -> JSONValue {
        let snapshot = try #require(try await app.store.customerSnapshot(customerId))
        return app.services.statusReads.evaluate(snapshot).json
    }

    /// Each notification is applied as it arrives, before the next one is received.
    static func deliver(_ payloads: [String], to app: KakinApp) async throws {
        for jws in payloads {
            _ = try await app.services.notifications.receive(jws, source: "push")
            await app.services.notifications.drain()
        }
    }

    @Test(arguments: Backend.available) func shuffledAndDuplicatedNotificationsGiveTheSameStatusAsInOrderDelivery(_ backend: Backend) async throws {
        switch backend {
        case .sqlite: try await Self.run(shuffledOn: { dir in try Self.sqlite(dir, "shuffled") })
        case .postgresql: try await TestPostgres.withSchema { schema in try await Self.run(shuffledOn: { _ in try PostgresDatabase(url: schema.url) }) }
        }
    }

    static func run(shuffledOn shuffledDatabase: (URL) throws -> any SQLDatabase) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-order-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let recorder = Recorder()
        let sim = try AppStoreSimulator(configuration: SimulatorConfiguration(gracePeriodDays: 16, seed: Self.seed),
                                        clock: SimulatedClock(startMs: SimulatedKakin.start2026), sink: recorder)
        let db1 = try Self.sqlite(dir, "in-order"), db2 = try shuffledDatabase(dir)
        let inOrder = try await Self.receiver(db1, root: sim.rootCertificateDER, clock: sim.clock)
        let shuffled = try await Self.receiver(db2, root: sim.rootCertificateDER, clock: sim.clock)
        var tokens: [String] = []
        for c in 0..<Self.customers {
            tokens.append(try await inOrder.services.statusReads.status("c\(c)").customer.appAccountToken)
            _ = try await shuffled.services.statusReads.status("c\(c)")
        }

        // Histories: every customer buys something; then, over six simulated months, random actions.
        var rng = SeededRandom(seed: Self.seed)
        let firstBuys = ["premium.monthly", "premium.yearly", "premium.plus.monthly", "coins.100", "coins.500", "noads", "season.pass"]
        var subscriptions: [String] = []
        var coinPurchases: [String] = []
        for (c, token) in tokens.enumerated() {
            let product = firstBuys[c % firstBuys.count]
            guard let r = await Self.call(sim, "POST", "/simulator/v1/purchases", ["productId": .string(product), "appAccountToken": .string(token)]) else { continue }
            if product.hasPrefix("premium") { subscriptions.append(r["originalTransactionId"]!.stringValue!) }
            if product.hasPrefix("coins") { coinPurchases.append(r["transactionId"]!.stringValue!) }
        }
        let actions: [JSONValue] = [
            ["action": "disableAutoRenew"], ["action": "enableAutoRenew"], ["action": "failBilling"], ["action": "recoverBilling"],
            ["action": "changeProduct", "productId": "premium.yearly"], ["action": "changeProduct", "productId": "premium.plus.monthly"],
            ["action": "changeProduct", "productId": "premium.monthly"], ["action": "applyPromotionalOffer", "offerId": "promo.6m.free"],
            ["action": "applyPromotionalOffer", "offerId": "promo.1y.free"], ["action": "refund"],
        ]
        for _ in 0..<12 {
            for ot in subscriptions where Int.random(in: 0..<4, using: &rng) == 0 {
                let action = actions[Int.random(in: 0..<actions.count, using: &rng)]
                _ = await Self.call(sim, "POST", "/simulator/v1/subscriptions/\(ot)/actions", action)
            }
            for tx in coinPurchases where Int.random(in: 0..<40, using: &rng) == 0 {
                _ = await Self.call(sim, "POST", "/simulator/v1/transactions/\(tx)/actions", ["action": Int.random(in: 0..<2, using: &rng) == 0 ? "refund" : "reverseRefund"])
            }
            _ = await sim.advance(seconds: Int64.random(in: 5...25, using: &rng) * 86_400)
        }
        let sent = recorder.lock.withLock { recorder.payloads }
        #expect(sent.count > 2 * Self.customers, "the histories produced \(sent.count) notifications")

        // Delivery: in order to one Kakin; shuffled, a quarter of them twice, to the other. Each is applied
        // as it arrives.
        var scrambled = sent + sent.filter { _ in Int.random(in: 0..<4, using: &rng) == 0 }
        scrambled.shuffle(using: &rng)
        async let first: Void = Self.deliver(sent, to: inOrder)
        async let second: Void = Self.deliver(scrambled, to: shuffled)
        _ = try await (first, second)

        var differing: [String] = []
        var statuses: [String: Int] = [:]
        for c in 0..<Self.customers {
            // `version` counts the events told, which arrival order may change (a period told as expired, then renewed).
            let a = Self.withoutVersion(try await inOrder.services.statusReads.status("c\(c)").json)
            let b = Self.withoutVersion(try await shuffled.services.statusReads.status("c\(c)").json)
            if a != b {
                differing.append("c\(c)")
                if differing.count <= 2 { print("DIFF c\(c)\nIN ORDER \(a.jsonString)\nSHUFFLED \(b.jsonString)") }
            }
            // A status read loads only the status inputs; the whole history must say the same.
            for app in [inOrder, shuffled] where Self.withoutVersion(try await Self.wholeHistoryStatus(app, "c\(c)")) != a {
                differing.append("c\(c) (status inputs)")
            }
            statuses[a["status"]?.stringValue ?? "?", default: 0] += 1
        }
        #expect(differing.isEmpty, "customers whose status depends on arrival order: \(differing.prefix(10))")
        // The histories are varied enough to mean something.
        #expect(statuses["active", default: 0] > 0 && statuses["inactive", default: 0] > 0 && statuses["new", default: 0] > 0, "\(statuses)")
        #expect(try await inOrder.store.checkLedger().ok)
        #expect(try await shuffled.store.checkLedger().ok)
        await db1.close()
        await db2.close()
    }
}
