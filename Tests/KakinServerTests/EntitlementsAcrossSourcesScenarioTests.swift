import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import KakinExternal
import KakinMetrics
import KakinService
import KakinTestPostgres
@testable import KakinServer
import Testing

/// Issue 28's done-when for the numbers and events across sources: one customer subscribes to the group `premium` in the
/// App Store (local mode's simulator) and on the web (Stripe's signed webhooks), in JPY on days of Asia/Tokyo; every
/// action at 00:00 UTC = 09:00 in Tokyo, so each fact's Tokyo date is its UTC date.
/// - Jan 1: App Store premium.plus.monthly, 1,480 (period to Feb 1); Jan 10 auto-renew off (the retention offer
///   declined): it lapses Feb 1, a voluntary churn.
/// - Jan 5: Stripe premium.monthly, 1,200 a month (periods Jan 5–Feb 4, Feb 4–Mar 6); Feb 20 cancelled at the period's
///   end; Mar 6 Stripe ends it, a voluntary churn.
/// By hand: gross 1,480 App Store + 2 × 1,200 Stripe; proceeds 1,480 × 0.7 = 1,036 (the App Store's 30 %) and 2,400 (no
/// store commission on the web); MRR at Jan 31 1,480 + 1,200 (both monthly), at Feb 28 1,200, at Mar 31 none.
/// Events: one `entitlement.granted` (the App Store's start), none while the web takes over, one `entitlement.revoked`
/// when Stripe ends it.
@Suite struct EntitlementsAcrossSourcesScenario {
    static let day: Int64 = 86_400_000
    static let secret = Array("whsec_scenario_0123456789abcdef0123".utf8)

    @Test func anAppStoreAndAWebSubscriptionToOneGroupGiveTheHandComputedNumbersAndOneGrantAndOneRevoke() async throws {
        try await Self.run(database: nil)
    }

    @Test(.postgreSQL) func theSameOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in try await Self.run(database: .postgresql(url: schema.url)) }
    }

    static func run(database: Configuration.Database?) async throws {
        try await SimulatedKakin.with(database: database, configure: { config in
            config.apps[0].external.stripe = StripeWebhookConfiguration(webhookSecretEnv: "KAKIN_STRIPE_SECRET", secrets: [Self.secret])
        }) { k in
            let start = SimulatedKakin.start2026
            let numbers = k.app.services.businessMetrics
            func at(_ dayOfYear: Int64) async throws { try await k.advance(to: start + (dayOfYear - 1) * Self.day) }
            /// A Stripe event signed now, as Stripe sends it.
            func stripe(_ type: String, _ id: String, _ object: JSONValue) async throws {
                let event: JSONValue = ["id": .string(id), "object": "event", "api_version": "2025-03-31.basil", "created": .int(k.nowMs / 1000),
                                        "data": ["object": object], "livemode": false, "pending_webhooks": 1, "type": .string(type)]
                let header = TimestampedSignature.header(body: event.serialized(), timestamp: k.nowMs / 1000, secrets: [Self.secret])
                let answer = await k.kakin("POST", "/v1/webhooks/stripe/\(Catalog.demoBundleId)", event, headers: [("Stripe-Signature", header)])
                #expect(answer.status == 200 && answer.json["outcome"] == "applied", "\(type): \(answer.json)")
            }
            let md: JSONValue = ["kakin_customer_id": "U", "kakin_product_id": "premium.monthly"]
            let webStart = start + 4 * Self.day, month = 30 * Self.day
            func period(_ n: Int64) -> (Int64, Int64) { ((webStart + n * month) / 1000, (webStart + (n + 1) * month) / 1000) }
            func subscription(_ status: String, _ n: Int64, cancel: Bool = false, endedAt: Int64? = nil) -> JSONValue {
                ["id": "sub_U", "object": "subscription", "status": .string(status), "cancel_at_period_end": .bool(cancel),
                 "ended_at": endedAt.map { .int($0 / 1000) } ?? .null, "canceled_at": endedAt.map { .int($0 / 1000) } ?? .null, "metadata": md,
                 "items": ["object": "list", "data": [["id": "si_U", "object": "subscription_item", "current_period_start": .int(period(n).0),
                                                       "current_period_end": .int(period(n).1)]]]]
            }
            func invoice(_ n: Int64) -> JSONValue {
                ["id": .string("in_U\(n)"), "object": "invoice", "amount_paid": 1200, "currency": "jpy", "billing_reason": "subscription_cycle",
                 "status_transitions": ["paid_at": .int(period(n).0)],
                 "parent": ["type": "subscription_details", "subscription_details": ["metadata": md, "subscription": "sub_U"]],
                 "lines": ["object": "list", "data": [["id": .string("il_U\(n)"), "object": "line_item", "amount": 1200, "metadata": md,
                                                       "period": ["start": .int(period(n).0), "end": .int(period(n).1)]]]]]
            }

            // Jan 1: the App Store.
            let appStore = try await k.buy("U", "premium.plus.monthly")["originalTransactionId"]!.stringValue!
            // Jan 5: the web.
            try await at(5)
            try await stripe("customer.subscription.created", "evt_c", subscription("active", 0))
            try await stripe("invoice.paid", "evt_i0", invoice(0))
            #expect(try await k.status("U")["subscriptions"]?.arrayValue?.map { $0["source"]?.stringValue ?? "" }.sorted() == ["appStore", "stripe"])
            // Jan 10: auto-renew off in the App Store; it lapses Feb 1 while the web serves the group.
            try await at(10)
            try await k.action(appStore, "disableAutoRenew", ["declineRetentionOffer": true])
            try await at(35)  // Feb 4: the web renews.
            try await stripe("customer.subscription.updated", "evt_u1", subscription("active", 1))
            try await stripe("invoice.paid", "evt_i1", invoice(1))
            #expect(try await k.status("U")["status"] == "active")
            try await at(51)  // Feb 20: cancelled at the period's end.
            try await stripe("customer.subscription.updated", "evt_u2", subscription("active", 1, cancel: true))
            try await at(65)  // Mar 6: Stripe ends it.
            try await stripe("customer.subscription.deleted", "evt_d", subscription("canceled", 1, cancel: true, endedAt: webStart + 2 * month))
            #expect(try await k.status("U")["status"] == "inactive")
            try await k.advance(to: start + 89 * Self.day + Self.day / 2)  // Mar 31, 12:00 UTC
            try await numbers.catchUp()

            // The numbers, per source, by hand.
            let quarter = try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter())
            #expect(quarter.revenue == [Overview.Revenue(currency: "JPY", bySource: [
                "appStore": .init(gross: 1_480, refunded: 0, proceeds: 1_036), "stripe": .init(gross: 2_400, refunded: 0, proceeds: 2_400)])],
                    "\(quarter.revenue)")
            #expect(quarter.revenue.first?.gross == 3_880 && quarter.newSubscriptions == 2 && quarter.churnedVoluntary == 2)
            #expect(quarter.mrr.isEmpty && quarter.activeSubscriptions == 0)
            let jan = try await numbers.overview(from: "2026-01-01", to: "2026-01-31", filter: MetricsFilter())
            #expect(jan.mrr == [Overview.Money(currency: "JPY", amount: 2_680, bySource: ["appStore": 1_480, "stripe": 1_200])], "\(jan.mrr)")
            #expect(jan.activeSubscriptions == 2 && jan.revenue.first?.gross == 2_680)
            let feb = try await numbers.overview(from: "2026-02-01", to: "2026-02-28", filter: MetricsFilter())
            #expect(feb.mrr == [Overview.Money(currency: "JPY", amount: 1_200, bySource: ["stripe": 1_200])], "\(feb.mrr)")
            #expect(feb.revenue.first?.bySource == ["stripe": .init(gross: 1_200, refunded: 0, proceeds: 1_200)] && feb.churnedVoluntary == 1)
            let web = try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter(source: "stripe"))
            #expect(web.revenue.first?.gross == 2_400 && web.newSubscriptions == 1 && web.churnedVoluntary == 1)
            // The API: `source` and `bySource`, as the contract's "Entitlements across sources" says; the monthly series too.
            let http = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/overview",
                                                                 [("from", "2026-01-01"), ("to", "2026-01-31"), ("source", "appStore")]))
            let body = try JSONParser.parse(http.body)
            #expect(http.status == 200 && body["mrr"]?.arrayValue?.first?["bySource"] == ["appStore": 1_480]
                    && body["revenue"]?.arrayValue?.first?["bySource"]?["appStore"]?["gross"] == 1_480, "\(body.jsonString)")
            let series = try await numbers.series(name: "mrr", interval: .month, from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter())
            #expect(series["points"]?.arrayValue?.map { $0["value"]?.arrayValue?.first?["bySource"] ?? .null }
                    == [["appStore": 1_480, "stripe": 1_200], ["stripe": 1_200], .null])
            let bad = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/overview", [("from", "2026-01-01"), ("to", "2026-01-31"), ("source", "App Store")]))
            #expect(bad.status == 400)
            // The desk's numbers page: the split by source, and a source filter.
            let page = await k.app.handle(HTTPRequestFactory.get("/admin/metrics", [("from", "2026-01-01"), ("to", "2026-03-31"), ("source", "stripe")]))
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(page.status == 200 && html.contains("<option value=\"stripe\" selected>stripe</option>") && html.contains("<h2>By source</h2>")
                    && html.contains("<tr><td><code>stripe</code></td><td class=\"num\">0</td><td class=\"num\">2,400 JPY</td>"), "\(html.prefix(300))")
            print("entitlements across sources: quarter revenue \(quarter.revenue.first?.json.jsonString ?? "-"); Jan MRR \(jan.mrr.first?.json.jsonString ?? "-")")

            // The events: one grant when the App Store started, one revoke when the web ended, the sources with each.
            let events = try await k.app.services.store.customerEvents(customerId: "U", afterSequence: 0, limit: 200)
            let entitlements = events.filter { $0.type.hasPrefix("entitlement.") }.map { e -> String in
                let data = (try? JSONParser.parse(e.payload))?["data"] ?? .null
                return "\(e.type) \(data["entitlement"]?.stringValue ?? "-") \(data["sources"]?.jsonString ?? "-")"
            }
            #expect(entitlements == [#"entitlement.granted premium ["appStore"]"#, #"entitlement.revoked premium []"#], "\(events.map(\.type))")
            let types = events.map(\.type)
            #expect(types.firstIndex(of: "entitlement.granted") == types.firstIndex(of: "subscription.started").map { $0 + 1 })
            #expect(types.last == "entitlement.revoked" && types.filter { $0 == "subscription.expired" }.count == 2)
            print("entitlements across sources: events \(types.joined(separator: " "))")

            // `kakin report rebuild` finds the incremental rollups equal to what the facts of both sources say.
            let rebuilt = try await numbers.rebuild()
            #expect(rebuilt.differing == 0, "\(rebuilt.sample)")
            #expect(try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter()) == quarter)
        }
    }
}
