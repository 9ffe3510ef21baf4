import Foundation
import KakinCore
import KakinEvents
import Testing
@testable import KakinServer

/// The desk's webhook pages: each endpoint's deliveries with state, attempts and last answer, a replay button
/// (CSRF-checked like every desk form), and the customer page's list of the customer's events.
@Suite struct WebhookDesk {
    static let secret = "whsec_desk_tests_0123456789"

    /// Local mode whose webhook `backend` points at `receiver`, a delivery going dead `windowMs` after it was created.
    static func with(_ receiver: WebhookReceiver, windowMs: Int64, auth: Configuration.Auth? = nil,
                     _ body: (SimulatedKakin) async throws -> Void) async throws {
        try await SimulatedKakin.with(auth: auth, configure: { config in
            config.events = EventsSettings(webhooks: [WebhookEndpoint(id: "backend", url: receiver.url, secrets: [Array(Self.secret.utf8)])])
        }, configureRuntime: { options in
            var o = WebhookDeliveryWorker.Options()
            o.timeoutMs = 5_000      // far above a local answer, so a loaded test run never turns one into a timeout
            o.leaseMs = 30_000
            o.pollIntervalMs = 20
            o.schedule = RetrySchedule(firstDelayMs: 10, delayMaxMs: 50, windowMs: windowMs)
            options.webhookOptions = o
        }, body)
    }

    @Test func anEndpointsPageListsDeliveriesAndItsReplayButtonSendsADeadOneAgain() async throws {
        let receiver = try WebhookReceiver(secret: Self.secret, faults: .init(answerAll: 503))
        defer { Task { await receiver.stop() } }
        try await Self.with(receiver, windowMs: 300) { k in
            try await k.buy("u1", "coins.100")
            let desk = AdminClient(k.app)
            #expect(try await eventually { try await k.app.store.webhookCounts(endpointIds: ["backend"]).first?.dead == 2 })

            let list = await desk.get("/admin/webhooks")
            #expect(list.status == 200 && list.headers["Content-Security-Policy"]?.contains("default-src 'none'") == true)
            #expect(list.text.contains("href=\"/admin/webhooks/backend\"") && list.text.contains(receiver.url))
            #expect(list.text.contains("<span class=\"badge bad\">2</span>"))

            let dead = await desk.get("/admin/webhooks/backend?state=dead")
            #expect(dead.status == 200)
            for text in ["customer.created", "coins.credited", "HTTP 503", "refused by the test", "badge bad\">dead", "Replay every dead delivery",
                         "href=\"/admin/customers/u1#outbox\""] {
                #expect(dead.text.contains(text), "\(text)")
            }
            #expect(!dead.text.contains("<script"))
            let rows = try await k.app.store.webhookDeliveries(endpointId: "backend", state: .dead, limit: 10)
            let credited = try #require(rows.first { $0.type == "coins.credited" })
            #expect(dead.text.contains("action=\"/admin/webhooks/backend/deliveries/\(credited.eventId)/replay\""))

            // A form without the session's token changes nothing.
            let forged = await desk.send("POST", "/admin/webhooks/backend/deliveries/\(credited.eventId)/replay", form: [("back", "/admin/webhooks/backend")])
            #expect(forged.status == 403 && forged.text.contains("KKN-9002"))
            #expect(try await k.app.store.webhookCounts(endpointIds: ["backend"]).first?.dead == 2)

            // The endpoint is fixed: replay the purchase's delivery from its row.
            receiver.setFaults(.init())
            let replayed = await desk.post("/admin/webhooks/backend/deliveries/\(credited.eventId)/replay",
                                           [("back", "/admin/webhooks/backend?state=dead")], from: dead)
            #expect(replayed.status == 303 && replayed.location == "/admin/webhooks/backend?state=dead&done=replayed")
            #expect(try await receiver.wait { $0.map { $0["id"]?.stringValue } == [credited.eventId] })
            #expect(await desk.get(replayed.location ?? "").text.contains("Delivery queued again"))
            // (The receiver has it before Kakin has recorded its answer.)
            #expect(try await eventually {
                let delivered = await desk.get("/admin/webhooks/backend?state=delivered")
                return delivered.text.contains(credited.eventId) && delivered.text.contains("badge good\">delivered")
            })

            // Replay every dead one (the customer.created left).
            let all = await desk.post("/admin/webhooks/backend/replay-dead", [], from: dead)
            #expect(all.status == 303 && all.location == "/admin/webhooks/backend?state=dead&done=replayedDead&count=1")
            #expect(try await receiver.wait { $0.count == 2 })
            #expect(try await eventually { try await k.app.store.webhookCounts(endpointIds: ["backend"]).first?.dead == 0 })

            #expect(await desk.get("/admin/webhooks/crm").status == 404)
            #expect(await desk.get("/admin/webhooks/backend?state=lost").status == 400)
        }
    }

    @Test func theCustomerPageListsTheCustomersLatestEvents() async throws {
        try await SimulatedKakin.with { k in
            try await k.buy("u1", "coins.100")
            try await k.buy("u1", "premium.monthly")
            let version = try #require(try await k.status("u1")["version"]?.int64Value)
            let page = await AdminClient(k.app).get("/admin/customers/u1")
            #expect(page.status == 200)
            #expect(page.text.contains("<section class=\"card\" id=\"outbox\"><h2>Events sent to your backend</h2>"))
            let events = try await k.app.store.customerEvents(customerId: "u1", afterSequence: 0, limit: 500)
            #expect(events.count == Int(version) && version >= 4)
            for e in events {
                #expect(page.text.contains(e.eventId) && page.text.contains(e.type), "\(e.type)")
            }
            // Newest first.
            let newest = try #require(page.text.range(of: events[events.count - 1].eventId)), oldest = try #require(page.text.range(of: events[0].eventId))
            #expect(newest.lowerBound < oldest.lowerBound)
        }
    }
}
