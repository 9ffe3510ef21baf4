import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// A notification that can never apply as things are ends `dead` after its retries, is counted in `/metrics`,
/// listed (JSON and page), and is applied when replayed after its cause is fixed.
@Suite struct DeadNotifications {
    /// The catalog without coins.1000: the operator forgot to configure it.
    static let catalogWithout = TestKakin.catalog
    static var catalogWith: Catalog {
        var c = TestKakin.catalog
        c.upsert(Product(productId: "coins.1000", kind: .consumable, coins: 1000, priceMilli: 1_100_000, currency: "JPY"))
        return c
    }

    @Test func aNotificationForAProductMissingFromTheConfigDiesAfterItsRetriesAndAppliesWhenReplayedAfterTheFix() async throws {
        let retryClock = ManualClock(0)
        let first = try await TestKakin.start(catalog: Self.catalogWithout, configureRuntime: { options in
            options.notificationRetryClock = retryClock
            options.notificationAttemptsMax = 3
        })
        let uuid = "0d7c1f2e-aaaa-4bbb-8ccc-000000000001"
        // The test runs the inbox itself, one pass at a time, so every attempt is counted exactly.
        await first.runtime.app.services.notifications.worker.stop()
        do {
            let token = try await first.token("u1")
            let tx = try first.appStore.transaction(productId: "coins.1000", appAccountToken: token, purchaseMs: first.clock.nowMs(),
                                                    extra: ["price": 1_100_000])
            let n = try first.appStore.notification("ONE_TIME_CHARGE", nil, uuid: uuid, transaction: tx.jws, signedMs: first.clock.nowMs())
            #expect(try await first.postNotification(n).status == 200)

            // Attempt 1 fails now, 2 after 1 s, 3 after 2 s more: then it is dead, and never tried again.
            for (attempt, wait) in [(1, 0), (2, 1_000), (3, 2_000)] {
                retryClock.advance(ms: Int64(wait))
                await first.runtime.app.services.notifications.drain()
                let state = try await first.runtime.app.store.notification(uuid)
                #expect(state?.attempts == attempt)
                #expect(state?.state == (attempt < 3 ? .retrying : .dead))
            }
            retryClock.advance(ms: 3_600_000)
            #expect(await first.runtime.app.services.notifications.processDue() == 0)
            #expect(try await first.wallet("u1").total == 0)

            let metrics = String(decoding: try await first.request("GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains("kakin_notification_inbox{state=\"dead\"} 1\n"))
            #expect(metrics.contains("kakin_notifications_dead_total 1\n"))

            let listed = try await first.request("GET", "/v1/admin/notifications?state=dead").json
            let item = listed["notifications"]?.arrayValue?.first
            #expect(item?["notificationUUID"] == .string(uuid))
            #expect(item?["customerId"] == "u1")
            #expect(item?["productId"] == "coins.1000")
            #expect(item?["lastError"]?.stringValue?.contains("KKN-3002") == true)

            let page = String(decoding: try await first.request("GET", "/admin/notifications?state=dead").body, as: UTF8.self)
            #expect(page.contains(uuid))
            #expect(page.contains("<span class=\"badge bad\">dead</span>"))
            #expect(page.contains("Replay every dead notification"))
            // The customer's page shows it too, with its re-apply button.
            let customer = String(decoding: try await first.request("GET", "/admin/customers/u1").body, as: UTF8.self)
            #expect(customer.contains("id=\"n-\(uuid)\""))
        } catch {
            await first.stop()
            throw error
        }
        await first.stop(keepingFiles: true)

        // The operator adds coins.1000 to the config and restarts; the replay applies it.
        let fixed = try await TestKakin.start(catalog: Self.catalogWith, directory: first.directory, manualClock: first.clock,
                                              appStore: first.appStore, configureRuntime: { options in
            options.notificationRetryClock = retryClock
        })
        try await using(fixed, stop: { await $0.stop() }) { k in
            let replayed = try await k.request("POST", "/v1/admin/notifications/\(uuid)/replay")
            #expect(replayed.status == 200)
            #expect(replayed.json["state"] == "applied")
            #expect(try await k.wallet("u1") == WalletBalance(paid: 1000, free: 0))
            let metrics = String(decoding: try await k.request("GET", "/metrics").body, as: UTF8.self)
            #expect(metrics.contains("kakin_notification_inbox{state=\"dead\"} 0\n"))
            let events = try await k.request("GET", "/v1/admin/customers/u1/events?limit=50").json["events"]?.arrayValue ?? []
            #expect(events.contains { $0["kind"] == "admin.notificationReplayed" && $0["detail"]?["by"] == "local" })
            #expect(try await k.ledgerCheckOK())
            #expect(try await k.request("POST", "/v1/admin/notifications/no-such-uuid/replay").errorId == "KKN-9003")
        }
    }

    @Test func aNestedTransactionThatFailsVerificationIsDeadAtOnce() async throws {
        try await TestKakin.with { k in
            await k.runtime.app.services.notifications.worker.stop()
            let other = try TestAppStore(nowMs: k.clock.nowMs())   // a CA the server doesn't trust
            let tx = try other.transaction(purchaseMs: k.clock.nowMs())
            let n = try k.appStore.notification("ONE_TIME_CHARGE", nil, transaction: tx.jws, signedMs: k.clock.nowMs())
            #expect(try await k.postNotification(n).status == 200)
            await k.runtime.app.services.notifications.drain()
            let dead = try await k.request("GET", "/v1/admin/notifications?state=dead").json["notifications"]?.arrayValue ?? []
            #expect(dead.count == 1)
            #expect(dead.first?["attempts"] == 1)
            #expect(try await k.request("GET", "/v1/admin/notifications?state=nope").errorId == "KKN-1002")
        }
    }
}
