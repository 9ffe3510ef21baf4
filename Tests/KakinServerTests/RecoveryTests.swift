import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// The App Store Server API paths of issue 4: restore, fetch by transaction id, and recovery of missed
/// notifications from Notification History — all against the simulator's real Server API over HTTP.
@Suite(.serialized) struct Recovery {
    static let day: Int64 = 86_400_000

    @Test func restoreByTransactionIdOfALongHistoryGivesTheRightStatus() async throws {
        try await SimulatedKakin.with(deliveries: { inner in
            let s = NotificationSwitch(inner)
            s.set(reachable: false)
            return s
        }) { k in
            // Nine years of a monthly subscription that Kakin never heard of: > 100 transactions.
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.advance(days: 9 * 366)
            #expect(try await k.status("u1")["status"] == "new")
            let history = try await k.sim("GET", "/simulator/v1/subscriptions/\(ot)")
            let latestExpiry = history["expiresDate"]
            let r = await k.kakin("POST", "/v1/customers/u1/restore", ["transactionId": .string(ot)])
            #expect(r.status == 200)
            #expect(r.json["status"] == "active")
            let sub = try #require(r.json["subscriptions"]?.arrayValue?.first)
            #expect(sub["state"] == "subscribed")
            #expect(sub["expiresAt"] == latestExpiry)
            #expect(try await k.app.store.customerSnapshot("u1")?.history.transactions.count ?? 0 > 100)
            // Restoring again changes nothing; a restore without an id uses what is linked.
            let again = await k.kakin("POST", "/v1/customers/u1/restore")
            #expect(again.status == 200)
            #expect(again.json == r.json)
        }
    }

    @Test func postingATransactionIdFetchesItFromTheAppStore() async throws {
        try await SimulatedKakin.with(deliveries: { inner in
            let s = NotificationSwitch(inner)
            s.set(reachable: false)
            return s
        }) { k in
            let tx = try await k.buy("u1", "coins.500")["transactionId"]!.stringValue!
            let first = await k.kakin("POST", "/v1/customers/u1/transactions", ["transactionId": .string(tx)])
            #expect(first.status == 201)
            #expect(first.json["grant"] == ["coins": ["paid": 500, "free": 50]])
            #expect(await k.kakin("POST", "/v1/customers/u1/transactions", ["transactionId": .string(tx)]).status == 409)
            let unknown = await k.kakin("POST", "/v1/customers/u1/transactions", ["transactionId": "2000009999999999"])
            #expect(unknown.status == 404)
            #expect(unknown.json["error"]?["code"] == "transaction_not_found")
        }
    }

    /// The receiver is unreachable for a simulated day while customers subscribe, cancel, fail billing, get
    /// refunded and buy coins; the simulator's retries within that day (+1 h, +12 h) fail too. Recovery from
    /// Notification History brings every customer to the status of a Kakin that never missed a
    /// notification; the simulator's later retries are then duplicates that change nothing.
    @Test func outageOfADayHealsFromNotificationHistory() async throws {
        let gate = SwitchBox()
        try await SimulatedKakin.with(ids: SequentialIDs(), deliveries: { inner in
            let s = NotificationSwitch(inner)
            gate.set(s)
            return s
        }) { k in
            let cut = try #require(gate.get())
            try await using(try await Self.referenceKakin(trusting: k), stop: { await $0.shutdown() }) { reference in
                cut.copy { payload in _ = try? await reference.app.services.notifications.receive(payload, source: "push") }
                let customers = (0..<6).map { "c\($0)" }
                for c in customers {
                    _ = try await k.token(c)
                    _ = try await reference.app.services.statusReads.status(c)
                }
                var originals: [String: String] = [:]
                for c in customers.prefix(4) { originals[c] = try await k.buy(c, "premium.monthly")["originalTransactionId"]?.stringValue }
                try await k.advance(days: 3)
                cut.set(reachable: false)
                try await k.action(originals["c0"]!, "disableAutoRenew")
                try await k.action(originals["c1"]!, "failBilling")
                try await k.buy("c4", "coins.1200")
                try await k.buy("c5", "noads")
                try await k.action(originals["c2"]!, "refund")
                try await k.advance(days: 5)
                cut.set(reachable: true)
                await reference.app.services.notifications.drain()
                func compare() async {
                    for c in customers {
                        let healed = await k.kakin("GET", "/v1/customers/\(c)").json
                        let truth = try? JSONParser.parse(await reference.app.handle(.get("/v1/customers/\(c)")).body)
                        #expect(healed == truth, "customer \(c)")
                    }
                }
                #expect(await k.kakin("GET", "/v1/customers/c4").json["wallet"]?["total"] == 0)
                let (_, new) = try await k.app.services.appStoreSync.recoverMissedNotifications()
                #expect(new >= 6)
                await k.app.services.notifications.drain()
                await compare()
                // The simulator's remaining retries (+24 h, +48 h, …) deliver duplicates: nothing changes.
                try await k.advance(days: 10)
                await reference.app.services.notifications.drain()
                await compare()
            }
        }
    }

    /// A second Kakin on the same simulated App Store (same CA, same clock, same ids) that never misses a
    /// notification.
    static func referenceKakin(trusting k: SimulatedKakin) async throws -> KakinRuntime {
        var config = Configuration()
        config.port = 0
        config.database = .sqlite(path: k.directory.appendingPathComponent("reference.db").path)
        config.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox],
                                         catalog: .demo)]
        return try await KakinRuntime.start(KakinRuntime.Options(
            configuration: config, defaultRootsDER: [k.simulator.rootCertificateDER], clock: k.simulator.clock, ids: SequentialIDs(),
            logger: Logger(minimum: .error)))
    }
}

extension HTTPRequest {
    static func get(_ path: String) -> HTTPRequest {
        HTTPRequest(method: "GET", path: path, rawPath: path, queryItems: [], headers: HTTPHeaders(), body: [], requestId: "test",
                    remoteAddress: nil)
    }
}

final class SwitchBox: @unchecked Sendable {
    let lock = NSLock()
    var value: NotificationSwitch?
    func set(_ s: NotificationSwitch) { lock.withLock { value = s } }
    func get() -> NotificationSwitch? { lock.withLock { value } }
}
