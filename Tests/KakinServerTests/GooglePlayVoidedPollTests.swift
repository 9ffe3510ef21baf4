import Foundation
import KakinCore
import KakinService
import KakinTestPostgres
import Testing
@testable import KakinServer

/// The voided purchases poll (`purchases.voidedpurchases.list`) in local mode against the Play simulator: a refund whose
/// RTDN never arrived is found and clawed back once; a refund the RTDN already applied is not taken twice; the cursor is
/// the database's, so a restarted Kakin reads on from where the last run ended.
@Suite struct GooglePlayVoidedPollTests {
    typealias Play = GooglePlayPurchaseTests
    static let package = GooglePlayPurchaseTests.package

    static func poll(_ k: SimulatedKakin) async throws -> GooglePlayNotifications.VoidedPollRun {
        try await k.app.services.googlePlayNotifications.pollVoided(packageName: package)
    }

    /// Local mode with the background poll off: the tests poll when they choose.
    static func with(database: Configuration.Database? = nil, _ body: (SimulatedKakin) async throws -> Void) async throws {
        try await SimulatedKakin.with(database: database, configureRuntime: { $0.pollsVoidedPurchases = false }, body)
    }

    static func refunds(_ k: SimulatedKakin, _ customer: String) async -> [JSONValue] {
        await Play.ledger(k, customer).filter { $0["kind"] == "refund" }
    }

    /// An hour passes on the simulated clock (stopped otherwise): a refund is not read at its purchase's millisecond, and
    /// the poll's window, which ends a minute before now, takes in what was voided before.
    static func anHourLater(_ k: SimulatedKakin) async throws {
        try await k.advance(to: k.nowMs + 3_600_000)
    }

    /// Buys `quantity` × coins_500 for u1 (credited by the RTDN), an hour passes, then cuts the pushes: Play's next
    /// notifications wait.
    static func creditedThenCut(_ k: SimulatedKakin, quantity: Int64 = 1) async throws -> (tap: Play.PushTap, order: String) {
        _ = try await k.token("u1")
        let tap = Play.tap(k)
        let (_, order) = try await Play.buy(k, "u1", "coins_500", extra: ["quantity": .int(quantity)])
        try await Play.waitUntil { try await Play.wallet(k, "u1") == WalletBalance(paid: 500 * quantity, free: 50 * quantity) }
        try await anHourLater(k)
        tap.set(up: false)
        return (tap, order)
    }

    static func refundFoundByThePollOnce(_ k: SimulatedKakin) async throws {
        let (tap, order) = try await creditedThenCut(k)
        _ = try await Play.play(k, "POST", "/v1/orders/\(order)/refund", [:])
        #expect(try await Play.wallet(k, "u1") == WalletBalance(paid: 500, free: 50))  // the refund's RTDN is refused
        try await anHourLater(k)
        let run = try await poll(k)
        #expect(run.listed == 1 && run.stored == 1 && run.unknownTokens == 0 && !run.morePages, "\(run)")
        try await Play.waitUntil { try await Play.wallet(k, "u1") == WalletBalance(paid: 0, free: 0) }
        let taken = await refunds(k, "u1")
        #expect(taken.count == 1 && taken.first?["paid"] == -500 && taken.first?["free"] == -50)
        #expect(taken.first?["source"] == "googlePlay" && taken.first?["reference"]?.stringValue == order)
        // The next run lists nothing new; the refused RTDN, delivered at last, changes nothing.
        #expect(try await poll(k).stored == 0)
        tap.set(up: true)
        try await k.advance(days: 1)
        try await Play.waitUntil { try await k.app.store.playNotificationCounts()["applied"] == 3 }
        #expect(try await Play.wallet(k, "u1") == WalletBalance(paid: 0, free: 0))
        #expect(await refunds(k, "u1").count == 1)
    }

    @Test func aRefundWhoseRTDNIsRefusedIsFoundByThePollAndClawedBackOnceOnSQLite() async throws {
        try await Self.with { k in try await Self.refundFoundByThePollOnce(k) }
    }

    @Test(.postgreSQL)
    func aRefundWhoseRTDNIsRefusedIsFoundByThePollAndClawedBackOnceOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in
            try await Self.with(database: .postgresql(url: schema.url)) { k in try await Self.refundFoundByThePollOnce(k) }
        }
    }

    @Test func aPollAfterTheRTDNAppliedARefundChangesNothing() async throws {
        try await Self.with { k in
            let (tap, order) = try await Self.creditedThenCut(k)
            tap.set(up: true)
            _ = try await Play.play(k, "POST", "/v1/orders/\(order)/refund", [:])
            try await Play.waitUntil { try await Play.wallet(k, "u1") == WalletBalance(paid: 0, free: 0) }
            let entries = await Play.ledger(k, "u1").count
            try await Self.anHourLater(k)
            let run = try await Self.poll(k)
            #expect(run.listed == 1 && run.stored == 1, "\(run)")
            try await Play.waitUntil { try await k.app.store.playNotificationCounts()["applied"] == 3 }
            #expect(try await Play.wallet(k, "u1") == WalletBalance(paid: 0, free: 0))
            let ledger = await Play.ledger(k, "u1")
            #expect(ledger.count == entries && ledger.filter { $0["kind"] == "refund" }.count == 1)
        }
    }

    @Test func aQuantityBasedPartialRefundFoundByThePollTakesBackThatShare() async throws {
        try await Self.with { k in
            let (_, order) = try await Self.creditedThenCut(k, quantity: 3)
            _ = try await Play.play(k, "POST", "/v1/orders/\(order)/refund", ["quantity": 1])
            try await Self.anHourLater(k)
            let run = try await Self.poll(k)
            #expect(run.stored == 1, "\(run)")
            try await Play.waitUntil { try await Play.wallet(k, "u1") == WalletBalance(paid: 1000, free: 100) }
            #expect(await Self.refunds(k, "u1").count == 1)
            #expect(try await Self.poll(k).stored == 0)
        }
    }

    @Test func theFirstRunReads30DaysBackAndARestartedKakinReadsOnFromTheStoredCursor() async throws {
        let k = try await SimulatedKakin.start(configureRuntime: { $0.pollsVoidedPurchases = false })
        let (_, order) = try await Self.creditedThenCut(k)
        let first = try await Self.poll(k)
        // 30 days back (Google's limit) to now, a minute off each end.
        #expect(first.endMs - first.startMs == 30 * 86_400_000 - 120_000 && first.endMs <= k.nowMs - 60_000, "\(first)")
        await k.runtime.shutdown(gracePeriodSeconds: 5)

        // Refunded while Kakin is down (its RTDN is refused); a new process on the same database finds it.
        try await k.advance(days: 2)
        _ = try await Play.play(k, "POST", "/v1/orders/\(order)/refund", [:])
        try await Self.anHourLater(k)
        var options = k.local.runtimeOptions()
        options.pollsVoidedPurchases = false
        let restarted = try await KakinRuntime.start(options)
        try await k.local.attach(to: restarted)
        let run = try await restarted.app.services.googlePlayNotifications.pollVoided(packageName: Self.package)
        #expect(run.startMs == first.endMs && run.stored == 1, "\(run)")
        try await Play.waitUntil { try await restarted.app.services.statusReads.status("u1").wallet == WalletBalance(paid: 0, free: 0) }
        await restarted.shutdown(gracePeriodSeconds: 5)
        try? FileManager.default.removeItem(at: k.directory)
    }
}
