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
            let key = RollupSums.Key(metric: k.metric, bundleId: k.bundleId, productId: k.productId, source: k.source, currency: k.currency)
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
        #expect(jan.mrr == [Overview.Money(currency: "JPY", amount: 817, bySource: ["appStore": 817])])  // 9,800 / 12
        #expect(jan.revenue == [Overview.Revenue(currency: "JPY", bySource: ["appStore": .init(gross: 10_780, refunded: 0, proceeds: 9_163)])])
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
        #expect(o.revenue == [Overview.Revenue(currency: "JPY", bySource: ["appStore": .init(gross: 1_580, refunded: 980, proceeds: 510)])],
                "sandbox not counted")
        #expect(o.refundCount == 1 && o.refundRate == 0.5 && o.churnedVoluntary == 1 && o.activeSubscriptions == 0)
        #expect(o.coinsSold == 500 && o.coinsSpent == 120 && o.coinsGrantedFree == 80 && o.coinsOutstandingPaid == 330)
    }

    // MARK: Every source

    static func web(_ id: String, day d: Int64, until: Int64?, price: Int64, subscription: String? = "sub_1", product: String = "m",
                    kind: ProductKind = .autoRenewable, refunds: [(Int64, Int64)] = []) -> ExternalPurchaseFact {
        ExternalPurchaseFact(source: "stripe", externalId: id, bundleId: "b", productId: product, kind: kind, price: price, currency: "JPY",
                             purchasedAtMs: jan1 + d * day, periodStartMs: until == nil ? nil : jan1 + d * day,
                             expiresAtMs: until.map { jan1 + $0 * day }, subscriptionId: subscription,
                             refunds: refunds.map { .init(amount: $0.0, atMs: jan1 + $0.1 * day) })
    }

    static func entitlement(_ standing: ExternalEntitlement.Standing, until: Int64, autoRenew: Bool = true) -> ExternalEntitlement {
        ExternalEntitlement(source: "stripe", id: "sub_1", productId: "m", kind: .autoRenewable, latestId: "sub_1@\(until)", purchasedAtMs: jan1,
                            expiresAtMs: jan1 + until * day, standing: standing, willAutoRenew: autoRenew)
    }

    @Test func anAppStoreAndAWebSubscriptionAreCountedEachUnderItsSource() throws {
        let facts = CustomerFacts(customerId: "c", transactions: [Self.tx("1", "m", day: 0, until: 31, price: 980_000, reason: "PURCHASE")],
                                  renewalInfos: [Self.renewal()],
                                  externalPurchases: [Self.web("in_1", day: 5, until: 36, price: 1_200), Self.web("in_2", day: 36, until: 67, price: 1_200)],
                                  externalEntitlements: [Self.entitlement(.active, until: 67)])
        let c = Contributions.of(facts, settings: Self.settings)
        let jan = try Self.overview(c, from: 0, to: 30)
        #expect(jan.activeSubscriptions == 2 && jan.newSubscriptions == 2 && jan.churnedVoluntary + jan.churnedBilling == 0)
        #expect(jan.mrr == [Overview.Money(currency: "JPY", amount: 2_180, bySource: ["appStore": 980, "stripe": 1_200])])
        // The App Store's proceeds after its 15 % commission; the provider's fee is not known: none deducted.
        #expect(jan.revenue == [Overview.Revenue(currency: "JPY", bySource: ["appStore": .init(gross: 980, refunded: 0, proceeds: 833),
                                                                             "stripe": .init(gross: 1_200, refunded: 0, proceeds: 1_200)])])
        #expect(jan.revenue.first?.gross == 2_180 && jan.revenue.first?.proceeds == 2_033)
        let web = try Self.overview(c, from: 0, to: 30, filter: MetricsFilter(source: "stripe"))
        #expect(web.activeSubscriptions == 1 && web.mrr.first?.bySource == ["stripe": 1_200] && web.revenue.first?.gross == 1_200)
        // February: the web subscription renewed on day 36; the App Store's was not renewed (no transaction yet).
        let feb = try Self.overview(c, from: 31, to: 58)
        #expect(feb.activeSubscriptions == 1 && feb.revenue.first?.bySource == ["stripe": .init(gross: 1_200, refunded: 0, proceeds: 1_200)])
        // Shares round-trip with their sources; one stored before sources (six fields) is the App Store's, coins none.
        #expect(Contribution(json: c.json) == c)
        let legacy = Contribution(json: #"[["gross","b","m","JPY",3,980],["coinsSold","","","",3,500]]"#)
        #expect(legacy?.cells.keys.map(\.source).sorted() == ["", "appStore"])
    }

    @Test func aWebSubscriptionsRetriesRefundsAndEnd() throws {
        let period = [Self.web("in_1", day: 0, until: 30, price: 1_000)]
        func overview(_ e: ExternalEntitlement, _ purchases: [ExternalPurchaseFact] = period, to: Int64 = 70) throws -> Overview {
            try Self.overview(Contributions.of(CustomerFacts(customerId: "c", externalPurchases: purchases, externalEntitlements: [e]),
                                               settings: Self.settings), from: 0, to: to)
        }
        // Past due: served while the provider retries (to the new period's end), without MRR; not churned yet.
        let retrying = try overview(Self.entitlement(.pastDue, until: 60), to: 45)
        #expect(retrying.activeSubscriptions == 1 && retrying.mrr.isEmpty && retrying.churnedBilling == 0)
        // Unpaid after the retries: access ended with the paid period, a billing churn.
        let unpaid = try overview(Self.entitlement(.pending, until: 60))
        #expect(unpaid.activeSubscriptions == 0 && unpaid.churnedBilling == 1)
        #expect(try Self.overview(Contributions.of(CustomerFacts(customerId: "c", externalPurchases: period,
                                                                 externalEntitlements: [Self.entitlement(.pending, until: 60)]),
                                                   settings: Self.settings), from: 30, to: 30).churnedBilling == 1, "dated when access ended")
        // Cancelled at the period's end: voluntary; a partial refund counts once, its amount on its day.
        let partial = [Self.web("in_1", day: 0, until: 30, price: 1_000, refunds: [(400, 10)])]
        let cancelled = try overview(Self.entitlement(.active, until: 30, autoRenew: false), partial)
        #expect(cancelled.churnedVoluntary == 1 && cancelled.refundCount == 1)
        #expect(cancelled.revenue.first?.bySource["stripe"] == .init(gross: 1_000, refunded: 400, proceeds: 600))
        // Refunded in full: access ends on the refund's day.
        let refunded = [Self.web("in_1", day: 0, until: 30, price: 1_000, refunds: [(400, 10), (600, 12)])]
        let r = try overview(Self.entitlement(.active, until: 30), refunded, to: 12)
        #expect(r.activeSubscriptions == 0 && r.churnedVoluntary == 1 && r.refundCount == 1 && r.revenue.first?.refunded == 1_000)
        // A web coin pack is revenue of its source, and no subscription.
        let coins = try overview(Self.entitlement(.ended, until: 0), [Self.web("pi_1", day: 3, until: nil, price: 600, subscription: nil,
                                                                             product: "coins", kind: .consumable)])
        #expect(coins.revenue.first?.bySource == ["stripe": .init(gross: 600, refunded: 0, proceeds: 600)] && coins.newSubscriptions == 0)
    }
}
