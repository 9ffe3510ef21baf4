import KakinCore
import KakinMetrics
import Testing

/// The pure rules of `docs/metrics.md` on small hand-made histories.
@Suite struct ContributionsTests {
    static let day: Int64 = 86_400_000
    static let jan1 = CivilDay.parse("2026-01-01")! * day  // 00:00 UTC
    static let app = AppMetricsSettings(bundleId: "b", calendar: FixedOffsetCalendar(), commissionRate: 0.15, environments: [.production],
                                        periods: ["m": ISOPeriod(months: 1), "y": ISOPeriod(years: 1)])
    static let settings = MetricsSettings(apps: [app], exchangeRates: ExchangeRates(base: "USD", rates: ["JPY": 0.01]))

    static func tx(_ id: String, _ product: String, day d: Int64, until: Int64?, price: Int64, original: String = "o1",
                   reason: String = "RENEWAL", trial: Bool = false, revokedDay: Int64? = nil, env: String = "Production",
                   type: String = "Auto-Renewable Subscription", signed: Int64 = 0) -> TransactionPayload {
        var o: [String: JSONValue] = [
            "transactionId": .string(id), "originalTransactionId": .string(original), "bundleId": "b", "productId": .string(product),
            "purchaseDate": .int(jan1 + d * day), "type": .string(type), "signedDate": .int(jan1 + signed * day),
            "environment": .string(env), "price": .int(price), "currency": "JPY", "transactionReason": .string(reason),
        ]
        if let until { o["expiresDate"] = .int(jan1 + until * day) }
        if trial { o["offerType"] = 1; o["offerDiscountType"] = "FREE_TRIAL" }
        if let r = revokedDay { o["revocationDate"] = .int(jan1 + r * day) }
        return try! TransactionPayload(json: .object(o))
    }

    static func renewal(_ original: String = "o1", autoRenew: Int = 1, intent: Int? = nil, retry: Bool = false) -> RenewalInfoPayload {
        var o: [String: JSONValue] = ["originalTransactionId": .string(original), "productId": "m", "autoRenewStatus": .int(Int64(autoRenew)),
                                      "signedDate": .int(jan1), "environment": "Production", "isInBillingRetryPeriod": .bool(retry)]
        if let intent { o["expirationIntent"] = .int(Int64(intent)) }
        return try! RenewalInfoPayload(json: .object(o))
    }

    static func overview(_ c: Contribution, from: Int64, to: Int64, filter: MetricsFilter = MetricsFilter()) throws -> Overview {
        var before = RollupSums(), end = RollupSums(), flows = RollupSums()
        let a = CivilDay.parse("2026-01-01")! + from, b = CivilDay.parse("2026-01-01")! + to
        for (k, v) in c.cells {
            let key = RollupSums.Key(metric: k.metric, bundleId: k.bundleId, productId: k.productId, currency: k.currency)
            if Metric(rawValue: k.metric)!.isLevel {
                if k.day < a { before.add(key, v) }
                if k.day <= b { end.add(key, v) }
            } else if (a...b).contains(k.day) {
                flows.add(key, v)
            }
        }
        return try OverviewBuilder.build(OverviewInputs(levelsBefore: before, levelsAtEnd: end, flows: flows), fromDay: a, toDay: b,
                                         filter: filter, settings: settings)
    }

    @Test func aShareDependsOnTheFactsNotTheirOrderOrCopies() {
        let list = [Self.tx("1", "m", day: 0, until: 7, price: 0, reason: "PURCHASE", trial: true),
                    Self.tx("2", "m", day: 7, until: 38, price: 980_000), Self.tx("3", "m", day: 38, until: 66, price: 980_000)]
        let a = Contributions.of(CustomerFacts(customerId: "c", transactions: list, renewalInfos: [Self.renewal()]), settings: Self.settings)
        let b = Contributions.of(CustomerFacts(customerId: "c", transactions: list.reversed() + [list[1]], renewalInfos: [Self.renewal()]),
                                 settings: Self.settings)
        #expect(a == b)
        #expect(Contribution(json: a.json) == a)
        #expect(a.minus(a).isEmpty)
    }

    @Test func aTrialThatConvertsThenCancelsAndAnUpgrade() throws {
        let facts = CustomerFacts(customerId: "c", transactions: [
            Self.tx("1", "m", day: 0, until: 7, price: 0, reason: "PURCHASE", trial: true),
            Self.tx("2", "m", day: 7, until: 38, price: 980_000),
            Self.tx("3", "y", day: 20, until: 385, price: 9_800_000, reason: "PURCHASE"),  // upgrade: ends "2" on day 20
        ], renewalInfos: [Self.renewal(autoRenew: 0)])
        let c = Contributions.of(facts, settings: Self.settings)
        let jan = try Self.overview(c, from: 0, to: 30)
        #expect(jan.activeSubscriptions == 1 && jan.newSubscriptions == 1 && jan.trialsStarted == 1 && jan.trialsConverted == 1)
        #expect(jan.mrr == [Overview.Money(currency: "JPY", amount: 817)])  // 9,800 / 12
        #expect(jan.revenue == [Overview.Revenue(currency: "JPY", gross: 10_780, refunded: 0, proceeds: 9_163)])
        #expect(jan.churnedVoluntary == 0)
        // Auto-renew off: the churn is on the day access ends, a year later.
        let year = try Self.overview(c, from: 0, to: 400)
        #expect(year.churnedVoluntary == 1 && year.activeSubscriptions == 0)
        // By product: the monthly plan until the upgrade, the yearly after it.
        #expect(try Self.overview(c, from: 19, to: 19, filter: MetricsFilter(productId: "m")).activeSubscriptions == 1)
        #expect(try Self.overview(c, from: 20, to: 20, filter: MetricsFilter(productId: "m")).activeSubscriptions == 0)
        #expect(try Self.overview(c, from: 20, to: 20, filter: MetricsFilter(productId: "y")).activeSubscriptions == 1)
        // A reporting currency with the configured table: 10,780 JPY at 0.01 USD = 107.80 USD.
        let usd = try Self.overview(c, from: 0, to: 30, filter: MetricsFilter(currency: "USD"))
        #expect(usd.revenue.first?.gross == 10_780 && usd.revenue.first?.currency == "USD")
        #expect(throws: MetricsQueryError.noExchangeRate("EUR")) { try Self.overview(c, from: 0, to: 30, filter: MetricsFilter(currency: "EUR")) }
    }

    @Test func billingRetryIsNotActiveAndChurnsOnlyWhenRetryGivesUp() throws {
        let list = [Self.tx("1", "m", day: 0, until: 31, price: 980_000, reason: "PURCHASE")]
        let inRetry = Contributions.of(CustomerFacts(customerId: "c", transactions: list, renewalInfos: [Self.renewal(intent: 2, retry: true)]),
                                       settings: Self.settings)
        let o = try Self.overview(inRetry, from: 0, to: 50)
        #expect(o.activeSubscriptions == 0 && o.churnedBilling == 0)
        let gaveUp = Contributions.of(CustomerFacts(customerId: "c", transactions: list, renewalInfos: [Self.renewal(autoRenew: 0, intent: 2)]),
                                      settings: Self.settings)
        let p = try Self.overview(gaveUp, from: 0, to: 50)
        #expect(p.churnedBilling == 1 && p.churnedVoluntary == 0)
        #expect(try Self.overview(gaveUp, from: 31, to: 31).churnedBilling == 1, "dated on the day access ended")
        // Recovered after a gap (a renewal): no churn, no new subscription.
        let recovered = Contributions.of(CustomerFacts(customerId: "c", transactions: list + [Self.tx("2", "m", day: 40, until: 71, price: 980_000)],
                                                       renewalInfos: [Self.renewal()]), settings: Self.settings)
        let r = try Self.overview(recovered, from: 0, to: 50)
        #expect(r.newSubscriptions == 1 && r.churnedBilling + r.churnedVoluntary == 0 && r.activeSubscriptions == 1)
    }

    @Test func refundsSandboxAndCoins() throws {
        let facts = CustomerFacts(customerId: "c", transactions: [
            Self.tx("1", "m", day: 0, until: 31, price: 980_000, reason: "PURCHASE", revokedDay: 10),
            Self.tx("2", "m", day: 0, until: 31, price: 980_000, original: "o2", reason: "PURCHASE", env: "Sandbox"),
            Self.tx("3", "coins", day: 2, until: nil, price: 600_000, original: "3", type: "Consumable"),
        ], renewalInfos: [], ledger: [
            LedgerFact(kind: "purchase", paidDelta: 500, freeDelta: 50, atMs: Self.jan1 + 2 * Self.day),
            LedgerFact(kind: "spend", paidDelta: -70, freeDelta: -50, atMs: Self.jan1 + 3 * Self.day),
            LedgerFact(kind: "refund", paidDelta: -100, freeDelta: 0, atMs: Self.jan1 + 4 * Self.day),
            LedgerFact(kind: "grant", paidDelta: 0, freeDelta: 30, atMs: Self.jan1 + 5 * Self.day),
        ])
        let o = try Self.overview(Contributions.of(facts, settings: Self.settings), from: 0, to: 30)
        #expect(o.revenue == [Overview.Revenue(currency: "JPY", gross: 1_580, refunded: 980, proceeds: 510)], "sandbox not counted")
        #expect(o.refundCount == 1 && o.refundRate == 0.5 && o.churnedVoluntary == 1 && o.activeSubscriptions == 0)
        #expect(o.coinsSold == 500 && o.coinsSpent == 120 && o.coinsGrantedFree == 80 && o.coinsOutstandingPaid == 330)
    }
}
