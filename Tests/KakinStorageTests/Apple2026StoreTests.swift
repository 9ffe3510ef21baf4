import Foundation
import KakinCore
import KakinTestPostgres
import Testing
@testable import KakinStorage

/// Migration 15's records on both engines: RESCIND_CONSENT placed at its app transaction's customer whatever the
/// order, and server finishes as durable jobs due by business time.
@Suite struct Apple2026Store {
    static func rescission(_ uuid: String, at: Int64, appTransactionId: String? = "at-1") -> ConsentRescission {
        ConsentRescission(notificationUUID: uuid, appTransactionId: appTransactionId, bundleId: "com.example", environment: "Sandbox",
                          rescindedAtMs: at, customerId: nil)
    }

    @Test(arguments: Backend.available) func aRescissionWaitsForItsAppTransactionAndTheEarliestIsKept(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            try await store.transaction { r in _ = try r.ensureCustomer("c1") }
            // Kakin doesn't know app transaction at-1 yet: kept, placed at nobody.
            let first = try await store.transaction { r in try r.storeConsentRescission(Self.rescission("n-2", at: 2_000)) }
            #expect(first?.customerId == nil)
            #expect(try await store.transaction { r in try r.storeConsentRescission(Self.rescission("n-2", at: 2_000)) } == nil, "once per notification")
            #expect(try await store.customer("c1")?.consentRescindedAtMs == nil)

            // The first signed transaction naming at-1 links it to c1 and places the rescission.
            let placed = try await store.transaction { r in try r.linkAppTransaction("at-1", customerId: "c1") }
            #expect(placed.map(\.notificationUUID) == ["n-2"])
            #expect(placed.first?.customerId == "c1")
            #expect(try await store.customer("c1")?.consentRescindedAtMs == 2_000)
            #expect(try await store.transaction { r in try r.linkAppTransaction("at-1", customerId: "c2") }.isEmpty, "the first owner keeps it")
            #expect(try await store.snapshot { r in try r.appTransactionOwner("at-1") } == "c1")

            // A later rescission, placed at once (the owner is known): the earliest stays the customer's.
            let later = try await store.transaction { r -> ConsentRescission? in
                var x = Self.rescission("n-3", at: 3_000)
                x.customerId = try r.appTransactionOwner("at-1")
                return try r.storeConsentRescission(x)
            }
            #expect(later?.customerId == "c1")
            #expect(try await store.customer("c1")?.consentRescindedAtMs == 2_000)
            #expect(try await store.customerStatusInputs("c1")?.customer.consentRescindedAtMs == 2_000)
            #expect(try await store.consentRescissions(customerId: "c1").map(\.notificationUUID) == ["n-3", "n-2"])
        }
    }

    @Test(arguments: Backend.available) func aServerFinishIsDueByBusinessTimeClaimedOnceAndEndedOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            try await store.transaction { r in _ = try r.ensureCustomer("c1") }
            func schedule(_ id: String) async throws -> Bool {
                try await store.transaction { r in
                    try r.scheduleServerFinish(transactionId: id, customerId: "c1", bundleId: "com.example", environment: "Sandbox",
                                               productId: "coins.500", dueMs: 600_000)
                }
            }
            #expect(try await schedule("t-1"))
            #expect(try await !schedule("t-1"), "scheduled once")
            #expect(try await schedule("t-2"))
            #expect(try await store.claimDueServerFinishes(businessNowMs: 599_999, nowMs: 0, owner: "a", leaseMs: 1000, limit: 10).isEmpty)

            // The app sent t-2 itself: it finishes it.
            #expect(try await store.transaction { r in try r.serverFinishAppSent(transactionId: "t-2") })
            #expect(try await !store.transaction { r in try r.serverFinishAppSent(transactionId: "t-2") })

            let a = try await store.claimDueServerFinishes(businessNowMs: 600_000, nowMs: 0, owner: "a", leaseMs: 1000, limit: 10)
            #expect(a.map(\.transactionId) == ["t-1"])
            #expect(try await store.claimDueServerFinishes(businessNowMs: 600_000, nowMs: 500, owner: "b", leaseMs: 1000, limit: 10).isEmpty, "leased to a")
            try await store.retryServerFinish(a[0], error: "HTTP 503", nextAttemptMs: 30_000)
            #expect(try await store.claimDueServerFinishes(businessNowMs: 600_000, nowMs: 29_999, owner: "b", leaseMs: 1000, limit: 10).isEmpty)
            let again = try #require(try await store.claimDueServerFinishes(businessNowMs: 600_000, nowMs: 30_000, owner: "b", leaseMs: 1000, limit: 10).first)
            #expect(again.attempts == 1 && again.lastError == "HTTP 503")
            try await store.finishServerFinish(again, state: .sent, error: nil)
            try await store.finishServerFinish(again, state: .failed, error: "late")
            #expect(try await store.serverFinishRequest(transactionId: "t-1")?.state == .sent)
            #expect(try await store.serverFinishRequest(transactionId: "t-1")?.attempts == 2)
            #expect(try await store.serverFinishRequest(transactionId: "t-2")?.state == .appSent)
            // The app's send after Kakin finished it changes nothing.
            #expect(try await !store.transaction { r in try r.serverFinishAppSent(transactionId: "t-1") })
            #expect(try await store.claimDueServerFinishes(businessNowMs: 1 << 50, nowMs: 1 << 50, owner: "c", leaseMs: 1, limit: 10).isEmpty)
        }
    }
}
