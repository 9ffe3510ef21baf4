import Foundation
import KakinCore
import KakinEvents
import KakinSystem
import Testing
@testable import KakinServer

/// The contract's "Events out" over HTTP: the feed (`GET /v1/events`, `GET /v1/customers/{id}/events`), the admin
/// webhook endpoints (list, deliveries, replay) and who may call them.
@Suite struct EventFeedHTTP {
    static let secret = "whsec_http_tests_0123456789"

    /// Grants `amount` coins to `customer` (one `coins.granted` event; the first call for a customer also records `customer.created`).
    static func grant(_ k: TestKakin, _ customer: String, key: String, amount: Int64 = 5,
                      headers: [String: String] = [:]) async throws -> TestKakin.Response {
        try await k.request("POST", "/v1/customers/\(customer)/wallet/grants", json: ["amount": .int(amount), "reason": "test"],
                            headers: headers.merging(["Idempotency-Key": key]) { a, _ in a })
    }

    /// Every page of `GET /v1/events` from the start, `limit` at a time: the events and the cursors handed out.
    static func readFeed(_ k: TestKakin, limit: Int, query: String = "", headers: [String: String] = [:]) async throws -> (events: [JSONValue], cursors: [String]) {
        var events: [JSONValue] = []
        var cursors: [String] = []
        var after = ""
        for _ in 0..<100 {
            let r = try await k.request("GET", "/v1/events?limit=\(limit)\(query)" + (after.isEmpty ? "" : "&after=\(after)"), headers: headers)
            #expect(r.status == 200, "\(String(decoding: r.body, as: UTF8.self))")
            let page = r.json["events"]?.arrayValue ?? []
            #expect(page.count <= limit)
            let next = try #require(r.json["nextCursor"]?.stringValue)
            if page.isEmpty {
                #expect(next == after || after.isEmpty, "an empty page hands back the cursor it was asked for")
                break
            }
            events += page
            cursors.append(next)
            after = next
        }
        return (events, cursors)
    }

    @Test func theFeedPagesEveryEventOnceInCommitOrderAndFiltersByType() async throws {
        try await TestKakin.with { k in
            // u1: created, granted ×3; u2: created, granted ×2, spent; u3: created, granted.
            for (customer, grants) in [("u1", 3), ("u2", 2), ("u3", 1)] {
                for i in 0..<grants { #expect(try await Self.grant(k, customer, key: "\(customer)-\(i)").status == 201) }
            }
            #expect(try await k.spend("u2", key: "s1", amount: 3).status == 201)
            // A replayed idempotent grant is a duplicate fact: no event.
            #expect(try await Self.grant(k, "u1", key: "u1-0").status == 201)

            let (events, cursors) = try await Self.readFeed(k, limit: 2)
            let expected = 10 // u1 4, u2 4, u3 2
            #expect(events.count == expected)
            #expect(Set(cursors).count == cursors.count, "every page moves the cursor")
            #expect(Set(events.compactMap { $0["id"]?.stringValue }).count == events.count)
            for event in events {
                #expect(event["id"]?.stringValue?.hasPrefix("evt_") == true)
                #expect(event["type"]?.stringValue.flatMap(EventType.init(rawValue:)) != nil)
                #expect(event["createdAt"]?.stringValue.flatMap(Timestamp.parseRFC3339) != nil)
                #expect(event["data"]?["customer"]?["customerId"] == event["customerId"])
                // The status in the event is the one after the change: its version counts this event.
                #expect((event["data"]?["customer"]?["version"]?.int64Value ?? 0) >= (event["sequence"]?.int64Value ?? .max))
            }
            // Each customer's events in the feed: sequence 1, 2, 3… in order, without a gap.
            let byCustomer = Dictionary(grouping: events, by: { $0["customerId"]?.stringValue ?? "" })
            #expect(Set(byCustomer.keys) == ["u1", "u2", "u3"])
            for (customer, list) in byCustomer {
                #expect(list.map { $0["sequence"]?.int64Value ?? 0 } == Array(1...Int64(list.count)), "\(customer)")
                #expect(list.first?["type"] == "customer.created")
                // The status's version is the customer's last sequence.
                #expect(try await k.request("GET", "/v1/customers/\(customer)").json["version"]?.int64Value == Int64(list.count))
            }
            #expect(byCustomer["u2"]?.last?["type"] == "coins.spent")

            // One page with the default limit is the same list; the last cursor reads nothing new until something commits.
            let whole = try await k.request("GET", "/v1/events")
            #expect(whole.json["events"]?.arrayValue == events)
            let end = try #require(whole.json["nextCursor"]?.stringValue)
            let idle = try await k.request("GET", "/v1/events?after=\(end)")
            #expect(idle.json["events"]?.arrayValue?.isEmpty == true && idle.json["nextCursor"]?.stringValue == end)
            #expect(try await Self.grant(k, "u3", key: "u3-later").status == 201)
            let later = try await k.request("GET", "/v1/events?after=\(end)")
            #expect(later.json["events"]?.arrayValue?.map { $0["type"] } == ["coins.granted"])
            #expect(later.json["events"]?.arrayValue?.first?["sequence"] == 3)

            // types: exact names and prefixes; the cursor moves past what the filter skipped.
            let spent = try await k.request("GET", "/v1/events?types=coins.spent,customer.created&limit=500")
            #expect(spent.json["events"]?.arrayValue?.map { $0["type"]?.stringValue ?? "" }.sorted()
                    == ["coins.spent", "customer.created", "customer.created", "customer.created"])
            let coins = try await Self.readFeed(k, limit: 1, query: "&types=coins.*").events
            let coinEvents = 8 // 3 + 2 + 1 grants, 1 spend, the later grant
            #expect(coins.count == coinEvents && coins.allSatisfy { $0["type"]?.stringValue?.hasPrefix("coins.") == true })

            // Bad queries: 400 with the contract's error body, nothing else.
            for query in ["limit=0", "limit=501", "limit=ten", "types=coins.spend", "types=wallet.*"] {
                let r = try await k.request("GET", "/v1/events?\(query)")
                #expect(r.status == 400 && r.errorCode == "invalid_request" && r.errorId == "KKN-9101", "\(query): \(r.status)")
            }
            for cursor in ["garbage", Base64.urlEncode(Array("ev:1".utf8)), String(repeating: "A", count: 200)] {
                let r = try await k.request("GET", "/v1/events?after=\(cursor)")
                #expect(r.status == 400 && r.errorCode == "invalid_cursor", "\(cursor)")
            }
        }
    }

    @Test func aCustomersFeedPagesItsEventsBySequence() async throws {
        try await TestKakin.with { k in
            for i in 0..<4 { #expect(try await Self.grant(k, "u1", key: "g\(i)").status == 201) }
            #expect(try await Self.grant(k, "u2", key: "g0").status == 201)
            let all = try await k.request("GET", "/v1/customers/u1/events")
            #expect(all.status == 200)
            let events = try #require(all.json["events"]?.arrayValue)
            #expect(events.map { $0["sequence"]?.int64Value ?? 0 } == [1, 2, 3, 4, 5])
            #expect(events.allSatisfy { $0["customerId"] == "u1" })
            #expect(all.json["nextAfterSequence"] == 5)
            // The feed's copy and the customer's copy are the same event.
            let feed = try await k.request("GET", "/v1/events?limit=500").json["events"]?.arrayValue ?? []
            #expect(feed.filter { $0["customerId"] == "u1" } == events)

            var seen: [Int64] = []
            var after: Int64 = 0
            for _ in 0..<10 {
                let page = try await k.request("GET", "/v1/customers/u1/events?afterSequence=\(after)&limit=2")
                let list = page.json["events"]?.arrayValue ?? []
                if list.isEmpty {
                    #expect(page.json["nextAfterSequence"]?.int64Value == after)
                    break
                }
                seen += list.map { $0["sequence"]?.int64Value ?? 0 }
                after = try #require(page.json["nextAfterSequence"]?.int64Value)
            }
            #expect(seen == [1, 2, 3, 4, 5])
            #expect(try await k.request("GET", "/v1/customers/u1/events?afterSequence=3").json["events"]?.arrayValue?.map { $0["sequence"] } == [4, 5])
            #expect(try await k.request("GET", "/v1/customers/nobody/events").json["events"]?.arrayValue?.isEmpty == true)
            for query in ["afterSequence=-1", "afterSequence=x", "limit=0", "limit=501"] {
                let r = try await k.request("GET", "/v1/customers/u1/events?\(query)")
                #expect(r.status == 400 && r.errorId == "KKN-9101", "\(query)")
            }
        }
    }

    @Test func theFeedNeedsABackendKeyAndACustomerReadsOnlyItsOwnEvents() async throws {
        try await Authentication.withAuthenticatedKakin { (k: TestKakin) async throws in
            let backend = ["Authorization": "Bearer \(Authentication.backendKey)"]
            let admin = ["Authorization": "Bearer \(Authentication.adminKey)"]
            let mine = ["Authorization": "Bearer \(Authentication.customerToken("u1"))"]
            #expect(try await Self.grant(k, "u1", key: "g", headers: backend).status == 201)
            #expect(try await k.request("GET", "/v1/events").status == 401)
            #expect(try await k.request("GET", "/v1/events", headers: mine).status == 403)
            #expect(try await k.request("GET", "/v1/events", headers: backend).json["events"]?.arrayValue?.count == 2)
            #expect(try await k.request("GET", "/v1/events", headers: admin).status == 200)
            #expect(try await k.request("GET", "/v1/customers/u1/events", headers: mine).json["events"]?.arrayValue?.count == 2)
            #expect(try await k.request("GET", "/v1/customers/u2/events", headers: mine).status == 403)
            #expect(try await k.request("GET", "/v1/customers/u1/events", headers: backend).status == 200)
            #expect(try await k.request("GET", "/v1/admin/webhooks", headers: backend).status == 403)
            #expect(try await k.request("GET", "/v1/admin/webhooks", headers: admin).json["webhooks"] == [])
            #expect(try await k.request("POST", "/v1/admin/webhooks/backend/replay", json: ["since": "2026-01-01T00:00:00Z"], headers: backend).status == 403)
        }
    }

    /// Kakin whose one webhook (`backend`) points at `receiver`, with the worker's schedule scaled down: a 5 s
    /// deadline per attempt, retries from 10 ms doubling to 50 ms, and `windowMs` to deliver before `dead`.
    static func withWebhook(_ receiver: WebhookReceiver, windowMs: Int64, types: EventTypeFilter = .all,
                            _ body: (TestKakin) async throws -> Void) async throws {
        let k = try await TestKakin.start(configure: { config in
            config.events = EventsSettings(webhooks: [WebhookEndpoint(id: "backend", url: receiver.url, secrets: [Array(Self.secret.utf8)], types: types)])
        }, configureRuntime: { options in
            var o = WebhookDeliveryWorker.Options()
            o.timeoutMs = 5_000      // far above a local answer, so a loaded test run never turns one into a timeout
            o.leaseMs = 30_000
            o.pollIntervalMs = 20
            o.schedule = RetrySchedule(firstDelayMs: 10, delayMaxMs: 50, windowMs: windowMs)
            options.webhookOptions = o
        })
        try await using(k, stop: { await $0.stop() }, body)
    }

    @Test func aDeadDeliveryIsListedWithItsLastAnswerAndComesBackAfterReplay() async throws {
        let receiver = try WebhookReceiver(secret: Self.secret, faults: .init(answerAll: 500))
        defer { Task { await receiver.stop() } }
        try await Self.withWebhook(receiver, windowMs: 300) { k in
            let before = k.clock.nowMs()
            #expect(try await Self.grant(k, "u1", key: "g1").status == 201)
            // The receiver refuses everything: both events (customer.created, coins.granted) go dead after the window.
            var dead: [JSONValue] = []
            #expect(try await eventually {
                dead = try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=dead").json["deliveries"]?.arrayValue ?? []
                return dead.count == 2
            })
            #expect(Set(dead.compactMap { $0["type"]?.stringValue }) == ["customer.created", "coins.granted"])
            for d in dead {
                #expect(d["state"] == "dead" && d["customerId"] == "u1")
                #expect((d["attempts"]?.int64Value ?? 0) >= 1)
                #expect(d["lastStatus"] == 500 && d["lastAnswer"]?.stringValue?.contains("refused by the test") == true)
                #expect(d["lastAttemptAt"]?.stringValue != nil && d["finishedAt"]?.stringValue != nil && d["nextAttemptAt"] == .null)
            }
            #expect(receiver.printed.isEmpty)
            let list = try await k.request("GET", "/v1/admin/webhooks")
            let endpoint = try #require(list.json["webhooks"]?.arrayValue?.first)
            #expect(endpoint["id"] == "backend" && endpoint["url"]?.stringValue == receiver.url)
            #expect(endpoint["dead"] == 2 && endpoint["pending"] == 0 && endpoint["retrying"] == 0 && endpoint["oldestPendingAgeSeconds"] == .null)
            #expect(try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=delivered").json["deliveries"] == [])
            let metrics = String(decoding: try await k.request("GET", "/metrics").body, as: UTF8.self)
            for line in ["kakin_webhook_dead{endpoint=\"backend\"} 2", "kakin_webhook_backlog{endpoint=\"backend\"} 0",
                         "kakin_webhook_deliveries{endpoint=\"backend\",state=\"dead\"} 2",
                         "kakin_webhook_oldest_pending_age_seconds{endpoint=\"backend\"} 0.0"] {
                #expect(metrics.contains("\n" + line + "\n"), "\(line)")
            }
            #expect(metrics.contains("kakin_webhook_attempts_total{endpoint=\"backend\",outcome=\"dead\"} 2\n"))

            // The endpoint is fixed; replay the grant's event by id: it is delivered, the other stays dead.
            receiver.setFaults(.init())
            let granted = try #require(dead.first { $0["type"] == "coins.granted" }?["eventId"]?.stringValue)
            let replay = try await k.request("POST", "/v1/admin/webhooks/backend/replay", json: ["eventIds": [.string(granted)]])
            #expect(replay.status == 202 && replay.json == ["queued": 1])
            #expect(try await receiver.wait { $0.map { $0["id"]?.stringValue } == [granted] })
            #expect(try await eventually {
                try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=delivered").json["deliveries"]?.arrayValue?
                    .map { $0["eventId"]?.stringValue } == [granted]
            })
            let stillDead = try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=dead").json["deliveries"]?.arrayValue ?? []
            #expect(stillDead.map { $0["type"] } == ["customer.created"])

            // Replay since a time: every delivery of the events created since then (the delivered one too; the
            // receiver deduplicates it by id and prints only the new one).
            let since = try await k.request("POST", "/v1/admin/webhooks/backend/replay", json: ["since": .string(Timestamp.rfc3339(before))])
            #expect(since.status == 202 && since.json == ["queued": 2])
            #expect(try await receiver.wait { $0.count == 2 })
            #expect(receiver.printedEvents.map { $0["type"] } == ["coins.granted", "customer.created"])
            #expect(try await eventually {
                let counts = try await k.request("GET", "/v1/admin/webhooks").json["webhooks"]?.arrayValue?.first
                return counts?["dead"] == 0 && counts?["pending"] == 0 && counts?["retrying"] == 0
            })
            #expect(receiver.listener.counts.duplicates == 1 && receiver.listener.counts.rejected == 0)

            // Refusals: 404 for an endpoint that is not configured, 400 for anything but one of the two bodies.
            let unknown = try await k.request("POST", "/v1/admin/webhooks/crm/replay", json: ["since": "2026-01-01T00:00:00Z"])
            #expect(unknown.status == 404 && unknown.errorCode == "webhook_not_found" && unknown.errorId == "KKN-9100")
            #expect(try await k.request("GET", "/v1/admin/webhooks/crm/deliveries").status == 404)
            for body: JSONValue in [[:], ["eventIds": []], ["since": "yesterday"], ["eventIds": ["evt_1"], "since": "2026-01-01T00:00:00Z"],
                                    ["eventIds": [1]], ["eventIds": .array(Array(repeating: "evt_x", count: 1_001))]] {
                let r = try await k.request("POST", "/v1/admin/webhooks/backend/replay", json: body)
                #expect(r.status == 400 && r.errorId == "KKN-9102", "\(body.serialized().prefix(80))")
            }
            #expect(try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=lost").status == 400)
            #expect(try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?limit=0").status == 400)
        }
    }

    @Test func anEndpointsDeliveriesFollowItsTypesAndEachCustomersOrder() async throws {
        let receiver = try WebhookReceiver(secret: Self.secret)
        defer { Task { await receiver.stop() } }
        try await Self.withWebhook(receiver, windowMs: 60_000, types: try EventTypeFilter(patterns: ["coins.*"])) { k in
            for i in 0..<3 { #expect(try await Self.grant(k, "u1", key: "g\(i)").status == 201) }
            #expect(try await k.spend("u1", key: "s", amount: 2).status == 201)
            #expect(try await receiver.wait { $0.count == 4 })
            let printed = receiver.printedEvents
            #expect(printed.map { $0["type"] } == ["coins.granted", "coins.granted", "coins.granted", "coins.spent"])
            #expect(printed.map { $0["sequence"] } == [2, 3, 4, 5], "customer.created is not a coins.* event")
            // (The receiver has the last one before Kakin has recorded its answer.)
            #expect(try await eventually {
                let delivered = try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=delivered&limit=500").json["deliveries"]?.arrayValue ?? []
                return delivered.count == 4 && delivered.allSatisfy { $0["lastStatus"] == 200 && $0["attempts"] == 1 }
            })
            let two = try await k.request("GET", "/v1/admin/webhooks/backend/deliveries?state=delivered&limit=2").json["deliveries"]?.arrayValue ?? []
            #expect(two.map { $0["type"] } == ["coins.spent", "coins.granted"], "newest first, limit 2")
            #expect(receiver.listener.counts.rejected == 0)
        }
    }
}
