import Foundation
import KakinCore
import KakinService
import Testing
@testable import KakinServer

/// What an operator and support see of Google Play: the status item's newest purchase token, the order lookup and the
/// desk's search and customer page, `/metrics`' Play counters and gauges.
@Suite struct GooglePlayOperationsTests {
    typealias Play = GooglePlayPurchaseTests

    @Test func aPlayStatusItemCarriesTheNewestPurchaseTokenOfItsChain() async throws {
        try await SimulatedKakin.with { k in
            let (token, order) = try await Play.buy(k, "u1", "premium", extra: ["basePlanId": "monthly"])
            func item() async throws -> JSONValue { try #require(try await k.status("u1")["subscriptions"]?.arrayValue?.first) }
            #expect(try await item()["purchaseToken"]?.stringValue == token)
            try await Play.waitUntil { try await k.app.store.playAcknowledgementState(token) == .done }
            // An upgrade: a new token linked to the old one; one item, the same chain, the new token.
            let changed = try await Play.play(k, "POST", "/v1/subscriptions/\(token)/actions",
                                              ["action": "changePlan", "basePlanId": "yearly", "replacementMode": "CHARGE_FULL_PRICE"])
            let newToken = try #require(changed["purchaseToken"]?.stringValue)
            #expect(newToken != token)
            let after = try await item()
            #expect(after["purchaseToken"]?.stringValue == newToken)
            #expect(after["originalTransactionId"]?.stringValue == PlayPurchaseFacts.orderBase(order) && after["source"] == "googlePlay")
            #expect((try await k.status("u1")["subscriptions"]?.arrayValue ?? []).count == 1)
        }
    }

    @Test func anAppStoreStatusItemHasNoPurchaseTokenKey() async throws {
        try await SimulatedKakin.with { k in
            try await k.buy("u1", "premium.monthly")
            let item = try await k.subscription("u1")
            #expect(item["source"] == "appStore" && item["purchaseToken"] == nil)
        }
    }

    @Test func metricsCountPlayPushesAcknowledgementsAndPolls() async throws {
        try await GooglePlayVoidedPollTests.with { k in
            _ = try await k.token("u1")
            let (token, _) = try await Play.buy(k, "u1", "coins_500")
            try await Play.waitUntil { try await k.app.store.playAcknowledgementState(token) == .done }
            #expect(await Play.pushRaw(k, body: Array(#"{"message": {}}"#.utf8), authorization: nil) == 400)
            _ = try await k.app.services.googlePlayNotifications.pollVoided(packageName: Play.package)
            let scrape = String(decoding: await k.app.handle(HTTPRequestFactory.get("/metrics", [])).body, as: UTF8.self)
            let lines = Set(scrape.split(separator: "\n").map(String.init))
            for expected in ["kakin_play_notifications_received_total 1", "kakin_play_notifications_refused_total 1",
                             "kakin_play_notifications_applied_total 1", "kakin_play_acknowledgements_done_total 1",
                             "kakin_play_acknowledgements_failed_total 0", "kakin_play_voided_polls_total 1",
                             "kakin_play_notifications{state=\"applied\"} 1", "kakin_play_acknowledgements{state=\"done\"} 1",
                             "kakin_play_acknowledgements{state=\"pending\"} 0"] {
                #expect(lines.contains(expected), "\(expected) missing")
            }
            // The Developer API's calls, by endpoint (package, product and token are IDs).
            let api = "/play-simulator/androidpublisher/v3/applications/{id}/purchases"
            for call in ["GET \(api)/productsv2/tokens/{id}", "POST \(api)/products/{id}/tokens/{id}:consume", "GET \(api)/voidedpurchases"] {
                #expect(lines.contains { $0.hasPrefix("kakin_store_api_requests_total{store=\"googlePlay\",endpoint=\"\(call)\",result=\"ok\"} ") },
                        "\(call) not counted")
            }
        }
    }

    @Test func theOrderLookupAndTheDeskFindAPlayOrderItsRenewalAndItsTokenAndShowTheChain() async throws {
        try await SimulatedKakin.with { k in
            _ = try await k.token("u1")
            let (token, order) = try await Play.buy(k, "u1", "premium", extra: ["basePlanId": "monthly"])
            try await Play.waitUntil { try await k.app.store.playAcknowledgementState(token) == .done }
            try await k.advance(days: 31)
            let renewal = order + "..0"
            for key in [order, renewal, token] {
                let found = await k.kakin("GET", "/v1/admin/orders/\(key)")
                #expect(found.status == 200, "\(key): \(found.json)")
                #expect(found.json["store"] == "googlePlay" && found.json["customerId"] == "u1" && found.json["orderId"]?.stringValue == key)
                let orders = (found.json["transactions"]?.arrayValue ?? []).compactMap { $0["transaction"]?["orderId"]?.stringValue }
                #expect(orders == [order, renewal], "\(orders)")
                let search = await k.kakin("GET", "/v1/admin/search?q=\(key)").json
                let hit = (search["hits"]?.arrayValue ?? []).first { $0["kind"] == "order" }
                #expect(hit?["customerId"] == "u1" && hit?["title"]?.stringValue == "Google Play chain \(order)", "\(search)")
            }
            #expect(await k.kakin("GET", "/v1/admin/orders/GPA.0000-0000-0000-00000").status == 404)
            let page = String(decoding: await k.app.handle(HTTPRequestFactory.get("/admin/customers/u1", [])).body, as: UTF8.self)
            #expect(page.contains("Google Play chain \(order)") && page.contains(renewal) && page.contains(token))
        }
    }

    /// Play's paid coins are in the unused-balance report under their source: unvalued (currency `XXX`, value 0) until
    /// Kakin has read what the order charged (`orders.get`), then at that price.
    @Test func playCoinsAreInTheUnusedBalanceReportUnderTheirSource() async throws {
        try await SimulatedKakin.with { k in
            _ = try await k.token("u1")
            await k.app.services.googlePlay.stop()  // the charge is read below, when the test says
            _ = try await Play.buy(k, "u1", "coins_500", extra: ["quantity": 2])
            try await Play.waitUntil { try await Play.wallet(k, "u1") == WalletBalance(paid: 1000, free: 100) }
            func play() async -> JSONValue? {
                let report = await k.kakin("GET", "/v1/admin/reports/unused-balance?asOf=2026-01-02")
                #expect(report.status == 200, "\(report.json)")
                return (report.json["totals"]?.arrayValue ?? []).first { $0["source"] == "googlePlay" }
            }
            var totals = await play()
            #expect(totals?["unusedPaidCoins"] == 1000 && totals?["customers"] == 1 && totals?["currency"] == "XXX" && totals?["value"] == 0,
                    "\(totals ?? .null)")
            // Two units of 4.99 USD: 9.98, the value rounded down to the major unit.
            #expect(await k.app.services.googlePlay.readChargesDue(limit: 10) == 1)
            totals = await play()
            #expect(totals?["unusedPaidCoins"] == 1000 && totals?["currency"] == "USD" && totals?["value"] == 9
                    && totals?["bundleId"]?.stringValue == Play.package, "\(totals ?? .null)")
        }
    }
}
