import KakinCore
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinService

/// The ingest and the wallet over a real store on both engines: exactly once, refunds, ownership, idempotent keys.
@Suite struct Purchases {
    @Test(arguments: Backend.available) func firstApplicationCreditsPaidAndBonusCoinsOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let first = try await ingest(store).present("u1", transaction("1000", quantity: 2))
            guard case .applied(let applied) = first else { Issue.record("expected applied"); return }
            #expect(applied.grant == ["coins": ["paid": 200, "free": 20]])
            let again = try await ingest(store).present("u1", transaction("1000", quantity: 2))
            #expect(again == .alreadyProcessed(applied))
            #expect(try await store.wallet("u1") == WalletBalance(paid: 200, free: 20))
            #expect(try await store.checkLedger().ok)
        }
    }

    @Test(arguments: Backend.available) func sixtyFourConcurrentApplicationsCreditExactlyOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let outcomes = try await withThrowingTaskGroup(of: IngestOutcome.self) { group in
                for _ in 0..<64 { group.addTask { try await ingest(store).present("u1", transaction("2000")) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes.filter { if case .applied = $0 { return true } else { return false } }.count == 1)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 100, free: 10))
        }
    }

    @Test(arguments: Backend.available) func revokedTransactionGrantsNothingButIsKeptForTheStatus(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let outcome = try await ingest(store).present("u1", transaction("3000", revokedAt: 1_790_000_000_500))
            #expect(outcome == .revoked(revocationDateMs: 1_790_000_000_500))
            #expect(try await store.wallet("u1") == WalletBalance())
            #expect(try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.isEmpty)
        }
    }

    @Test(arguments: Backend.available) func revokedCopyOfAnAppliedPurchaseTakesTheCoinsBackOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("4000"))
            let revoked = transaction("4000", signedDate: 1_790_000_001_000, revokedAt: 1_790_000_000_900)
            _ = try await ingest(store).present("u1", revoked)
            _ = try await ingest(store).present("u1", revoked)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 0, free: 0))
            let kinds = try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.map(\.kind)
            #expect(kinds == ["refund", "purchase"])
        }
    }

    @Test(arguments: Backend.available) func refundWithNegativeBalancesDisallowedStopsAtZero(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("5000"))
            _ = try await wallets(store, order: .paidFirst).spend(
                SpendRequest(customerId: "u1", idempotencyKey: "k", canonicalRequest: "{}", amount: 80, item: "stamp", recipient: nil), requestId: "r")
            let revoked = transaction("5000", signedDate: 1_790_000_001_000, revokedAt: 1_790_000_000_900)
            _ = try await ingest(store, wallet: WalletPolicy(allowNegativeBalance: false)).present("u1", revoked)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 0, free: 0))
            #expect(try await store.checkLedger().ok)
        }
    }

    @Test(arguments: Backend.available) func tokenOfAnotherCustomerIsRefusedUnderKeepFirstOwner(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            let owner = try await store.transaction { r in try r.ensureCustomer("alice").customer }
            await #expect(throws: KakinError.self) {
                try await ingest(store).present("bob", transaction("6000", token: owner.appAccountToken))
            }
            #expect(try await store.wallet("bob") == WalletBalance())
        }
    }

    @Test(arguments: Backend.available) func originalTransactionMovesUnderTheTransferPolicy(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            func sub(_ id: String) -> TransactionPayload { transaction(id, product: "premium", original: "7000", type: .autoRenewable) }
            try await ingest(store).present("alice", sub("7000"))
            await #expect(throws: KakinError.self) { try await ingest(store).present("bob", sub("7001")) }
            let moved = try await ingest(store, policy: .transfer).present("bob", sub("7001"))
            guard case .applied = moved else { Issue.record("expected applied"); return }
            #expect(try await store.customerSnapshot("bob")?.history.transactions.count == 2)
            #expect(try await store.customerSnapshot("alice")?.history.transactions.isEmpty == true)
        }
    }
}

@Suite struct WalletOperations {
    func spend(_ store: KakinStore, key: String, amount: Int64, request: String = "{}") async throws -> IdempotentAnswer {
        try await wallets(store).spend(SpendRequest(customerId: "u1", idempotencyKey: key, canonicalRequest: request, amount: amount,
                                                    item: "stamp.heart", recipient: "program:1"), requestId: "r")
    }

    @Test(arguments: Backend.available) func sameKeyAndBodyReplaysTheStoredAnswer(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("1"))
            let first = try await spend(store, key: "k1", amount: 30)
            let second = try await spend(store, key: "k1", amount: 30)
            #expect(first.status == 201 && !first.replayed)
            #expect(second.status == 201 && second.replayed && second.body == first.body)
            #expect(try await store.wallet("u1") == WalletBalance(paid: 80, free: 0))
        }
    }

    @Test(arguments: Backend.available) func sameKeyWithAnotherBodyIsRefused(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("1"))
            _ = try await spend(store, key: "k1", amount: 30, request: "{\"amount\":30}")
            await #expect(throws: KakinError.self) { try await spend(store, key: "k1", amount: 31, request: "{\"amount\":31}") }
            #expect(try await store.wallet("u1").total == 80)
        }
    }

    @Test(arguments: Backend.available) func oneKeySentManyTimesAtOnceSpendsOnceAndAnswersAlike(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("1"))
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
                try await wallets(store).grant(GrantRequest(customerId: "u1", idempotencyKey: "g1", amount: 5, reason: "sorry", deskActor: "desk"))
            }
            _ = try await ingest(store).present("u1", transaction("1"))
            let answer = try await wallets(store).grant(GrantRequest(customerId: "u1", idempotencyKey: "g1", amount: 5, reason: "sorry", deskActor: "desk"))
            #expect(answer.status == 201 && !answer.replayed)
            #expect(try await store.wallet("u1").total == 115)
        }
    }

    @Test(arguments: Backend.available) func insufficientBalanceSpendsNothing(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("1"))
            let answer = try await spend(store, key: "big", amount: 111)
            #expect(answer.status == 409)
            #expect(try await store.wallet("u1").total == 110)
            #expect(try await store.ledger(customerId: "u1", limit: 10, cursor: nil).entries.count == 1)
        }
    }

    @Test(arguments: Backend.available) func ledgerPagesNewestFirstWithACursor(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            for i in 0..<5 { try await ingest(store).present("u1", transaction("t\(i)")) }
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
                _ = try await wallets(store).grant(GrantRequest(customerId: c, idempotencyKey: "g-\(c)-\(amount)", amount: 100, reason: "test"))
                _ = try await wallets(store).spend(SpendRequest(customerId: c, idempotencyKey: "s-\(amount)", canonicalRequest: "{}", amount: amount,
                                                                item: "stamp", recipient: "program:9"), requestId: "r")
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
            _ = try await ingest(store).present("u1", transaction("1"))
            #expect(try await store.checkLedger().ok)
            try await store.database.write { db in try db.execute("UPDATE wallets SET paid = paid + 1", []) }
            let report = try await store.checkLedger()
            #expect(!report.ok)
            #expect(report.problems.first?.contains("customer u1") == true)
        }
    }
}


/// What a refund request is told comes from the ledger the ingest wrote.
@Suite struct ConsumptionLedgerFacts {
    @Test(arguments: Backend.available) func theLedgerTellsDeliveryPaidCoinMovementsAndLifetimePrices(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let first = transaction("t-1")
            let second = transaction("t-2")
            try await ingest(store).present("c1", first)
            try await ingest(store).present("c1", second)
            try await ingest(store).present("c1", transaction("t-1", signedDate: 1_790_000_000_001, revokedAt: 1_790_000_000_001))
            let facts = try await store.consumptionLedgerFacts(transactionId: "t-2", customerId: nil)
            #expect(facts.customerId == "c1")
            #expect(facts.delivered)
            #expect(facts.movements.map(\.paid) == [100, 100, -100])
            #expect(facts.movements.map(\.kind) == [.purchase, .purchase, .refund])
            #expect(facts.lifetimePurchasedMilli == ["JPY": 240_000])
            #expect(facts.lifetimeRefundedMilli == ["JPY": 120_000])
            #expect(facts.customerCreatedAtMs == 1_790_000_000_000)
            #expect(facts.appAccountToken != nil)
            #expect(PaidCoinLots.lot(of: "t-2", in: facts.movements)?.spent == 0)

            let unknown = try await store.consumptionLedgerFacts(transactionId: "t-9", customerId: nil)
            #expect(!unknown.delivered)
            #expect(unknown.movements.isEmpty)
        }
    }
}
