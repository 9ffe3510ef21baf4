import Foundation
import KakinCore
import KakinSQLite
import Synchronization
import KakinPostgreSQL
import KakinTestPostgres
import Testing
@testable import KakinStorage

/// A clock and id source the tests control.
final class TestClock: Clock, @unchecked Sendable {
    let now = Mutex<Int64>(1_790_000_000_000)
    func nowMs() -> Int64 { now.withLock { $0 } }
}

final class CountingIDs: IDGenerator {
    let counter = Atomic<Int>(0)
    func uuid() -> String {
        let n = counter.add(1, ordering: .relaxed).newValue
        return String(format: "00000000-0000-4000-8000-%012d", n)
    }
    func id(prefix: String) -> String { prefix + String(counter.add(1, ordering: .relaxed).newValue) }
}

/// The engines the store's suite runs on: SQLite always, PostgreSQL when `scripts/test` started a cluster.
enum Backend: String, CustomTestStringConvertible, Sendable {
    case sqlite, postgresql
    static var available: [Backend] { TestPostgres.isAvailable ? [.sqlite, .postgresql] : [.sqlite] }
    var testDescription: String { rawValue }
}

/// A migrated store on a fresh database of `backend` (a temporary SQLite file, or a PostgreSQL schema).
func withStore(_ backend: Backend, _ body: (KakinStore) async throws -> Void) async throws {
    try await withDatabase(backend) { db in
        let store = KakinStore(database: db, ids: CountingIDs(), clock: TestClock())
        try await store.migrate()
        try await body(store)
    }
}

/// A fresh, empty database of `backend`, closed after `body`.
func withDatabase(_ backend: Backend, _ body: (any SQLDatabase) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try await withDatabase(try SQLiteDatabase(path: dir.appendingPathComponent("k.db").path), body)
    case .postgresql:
        try await TestPostgres.withSchema { schema in try await withDatabase(try PostgresDatabase(url: schema.url), body) }
    }
}

private func withDatabase(_ db: any SQLDatabase, _ body: (any SQLDatabase) async throws -> Void) async throws {
    do {
        try await body(db)
    } catch {
        await db.close()
        throw error
    }
    await db.close()
}

let coins100 = Product(productId: "coins.100", kind: .consumable, coins: 100, bonusCoins: 10, priceMilli: 120_000, currency: "JPY")

func transaction(_ id: String, product: String = "coins.100", token: String? = nil, original: String? = nil,
                 signedDate: Int64 = 1_790_000_000_000, revokedAt: Int64? = nil, quantity: Int = 1,
                 type: AppleProductType = .consumable) -> TransactionPayload {
    var o: [String: JSONValue] = [
        "transactionId": .string(id), "originalTransactionId": .string(original ?? id), "bundleId": "com.example",
        "productId": .string(product), "purchaseDate": .int(1_789_999_000_000), "quantity": .int(Int64(quantity)),
        "type": .string(type.rawValue), "inAppOwnershipType": "PURCHASED", "signedDate": .int(signedDate), "environment": "Sandbox",
        "price": 120000, "currency": "JPY",
    ]
    if let token { o["appAccountToken"] = .string(token) }
    if let revokedAt {
        o["revocationDate"] = .int(revokedAt)
        o["revocationReason"] = 1
    }
    return try! TransactionPayload(json: .object(o))
}

func purchase(_ customer: String, _ tx: TransactionPayload, policy: TransferPolicy = .keepFirstOwner,
              wallet: WalletPolicy = WalletPolicy()) -> PurchaseApplication {
    PurchaseApplication(customerId: customer, transaction: tx, jws: "h.\(tx.transactionId).s", product: coins100, via: "client",
                        transferPolicy: policy, walletPolicy: wallet)
}

@Suite struct Purchases {
    @Test(arguments: Backend.available) func firstApplicationCreditsPaidAndBonusCoinsOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let first = try await store.applyPurchase(purchase("u1", transaction("1000", quantity: 2)))
            guard case .applied(let applied) = first else { Issue.record("expected applied"); return }
            #expect(applied.grant == ["coins": ["paid": 200, "free": 20]])
            let again = try await store.applyPurchase(purchase("u1", transaction("1000", quantity: 2)))
            #expect(again == .alreadyProcessed(applied))
            #expect(try await store.wallet("u1") == WalletBalance(paid: 200, free: 20))
            #expect(try await store.checkLedger().ok)
        }
    }

    @Test(arguments: Backend.available) func sixtyFourConcurrentApplicationsCreditExactlyOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let outcomes = try await withThrowingTaskGroup(of: PurchaseOutcome.self) { group in
                for _ in 0..<64 { group.addTask { try await store.applyPurchase(purchase("u1", transaction("2000"))) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { if case .applied = $0 { return true } else { return false } }.count == 1)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 100, free: 10))
        }
    }

    @Test(arguments: Backend.available) func revokedTransactionGrantsNothingButIsKeptForTheStatus(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let outcome = try await store.applyPurchase(purchase("u1", transaction("3000", revokedAt: 1_790_000_000_500)))
            #expect(outcome == .revoked(revocationDateMs: 1_790_000_000_500))
            #expect(try await store.wallet("u1") == WalletBalance())
            #expect(try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.isEmpty)
        }
    }

    @Test(arguments: Backend.available) func revokedCopyOfAnAppliedPurchaseTakesTheCoinsBackOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("4000")))
            let revoked = transaction("4000", signedDate: 1_790_000_001_000, revokedAt: 1_790_000_000_900)
            _ = try await store.applyPurchase(purchase("u1", revoked))
            _ = try await store.applyPurchase(purchase("u1", revoked))
            #expect(try await store.wallet("u1") == WalletBalance(paid: 0, free: 0))
            let kinds = try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.map(\.kind)
            #expect(kinds == ["refund", "purchase"])
        }
    }

    @Test(arguments: Backend.available) func refundWithNegativeBalancesDisallowedStopsAtZero(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("5000")))
            _ = try await store.spend(customerId: "u1", idempotencyKey: "k", request: "{}", amount: 80, item: "stamp", recipient: nil,
                                      order: .paidFirst) { _ in (201, []) }
            let revoked = transaction("5000", signedDate: 1_790_000_001_000, revokedAt: 1_790_000_000_900)
            _ = try await store.applyPurchase(purchase("u1", revoked, wallet: WalletPolicy(allowNegativeBalance: false)))
            #expect(try await store.wallet("u1") == WalletBalance(paid: 0, free: 0))
            #expect(try await store.checkLedger().ok)
        }
    }

    @Test(arguments: Backend.available) func tokenOfAnotherCustomerIsRefusedUnderKeepFirstOwner(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let owner = try await store.ensureCustomer("alice")
            await #expect(throws: KakinError.self) {
                try await store.applyPurchase(purchase("bob", transaction("6000", token: owner.appAccountToken)))
            }
            #expect(try await store.wallet("bob") == WalletBalance())
        }
    }

    @Test(arguments: Backend.available) func originalTransactionMovesUnderTheTransferPolicy(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let sub = Product(productId: "premium", kind: .autoRenewable, groupId: "g", period: ISOPeriod(months: 1))
            func app(_ c: String, _ id: String, _ p: TransferPolicy) -> PurchaseApplication {
                var a = purchase(c, transaction(id, product: "premium", original: "7000", type: .autoRenewable), policy: p)
                a.product = sub
                return a
            }
            _ = try await store.applyPurchase(app("alice", "7000", .keepFirstOwner))
            await #expect(throws: KakinError.self) { try await store.applyPurchase(app("bob", "7001", .keepFirstOwner)) }
            let moved = try await store.applyPurchase(app("bob", "7001", .transfer))
            guard case .applied = moved else { Issue.record("expected applied"); return }
            #expect(try await store.customerSnapshot("bob").transactionJWS.count == 2)
            #expect(try await store.customerSnapshot("alice").transactionJWS.isEmpty)
        }
    }
}

@Suite struct WalletOperations {
    func spend(_ store: KakinStore, key: String, amount: Int64, request: String = "{}") async throws -> IdempotentAnswer {
        try await store.spend(customerId: "u1", idempotencyKey: key, request: request, amount: amount, item: "stamp.heart",
                              recipient: "program:1", order: .freeFirst) { result in
            switch result {
            case .spent(let id, _, let p, let f, let w): return (201, Array("\(id) \(p) \(f) \(w.total)".utf8))
            case .insufficient: return (409, Array("insufficient".utf8))
            }
        }
    }

    @Test(arguments: Backend.available) func sameKeyAndBodyReplaysTheStoredAnswer(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            let first = try await spend(store, key: "k1", amount: 30)
            let second = try await spend(store, key: "k1", amount: 30)
            #expect(first.status == 201 && !first.replayed)
            #expect(second.status == 201 && second.replayed && second.body == first.body)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 80, free: 0))
        }
    }

    @Test(arguments: Backend.available) func sameKeyWithAnotherBodyIsRefused(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            _ = try await spend(store, key: "k1", amount: 30, request: "{\"amount\":30}")
            await #expect(throws: KakinError.self) { try await spend(store, key: "k1", amount: 31, request: "{\"amount\":31}") }
            #expect(try await store.wallet("u1").total == 80)
        }
    }

    @Test(arguments: Backend.available) func oneKeySentManyTimesAtOnceSpendsOnceAndAnswersAlike(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            let answers = try await withThrowingTaskGroup(of: IdempotentAnswer.self) { group in
                for _ in 0..<20 { group.addTask { try await self.spend(store, key: "k1", amount: 30) } }
                return try await group.reduce(into: [IdempotentAnswer]()) { $0.append($1) }
            }
            #expect(answers.count { !$0.replayed } == 1)
            #expect(Set(answers.map(\.body)).count == 1)
            #expect(try await store.wallet("u1").total == 80)
        }
    }

    @Test(arguments: Backend.available) func aRefusedGrantLeavesItsKeyFreeForTheRetry(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            await #expect(throws: KakinError.self) {
                try await store.supportGrant(customerId: "u1", idempotencyKey: "g1", amount: 5, reason: "sorry", actor: "desk")
            }
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            let answer = try await store.supportGrant(customerId: "u1", idempotencyKey: "g1", amount: 5, reason: "sorry", actor: "desk")
            #expect(answer.status == 201 && !answer.replayed)
            #expect(try await store.wallet("u1").total == 115)
        }
    }

    @Test(arguments: Backend.available) func insufficientBalanceSpendsNothing(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            let answer = try await spend(store, key: "big", amount: 111)
            #expect(answer.status == 409)
            #expect(try await store.wallet("u1").total == 110)
            #expect(try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.count == 1)
        }
    }

    @Test(arguments: Backend.available) func ledgerPagesNewestFirstWithACursor(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            for i in 0..<5 { _ = try await store.applyPurchase(purchase("u1", transaction("t\(i)"))) }
            let p1 = try await store.ledger(customerId: "u1", limit: 2, cursor: nil)
            let p2 = try await store.ledger(customerId: "u1", limit: 2, cursor: p1.nextCursor)
            let p3 = try await store.ledger(customerId: "u1", limit: 2, cursor: p2.nextCursor)
            #expect(p1.entries.map(\.reference) == ["t4", "t3"])
            #expect(p2.entries.map(\.reference) == ["t2", "t1"])
            #expect(p3.entries.map(\.reference) == ["t0"])
            #expect(p3.nextCursor == nil)
            #expect(p1.entries[0].balanceAfter.total == 550)
            await #expect(throws: KakinError.self) { try await store.ledger(customerId: "u1", limit: 2, cursor: "bogus") }
        }
    }

    @Test(arguments: Backend.available) func recipientSupportSumsSpendsAndRanksSupporters(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            for (c, amount) in [("a", 50), ("b", 70), ("a", 30)] as [(String, Int64)] {
                _ = try await store.grant(customerId: c, idempotencyKey: "g-\(c)-\(amount)", request: "{}", amount: 100, reason: "test") { _ in (201, []) }
                _ = try await store.spend(customerId: c, idempotencyKey: "s-\(amount)", request: "{}", amount: amount, item: "stamp",
                                          recipient: "program:9", order: .freeFirst) { _ in (201, []) }
            }
            let support = try await store.recipientSupport("program:9", top: 10)
            #expect(support.paid + support.free == 150)
            #expect(support.supporters == 2)
            #expect(support.topSupporters.map(\.customerId) == ["a", "b"])
            #expect(support.topSupporters.map(\.coins) == [80, 70])
        }
    }

    @Test(arguments: Backend.available) func ledgerCheckFindsABalanceThatDisagreesWithItsEntries(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await store.applyPurchase(purchase("u1", transaction("1")))
            #expect(try await store.checkLedger().ok)
            try await store.database.write { db in try db.execute("UPDATE wallets SET paid = paid + 1", []) }
            let report = try await store.checkLedger()
            #expect(!report.ok)
            #expect(report.problems.first?.contains("customer u1") == true)
        }
    }
}

/// Work several processes share: claims on stored notifications and named leases (the same on both engines).
@Suite struct SharedWork {
    func notification(_ uuid: String, signedDate: Int64) -> NotificationPayload {
        try! NotificationPayload(json: ["notificationType": "ONE_TIME_CHARGE", "notificationUUID": .string(uuid), "version": "2.0",
                                        "signedDate": .int(signedDate), "data": ["bundleId": "com.example", "environment": "Sandbox"]])
    }

    @Test(arguments: Backend.available) func aClaimedNotificationIsNotClaimedAgainUntilItsLeaseRunsOut(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            for n in 0..<3 { #expect(try await store.storeNotification(notification("n\(n)", signedDate: Int64(100 - n)), jws: "j\(n)", source: "push")) }
            let first = try await store.claimDueNotifications(owner: "a", nowMs: 1_000, leaseUntilMs: 61_000, limit: 2)
            #expect(first.map(\.notificationUUID) == ["n2", "n1"])
            let second = try await store.claimDueNotifications(owner: "b", nowMs: 1_000, leaseUntilMs: 61_000, limit: 10)
            #expect(second.map(\.notificationUUID) == ["n0"])
            // "b" applies its own; "a" applies one and dies holding the other: it comes due again once the lease ran out.
            try await store.markNotification("n0", state: .applied, customerId: nil, originalTransactionId: nil)
            try await store.markNotification("n2", state: .applied, customerId: nil, originalTransactionId: nil)
            #expect(try await store.claimDueNotifications(owner: "b", nowMs: 60_999, leaseUntilMs: 120_000, limit: 10).isEmpty)
            let reclaimed = try await store.claimDueNotifications(owner: "b", nowMs: 61_000, leaseUntilMs: 121_000, limit: 10)
            #expect(reclaimed.map(\.notificationUUID) == ["n1"])
            // A failure ends the claim at its retry time.
            try await store.failNotification("n1", error: "boom", nextAttemptMs: 62_000)
            #expect(try await store.claimDueNotifications(owner: "c", nowMs: 62_000, leaseUntilMs: 122_000, limit: 10).map(\.notificationUUID) == ["n1"])
        }
    }

    @Test(arguments: Backend.available) func aNotificationStoredBeforeBodiesMovedIsClaimedAndShownWithItsBody(_ backend: Backend) async throws {
        try await withDatabase(backend) { db in
            try await db.migrate(Schema.migrations.filter { $0.version < 9 })
            try await db.write { db in
                try db.execute("""
                    INSERT INTO notifications (notification_uuid, notification_type, signed_date_ms, received_at_ms, source, jws, state,
                        attempts, next_attempt_ms)
                    VALUES ('old', 'ONE_TIME_CHARGE', 1, 1, 'push', 'h.old.s', 'pending', 0, 0)
                    """, [])
            }
            let store = KakinStore(database: db, ids: CountingIDs(), clock: TestClock())
            try await store.migrate()
            #expect(try await store.storeNotification(notification("new", signedDate: 2), jws: "h.new.s", source: "push"))
            #expect(try await store.notification("old")?.jws == "h.old.s")
            let claimed = try await store.claimDueNotifications(owner: "a", nowMs: 1_000, leaseUntilMs: 61_000, limit: 10)
            #expect(claimed.map(\.notificationUUID) == ["old", "new"])
            #expect(claimed.map(\.jws) == ["h.old.s", "h.new.s"])
        }
    }

    @Test(arguments: Backend.available) func aLeaseHasOneHolderUntilItRunsOutOrIsHandedBack(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            #expect(try await store.takeLease("job", owner: "a", nowMs: 0, untilMs: 100))
            #expect(try await !store.takeLease("job", owner: "b", nowMs: 50, untilMs: 150))
            #expect(try await store.takeLease("job", owner: "a", nowMs: 50, untilMs: 200))
            #expect(try await !store.takeLease("job", owner: "b", nowMs: 199, untilMs: 300))
            #expect(try await store.takeLease("job", owner: "b", nowMs: 200, untilMs: 300))
            try await store.setLeaseEnd("job", owner: "a", untilMs: 0)  // not a's any more: nothing happens
            #expect(try await !store.takeLease("job", owner: "a", nowMs: 250, untilMs: 400))
            try await store.setLeaseEnd("job", owner: "b", untilMs: 250)
            #expect(try await store.takeLease("job", owner: "a", nowMs: 250, untilMs: 400))
        }
    }
}
