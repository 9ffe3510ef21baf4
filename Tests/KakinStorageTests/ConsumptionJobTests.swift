import Foundation
import KakinCore
import KakinTestPostgres
import Testing
@testable import KakinStorage

/// Answers to CONSUMPTION_REQUEST as database jobs: one per notification, claimed by one worker at a time
/// (a lease in the row), ended once; and the ledger's facts about a purchase.
@Suite struct ConsumptionJobs {
    static func job(_ uuid: String = "n-1", transaction: String = "t-1", customer: String? = "c1") -> ConsumptionJob {
        ConsumptionJob(notificationUUID: uuid, transactionId: transaction, productId: "coins.100", bundleId: "com.example",
                       environment: "Sandbox", customerId: customer, reason: "OTHER", requestedAtMs: 1_000, deadlineMs: 1_000 + 43_200_000)
    }

    @Test(arguments: Backend.available) func aRequestIsScheduledOnceAndClaimedByOneWorkerAtATime(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            #expect(try await store.transaction { try $0.scheduleConsumptionAnswer(Self.job(), nextAttemptMs: 100) })
            #expect(try await !store.transaction { try $0.scheduleConsumptionAnswer(Self.job(), nextAttemptMs: 100) }, "a duplicate notification schedules nothing")
            #expect(try await store.claimDueConsumptionAnswers(nowMs: 99, owner: "a", leaseMs: 1000, limit: 10).isEmpty, "not due yet")

            let a = try await store.claimDueConsumptionAnswers(nowMs: 100, owner: "a", leaseMs: 1000, limit: 10)
            #expect(a.map(\.notificationUUID) == ["n-1"])
            #expect(try await store.claimDueConsumptionAnswers(nowMs: 500, owner: "b", leaseMs: 1000, limit: 10).isEmpty, "leased to a")
            // a's lease runs out (a died): b takes over.
            let b = try await store.claimDueConsumptionAnswers(nowMs: 1100, owner: "b", leaseMs: 1000, limit: 10)
            #expect(b.count == 1)

            try await store.storeConsumptionRequestBody("n-1", version: 2, body: #"{"customerConsented":true}"#)
            try await store.storeConsumptionRequestBody("n-1", version: 1, body: "{}")
            try await store.retryConsumptionAnswer("n-1", error: "HTTP 503", nextAttemptMs: 5000)
            #expect(try await store.claimDueConsumptionAnswers(nowMs: 4999, owner: "b", leaseMs: 1000, limit: 10).isEmpty)
            let again = try #require(try await store.claimDueConsumptionAnswers(nowMs: 5000, owner: "b", leaseMs: 1000, limit: 10).first)
            #expect(again.attempts == 1)
            #expect(again.lastError == "HTTP 503")
            #expect(again.requestVersion == 2, "the first body is kept")
            #expect(again.requestBody == #"{"customerConsented":true}"#)

            try await store.finishConsumptionAnswer(again, state: .sent, attempted: true, error: nil)
            try await store.finishConsumptionAnswer(again, state: .failed, attempted: true, error: "late")
            #expect(try await store.claimDueConsumptionAnswers(nowMs: 1_000_000, owner: "c", leaseMs: 1000, limit: 10).isEmpty)
            let done = try await store.consumptionAnswers(transactionId: "t-1")
            #expect(done.map(\.state) == [.sent], "an ended job stays ended")
            #expect(done.first?.attempts == 2)
        }
    }

    @Test(arguments: Backend.available) func requestsWithoutConsentAreKeptButNeverClaimed(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            var job = Self.job()
            job.state = .notConsented
            try await store.transaction { [job] r in try r.scheduleConsumptionAnswer(job, nextAttemptMs: 0) }
            #expect(try await store.claimDueConsumptionAnswers(nowMs: 1_000_000, owner: "a", leaseMs: 1000, limit: 10).isEmpty)
            #expect(try await store.consumptionAnswers(transactionId: "t-1").map(\.state) == [.notConsented])
        }
    }
}
