import Foundation
import KakinCore
import KakinSQLite
import Synchronization
import KakinPostgreSQL
import KakinTestPostgres
import Testing
@testable import KakinStorage


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
