import Foundation
import KakinCore
import KakinMetrics
import KakinService
import KakinTestPostgres
import Testing
@testable import KakinServer

/// Google Play in the business numbers, in local mode against the Play simulator: coins bought and a subscription with a
/// free trial, two renewals and a refund of the second, each order at what `orders.get` says it charged, counted under
/// `source` "googlePlay" beside the App Store; figures by hand.
@Suite struct GooglePlayNumbersTests {
    typealias Play = GooglePlayPurchaseTests

    static func run(_ k: SimulatedKakin) async throws {
        let numbers = k.app.services.businessMetrics
        // Jan 1 00:00Z: u2 buys 500 coins (4.99 USD).
        let (coins, _) = try await Play.buy(k, "u2", "coins_500")
        #expect([201, 409].contains(await Play.present(k, "u2", "coins_500", coins).status))
        // Jan 1 00:00Z: a week's free trial of the monthly plan (order GPA.x, 0), then ..0 from Jan 8 to Feb 8 (4.99 USD).
        let (token, order) = try await Play.buy(k, "u1", "premium", extra: ["basePlanId": "monthly", "offerId": "free-trial"])
        #expect([201, 409].contains(await Play.present(k, "u1", "premium", token).status))
        try await k.advance(days: 10)
        // Feb 10: ..1 renewed on Feb 8 (to Mar 8, 4.99), then refunded in full by Google today.
        try await k.advance(days: 30)
        let renewal = PlayPurchaseFacts.orderBase(order) + "..1"
        try await Play.play(k, "POST", "/v1/orders/\(renewal)/refund", [:])
        try await Play.waitUntil { try await k.status("u1")["status"] == "inactive" }
        // The charge reads (the acknowledgement worker's pass after it): every order read once, then nothing is due.
        _ = await k.app.services.googlePlay.readChargesDue(limit: 100)
        #expect(await k.app.services.googlePlay.readChargesDue(limit: 100) == 0)
        try await numbers.catchUp()

        // January (Asia/Tokyo days): the coins' 4.99 on Jan 1, ..0's 4.99 on Jan 8; MRR at Jan 31 is ..0's 499 over its
        // 31 days as months (31 / 30.4375 = 1.01848): 499 / 1.01848 = 489.95 → 490. Proceeds (998 − 0) × (1 − 0.30)
        // (the app's commission) = 698.6 → 699.
        let jan = try await numbers.overview(from: "2026-01-01", to: "2026-01-31", filter: MetricsFilter())
        #expect(jan.mrr == [Overview.Money(currency: "USD", amount: 490, bySource: ["googlePlay": 490])], "\(jan.mrr)")
        #expect(jan.revenue.map(\.json) == [["currency": "USD", "gross": 998, "refunded": 0, "proceeds": 699,
                                             "bySource": ["googlePlay": ["gross": 998, "refunded": 0, "proceeds": 699]]]], "\(jan.revenue.map(\.json))")
        let coinsOnly = try await numbers.overview(from: "2026-01-01", to: "2026-01-31", filter: MetricsFilter(productId: "coins_500"))
        #expect(coinsOnly.revenue.first?.bySource == ["googlePlay": .init(gross: 499, refunded: 0, proceeds: 349)] && coinsOnly.mrr.isEmpty)
        #expect(jan.newSubscriptions == 1 && jan.trialsStarted == 1 && jan.trialsConverted == 1 && jan.activeSubscriptions == 1)
        // February: ..1's 4.99 on Feb 8, refunded Feb 10; nothing runs at the month's end (the refund ended it: churn).
        let feb = try await numbers.overview(from: "2026-02-01", to: "2026-02-28", filter: MetricsFilter(source: "googlePlay"))
        #expect(feb.revenue.first?.bySource == ["googlePlay": .init(gross: 499, refunded: 499, proceeds: 0)], "\(feb.revenue.map(\.json))")
        #expect(feb.mrr.isEmpty && feb.activeSubscriptions == 0 && feb.churnedVoluntary == 1, "\(feb.mrr)")
        // The App Store sold nothing: its filter is empty.
        let appStore = try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter(source: "appStore"))
        #expect(appStore.revenue.isEmpty && appStore.mrr.isEmpty && appStore.newSubscriptions == 0)

        // The API: `&source=googlePlay`, `bySource`, and the monthly MRR series.
        let http = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/overview",
                                                             [("from", "2026-01-01"), ("to", "2026-03-31"), ("source", "googlePlay")]))
        let body = try JSONParser.parse(http.body)
        #expect(http.status == 200 && body["revenue"]?.arrayValue?.first?["bySource"]?["googlePlay"] == ["gross": 1_497, "refunded": 499, "proceeds": 699],
                "\(body.jsonString)")
        let series = try await numbers.series(name: "mrr", interval: .month, from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter())
        #expect(series["points"]?.arrayValue?.map { $0["value"]?.arrayValue?.first?["bySource"] ?? .null } == [["googlePlay": 490], .null, .null],
                "\(series.jsonString)")

        // `kakin export`: each Play order is a `transactions` row under `source` googlePlay, at what it charged (milliunits).
        let dir = k.directory.appendingPathComponent("export")
        _ = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: 0, untilMs: .max, format: .jsonl)
        let file = try #require(try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.hasPrefix("transactions-") })
        let rows = try ExportTests.lines(dir, file).filter { $0["source"] == "googlePlay" }
        let chain = PlayPurchaseFacts.orderBase(order)
        func row(_ id: String) -> JSONValue? { rows.first { $0["transactionId"]?.stringValue == id } }
        #expect(rows.count == 4, "\(rows)")
        #expect(row(chain)?["price"] == 0 && row(chain)?["offerDiscountType"] == "FREE_TRIAL" && row(chain)?["transactionReason"] == "PURCHASE")
        #expect(row(chain + "..0")?["price"] == 4_990 && row(chain + "..0")?["transactionReason"] == "RENEWAL"
                && row(chain + "..0")?["originalTransactionId"]?.stringValue == chain && row(chain + "..0")?["customerId"] == "u1")
        #expect(row(chain + "..1")?["price"] == 4_990 && row(chain + "..1")?["revocationDate"]?.stringValue == "2026-02-10T00:00:00Z",
                "\(row(chain + "..1") ?? .null)")
        let coinRow = rows.first { $0["productId"] == "coins_500" }
        #expect(coinRow?["price"] == 4_990 && coinRow?["currency"] == "USD" && coinRow?["customerId"] == "u2" && coinRow?["quantity"] == 1
                && coinRow?["bundleId"]?.stringValue == Play.package && coinRow?["revocationDate"] == .null, "\(coinRow ?? .null)")
        print("google play numbers: quarter revenue \(body["revenue"]?.jsonString ?? "-"); Jan MRR \(jan.mrr.first?.json.jsonString ?? "-")")
    }

    @Test func aPlaySubscriptionsTrialRenewalsAndRefundAreInRevenueAndMRRUnderGooglePlayOnSQLite() async throws {
        try await SimulatedKakin.with { k in try await Self.run(k) }
    }

    @Test(.postgreSQL)
    func aPlaySubscriptionsTrialRenewalsAndRefundAreInRevenueAndMRRUnderGooglePlayOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in
            try await SimulatedKakin.with(database: .postgresql(url: schema.url)) { k in try await Self.run(k) }
        }
    }
}
