import KakinCore
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinService

/// Set App Account Token calls as database jobs: scheduled in the purchase's own write when a purchase without a
/// token is linked, one row per original transaction, claimed by one worker at a time, and rescheduled with the
/// new owner's token when the purchase is transferred.
@Suite struct AppAccountTokenJobs {
    func linking(_ store: KakinStore, _ customer: String, _ tx: TransactionPayload, policy: TransferPolicy = .keepFirstOwner) async throws {
        try await ingest(store, policy: policy, setsAppAccountTokens: true).present(customer, tx)
    }

    @Test(arguments: Backend.available) func aPurchaseWithoutATokenLinkedToACustomerSchedulesOneCall(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            try await linking(store, "u1", transaction("500"))
            try await linking(store, "u1", transaction("500"))   // presented again
            let job = try #require(try await store.appAccountTokenRequest(originalTransactionId: "500"))
            #expect(job.state == .pending)
            #expect(job.customerId == "u1")
            #expect(job.appAccountToken == (try await store.customer("u1"))?.appAccountToken)
            #expect(try await store.claimDueAppAccountTokens(nowMs: 0, owner: "a", leaseMs: 1000, limit: 10).count == 1)
            #expect(try await store.claimDueAppAccountTokens(nowMs: 500, owner: "b", leaseMs: 1000, limit: 10).isEmpty, "leased to a")

            // Bought in the app (it carries the token), or with the App Store Server API not configured: nothing to send.
            try await linking(store, "u1", transaction("501", token: "0f0e0d0c-0b0a-4900-8000-000000000001"))
            try await ingest(store).present("u1", transaction("502"))
            #expect(try await store.appAccountTokenRequest(originalTransactionId: "501") == nil)
            #expect(try await store.appAccountTokenRequest(originalTransactionId: "502") == nil)
        }
    }

    @Test(arguments: Backend.available) func aTransferSendsTheNewOwnersTokenEvenIfTheOldOneWasInFlight(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            try await linking(store, "u1", transaction("600"))
            let first = try #require(try await store.claimDueAppAccountTokens(nowMs: 0, owner: "a", leaseMs: 1000, limit: 1).first)
            // Meanwhile the purchase moves to u2 (transfer policy): Apple must end up with u2's token.
            try await linking(store, "u2", transaction("600"), policy: .transfer)
            let u2 = try #require(try await store.customer("u2")).appAccountToken
            try await store.finishAppAccountToken(first, state: .sent, error: nil)   // u1's call answered late
            let pending = try #require(try await store.appAccountTokenRequest(originalTransactionId: "600"))
            #expect(pending.state == .pending)
            #expect(pending.appAccountToken == u2)
            let second = try #require(try await store.claimDueAppAccountTokens(nowMs: 0, owner: "b", leaseMs: 1000, limit: 1).first)
            #expect(second.customerId == "u2")
            try await store.retryAppAccountToken(second, error: "HTTP 503", nextAttemptMs: 5000)
            #expect(try await store.claimDueAppAccountTokens(nowMs: 4999, owner: "b", leaseMs: 1000, limit: 1).isEmpty)
            let third = try #require(try await store.claimDueAppAccountTokens(nowMs: 5000, owner: "b", leaseMs: 1000, limit: 1).first)
            #expect(third.attempts == 1)
            try await store.finishAppAccountToken(third, state: .sent, error: nil)
            #expect(try await store.appAccountTokenRequest(originalTransactionId: "600")?.state == .sent)
        }
    }
}
