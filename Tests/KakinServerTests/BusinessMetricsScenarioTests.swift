import Foundation
import KakinCore
import KakinMetrics
import KakinService
import KakinTestPostgres
@testable import KakinServer
import Testing

/// Issue 18's done-when scenario: three simulated months in local mode (the App Store simulator in-process, the demo
/// app: JPY, days of Asia/Tokyo). Every number of the overview and of each monthly series is checked against values
/// worked out by hand below, then `rebuild` (what `kakin report rebuild` runs) must find the incremental rollups equal
/// to what the facts say.
///
/// Every action happens at 00:00 UTC = 09:00 in Tokyo, so each fact's Tokyo date is its UTC date. The customers:
/// - A: premium.monthly, free week (Jan 1–8), converts; pays 980 on Jan 8, Feb 8, Mar 8. Active at the end.
/// - B: premium.monthly, free week, turns auto-renew off Jan 3: trial not converted, voluntary churn Jan 8.
/// - C: premium.plus.monthly (1480) Jan 1, auto-renew off Jan 10: voluntary churn Feb 1.
/// - D: premium.plus.monthly Jan 1, renewal fails Feb 1 (16-day grace), recovers Feb 5 in grace (the period starts
///   Feb 1, no gap); pays Jan 1, Feb 1, Mar 1. Active throughout.
/// - E: premium.monthly, free week, the renewal at its end fails (Jan 8): grace, then billing retry gives up Mar 9
///   (EXPIRED, billing): trial not converted, billing churn on Jan 8 (the day access ended; the grace period is no
///   longer in Apple's renewal info once it is over).
/// - F: premium.plus.monthly Jan 1, renewal fails Feb 1, grace ends Feb 17, recovers Feb 20 (new period Feb 20, a gap,
///   no churn); pays Jan 1, Feb 20, Mar 20.
/// - G: premium.monthly, free week, converts Jan 8 (980), upgrades to premium.plus.monthly Jan 20 (1480; then Feb 20,
///   Mar 20).
/// - H: premium.plus.monthly Jan 1, refunded Jan 15: 1480 refunded, voluntary churn Jan 15.
/// - I: coins.500 (600 JPY: 500 paid + 50 bonus) Jan 2; spends 120 Jan 5 (free first: 50 free + 70 paid); granted 30
///   free coins Feb 1.
/// - J: coins.100 (120 JPY) Mar 10.
@Suite struct BusinessMetricsScenario {
    static let day: Int64 = 86_400_000

    struct Expected {
        var active: Int64, trials: Int64, new: Int64, trialsStarted: Int64, converted: Int64, trialRate: Double
        var voluntary: Int64, billing: Int64, churnRate: Double, mrr: Int64, gross: Int64, refunded: Int64, proceeds: Int64
        var refunds: Int64, refundRate: Double, sold: Int64, spent: Int64, grantedFree: Int64, outstanding: Int64

        func check(_ o: Overview, _ label: String) {
            #expect(o.activeSubscriptions == active, "\(label) activeSubscriptions")
            #expect(o.activeTrials == trials, "\(label) activeTrials")
            #expect(o.newSubscriptions == new, "\(label) newSubscriptions")
            #expect(o.trialsStarted == trialsStarted && o.trialsConverted == converted && o.trialConversionRate == trialRate,
                    "\(label) trialConversions \(o.trialsStarted) \(o.trialsConverted) \(o.trialConversionRate)")
            #expect(o.churnedVoluntary == voluntary && o.churnedBilling == billing && o.churnRate == churnRate,
                    "\(label) churned \(o.churnedVoluntary) \(o.churnedBilling) \(o.churnRate)")
            #expect(o.mrr == (mrr == 0 ? [] : [Overview.Money(currency: "JPY", amount: mrr, bySource: ["appStore": mrr])]), "\(label) mrr \(o.mrr)")
            #expect(o.revenue == (gross == 0 ? [] : [Overview.Revenue(currency: "JPY", bySource: [
                "appStore": .init(gross: gross, refunded: refunded, proceeds: proceeds)])]), "\(label) revenue \(o.revenue)")
            #expect(o.refundCount == refunds && o.refundRate == refundRate, "\(label) refunds \(o.refundCount) \(o.refundRate)")
            #expect(o.coinsSold == sold && o.coinsSpent == spent && o.coinsGrantedFree == grantedFree && o.coinsOutstandingPaid == outstanding,
                    "\(label) coins \(o.coinsSold) \(o.coinsSpent) \(o.coinsGrantedFree) \(o.coinsOutstandingPaid)")
        }

        /// The overview's JSON for this bucket, as the series points carry it (rates as worked out by hand).
        func value(_ name: String) -> JSONValue {
            switch name {
            case "activeSubscriptions": return .int(active)
            case "activeTrials": return .int(trials)
            case "newSubscriptions": return .int(new)
            case "trialConversions": return ["started": .int(trialsStarted), "converted": .int(converted), "rate": .double(trialRate)]
            case "churned": return ["voluntary": .int(voluntary), "billing": .int(billing), "rate": .double(churnRate)]
            case "mrr": return .array(mrr == 0 ? [] : [["currency": "JPY", "amount": .int(mrr), "bySource": ["appStore": .int(mrr)]]])
            case "revenue":
                let amounts: JSONValue = ["gross": .int(gross), "refunded": .int(refunded), "proceeds": .int(proceeds)]
                return .array(gross == 0 ? [] : [["currency": "JPY", "gross": .int(gross), "refunded": .int(refunded), "proceeds": .int(proceeds),
                                                  "bySource": ["appStore": amounts]]])
            case "refunds": return ["count": .int(refunds), "rate": .double(refundRate)]
            default:
                return ["sold": .int(sold), "spent": .int(spent), "grantedFree": .int(grantedFree), "outstandingPaid": .int(outstanding)]
            }
        }
    }

    // Worked out by hand from the story above (see each customer).
    static let quarter = Expected(active: 4, trials: 0, new: 8, trialsStarted: 4, converted: 2, trialRate: 0.5,
                                  voluntary: 3, billing: 1, churnRate: 0.5, mrr: 980 + 1480 * 3,
                                  gross: 980 * 3 + 1480 + 1480 * 3 + 1480 * 3 + (980 + 1480 * 3) + 1480 + 600 + 120, refunded: 1480,
                                  proceeds: 13_608, refunds: 1, refundRate: 0.0588, sold: 600, spent: 120, grantedFree: 80, outstanding: 530)
    static let months = [
        // Jan: active at Jan 31 A C D F G; churn B, H voluntary, E billing over 8 new; paid: A, C, D, F, G×2, H, I.
        Expected(active: 5, trials: 0, new: 8, trialsStarted: 4, converted: 2, trialRate: 0.5, voluntary: 2, billing: 1, churnRate: 0.375,
                 mrr: 980 + 1480 * 4, gross: 9_960, refunded: 1480, proceeds: 5_936, refunds: 1, refundRate: 0.125,
                 sold: 500, spent: 120, grantedFree: 50, outstanding: 430),
        // Feb: active at Feb 28 A D F G; C churns Feb 1 out of 5 at the start; paid: A, D, F, G.
        Expected(active: 4, trials: 0, new: 0, trialsStarted: 0, converted: 0, trialRate: 0, voluntary: 1, billing: 0, churnRate: 0.2,
                 mrr: 5_420, gross: 5_420, refunded: 0, proceeds: 3_794, refunds: 0, refundRate: 0,
                 sold: 0, spent: 0, grantedFree: 30, outstanding: 430),
        // Mar: paid A, D, F, G and J's coins.
        Expected(active: 4, trials: 0, new: 0, trialsStarted: 0, converted: 0, trialRate: 0, voluntary: 0, billing: 0, churnRate: 0,
                 mrr: 5_420, gross: 5_540, refunded: 0, proceeds: 3_878, refunds: 0, refundRate: 0,
                 sold: 100, spent: 0, grantedFree: 0, outstanding: 530),
    ]

    @Test func threeSimulatedMonthsGiveTheHandComputedNumbersAndRebuildMatches() async throws {
        try await Self.run(database: nil)
    }

    /// The same months on PostgreSQL (when the test run has a cluster): the same numbers from the other engine.
    @Test(.postgreSQL) func theSameMonthsOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in try await Self.run(database: .postgresql(url: schema.url)) }
    }

    static func run(database: Configuration.Database?) async throws {
        try await SimulatedKakin.with(gracePeriodDays: 16, database: database) { k in
            let start = SimulatedKakin.start2026
            let numbers = k.app.services.businessMetrics
            // The rollups are kept up as the months pass (each customer recomputed as its facts change).
            func at(_ dayOfYear: Int64) async throws {
                try await k.advance(to: start + (dayOfYear - 1) * Self.day)
                try await numbers.catchUp()
            }
            func ot(_ r: JSONValue) -> String { r["originalTransactionId"]!.stringValue! }

            // Jan 1
            let a = ot(try await k.buy("A", "premium.monthly"))
            let b = ot(try await k.buy("B", "premium.monthly"))
            let c = ot(try await k.buy("C", "premium.plus.monthly"))
            let d = ot(try await k.buy("D", "premium.plus.monthly"))
            let e = ot(try await k.buy("E", "premium.monthly"))
            let f = ot(try await k.buy("F", "premium.plus.monthly"))
            let g = ot(try await k.buy("G", "premium.monthly"))
            let h = ot(try await k.buy("H", "premium.plus.monthly"))
            _ = a
            for x in [d, e, f] { try await k.action(x, "failBilling") }
            try await at(2)
            try await k.buy("I", "coins.500")
            try await at(3)
            try await k.action(b, "disableAutoRenew")
            try await at(5)
            let spend = await k.kakin("POST", "/v1/customers/I/wallet/spend", ["amount": 120, "item": "stamp"], headers: [("Idempotency-Key", "s1")])
            #expect(spend.status == 201 || spend.status == 200, "\(spend.json)")
            try await at(10)
            try await k.action(c, "disableAutoRenew")
            try await at(15)
            try await k.action(h, "refund")
            try await at(20)
            try await k.action(g, "changeProduct", ["productId": "premium.plus.monthly"])
            try await at(32)  // Feb 1
            let grant = await k.kakin("POST", "/v1/customers/I/wallet/grants", ["amount": 30, "reason": "welcome"], headers: [("Idempotency-Key", "g1")])
            #expect(grant.status == 201 || grant.status == 200, "\(grant.json)")
            try await at(36)  // Feb 5, in D's grace
            try await k.action(d, "recoverBilling")
            try await at(51)  // Feb 20, F's grace over (Feb 17)
            try await k.action(f, "recoverBilling")
            try await at(69)  // Mar 10
            try await k.buy("J", "coins.100")
            try await k.advance(to: start + 89 * Self.day + Self.day / 2)  // Mar 31, 12:00 UTC

            try await numbers.catchUp()

            let overview = try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter())
            #expect(overview.timeZone == "Asia/Tokyo")
            Self.quarter.check(overview, "quarter")

            // Each number's monthly series: each point is the month's overview.
            for name in Overview.names {
                let series = try await numbers.series(name: name, interval: .month, from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter())
                let points = series["points"]?.arrayValue ?? []
                #expect(points.map { $0["start"]?.stringValue } == ["2026-01-01", "2026-02-01", "2026-03-01"], "\(name)")
                for (i, month) in Self.months.enumerated() where i < points.count {
                    #expect(points[i]["value"] == month.value(name), "\(name) month \(i + 1): \(points[i]["value"]?.jsonString ?? "-")")
                }
            }
            for (i, month) in Self.months.enumerated() {
                let bounds = [("2026-01-01", "2026-01-31"), ("2026-02-01", "2026-02-28"), ("2026-03-01", "2026-03-31")][i]
                month.check(try await numbers.overview(from: bounds.0, to: bounds.1, filter: MetricsFilter()), "month \(i + 1)")
            }

            // Days: the trials end on Jan 8 (A, G convert; B lapses; E's renewal fails).
            let daily = try await numbers.series(name: "activeTrials", interval: .day, from: "2026-01-07", to: "2026-01-08", filter: MetricsFilter())
            #expect(daily["points"]?.arrayValue?.map { $0["value"] } == [.int(4), .int(0)])
            let activeDaily = try await numbers.series(name: "activeSubscriptions", interval: .day, from: "2026-01-07", to: "2026-01-08", filter: MetricsFilter())
            #expect(activeDaily["points"]?.arrayValue?.map { $0["value"] } == [.int(8), .int(6)])

            // Per product: at Jan 31, A on premium.monthly; C, D, F and G (upgraded Jan 20) on premium.plus.monthly.
            let monthly = try await numbers.overview(from: "2026-01-01", to: "2026-01-31", filter: MetricsFilter(productId: "premium.monthly"))
            let plus = try await numbers.overview(from: "2026-01-01", to: "2026-01-31", filter: MetricsFilter(productId: "premium.plus.monthly"))
            #expect(monthly.activeSubscriptions == 1 && plus.activeSubscriptions == 4)
            #expect(monthly.newSubscriptions == 4 && plus.newSubscriptions == 4)
            #expect(monthly.revenue.first?.gross == 980 * 2 && plus.revenue.first?.gross == 1480 * 5)

            // The API answers the same figures (the desk's session or an admin key; local mode has no auth).
            let viaHTTP = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/overview", [("from", "2026-01-01"), ("to", "2026-03-31")]))
            #expect(viaHTTP.status == 200)
            #expect((try? JSONParser.parse(viaHTTP.body)) == overview.json)
            let bad = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/overview", [("from", "2026-03-31"), ("to", "2026-01-01")]))
            #expect(bad.status == 400)
            let unknown = await k.app.handle(HTTPRequestFactory.get("/v1/admin/metrics/nope", [("from", "2026-01-01"), ("to", "2026-01-02")]))
            #expect(unknown.status == 404)

            // The business gauges beside the ops metrics: today (Mar 31) A on premium.monthly, D, F, G on premium.plus.monthly.
            let scrape = String(decoding: await k.app.handle(HTTPRequestFactory.get("/metrics", [])).body, as: UTF8.self)
            #expect(scrape.contains("kakin_business_active_subscriptions{bundle_id=\"dev.kakin.demo\",product_id=\"premium.monthly\"} 1\n"))
            #expect(scrape.contains("kakin_business_active_subscriptions{bundle_id=\"dev.kakin.demo\",product_id=\"premium.plus.monthly\"} 3\n"))
            #expect(scrape.contains("kakin_business_active_trials{bundle_id=\"dev.kakin.demo\"} 0\n"))
            #expect(scrape.contains("kakin_business_outstanding_paid_coins 530\n"))

            // `kakin report rebuild` itself on the same database (SQLite: a second connection; local mode's settings): the
            // incremental rollups are what the facts say.
            if database == nil {
                let out = k.directory.appendingPathComponent("rebuild.json").path, err = k.directory.appendingPathComponent("rebuild.err").path
                let fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0o644), efd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
                let status = await ReportCommand.run(arguments: ["rebuild", "--database", "sqlite:" + k.directory.appendingPathComponent("kakin.db").path],
                                                     output: fd, errorOutput: efd)
                close(fd)
                close(efd)
                let printed = try String(contentsOfFile: out, encoding: .utf8)
                print("kakin report rebuild (on the scenario's database) exit \(status): \(printed.replacingOccurrences(of: "\n", with: " "))")
                #expect(status == 0, "\((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
                let answer = try JSONParser.parse(Array(printed.utf8))
                #expect(answer["differing"] == .int(0) && answer["customers"] == .int(10))
            }

            // Rebuild from the facts: the incremental rollups were exactly right, and nothing changes.
            let rebuilt = try await numbers.rebuild()
            #expect(rebuilt.differing == 0, "\(rebuilt.sample)")
            #expect(rebuilt.customers >= 10 && rebuilt.cells > 0)
            #expect(try await numbers.overview(from: "2026-01-01", to: "2026-03-31", filter: MetricsFilter()) == overview)
            print("business numbers scenario: rebuild recomputed \(rebuilt.customers) customers, \(rebuilt.cells) rollup cells, \(rebuilt.differing) differing")

        }
    }
}

import HTTPServer

enum HTTPRequestFactory {
    static func get(_ path: String, _ query: [(String, String)]) -> HTTPRequest {
        HTTPRequest(method: "GET", path: path, rawPath: path, queryItems: query.map { (name: $0.0, value: $0.1) }, headers: HTTPHeaders(),
                    body: [], requestId: "test", remoteAddress: nil)
    }
}
