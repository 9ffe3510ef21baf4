import KakinCore
import KakinMetrics
import Testing
@testable import KakinOfferings

@Suite struct Statistics {
    /// Reference values from SciPy 1.17 (`beta.ppf`, and P(B > A) by numerical integration of pdf_B · cdf_A).
    @Test func rateIntervalsAndProbabilitiesMatchAReferenceImplementation() {
        for (x, n, low, high) in [(10, 100, 0.055637223835302965, 0.17455282607711903), (0, 50, 0.000496304407737771, 0.06977703074953864),
                                  (160, 2000, 0.06891345710306823, 0.09271947402578973)] {
            let i = ExperimentStatistics.rateInterval(successes: x, trials: n)
            #expect(abs(i.low - low) < 1e-9 && abs(i.high - high) < 1e-9, "\(x)/\(n): \(i)")
        }
        for (b, a, p) in [((240, 2000), (160, 2000), 0.9999879800173221), ((12, 100), (10, 100), 0.6707204652120801),
                          ((3, 40), (5, 40), 0.24103055875207768), ((0, 10), (0, 10), 0.5)] {
            let got = ExperimentStatistics.probabilityAbove((b.0, b.1), (a.0, a.1))
            #expect(abs(got - p) < 1e-7, "\(b) vs \(a): \(got)")
            #expect(abs(ExperimentStatistics.probabilityAbove((a.0, a.1), (b.0, b.1)) - (1 - p)) < 1e-7)
        }
        // Past the exact sum's bound the normal approximation answers, close to the exact value.
        let big = ExperimentStatistics.probabilityAbove((60_500, 500_000), (60_000, 500_000))
        #expect(big > 0.9 && big < 0.95, "\(big)")
    }

    @Test func aMeanHasANormalIntervalAndEqualMeansAreAToss() {
        // Values 0, 0, 10, 10: mean 5, sample sd 5.7735, se 2.88675.
        let m = ExperimentStatistics.Mean(n: 4, sum: 20, sumOfSquares: 200)
        #expect(abs(m.mean - 5) < 1e-12 && abs(m.standardError - 2.886751345948129) < 1e-12)
        #expect(abs(m.interval.low - (5 - 1.959963984540054 * 2.886751345948129)) < 1e-9)
        #expect(ExperimentStatistics.probabilityAbove(m, m) == 0.5)
        let flat = ExperimentStatistics.Mean(n: 3, sum: 0, sumOfSquares: 0)
        #expect(ExperimentStatistics.probabilityAbove(m, flat) > 0.95 && ExperimentStatistics.probabilityAbove(flat, flat) == 0.5)
    }
}

@Suite struct Results {
    static let enrolled: Int64 = 1_000_000

    func fact(_ chain: String, at: Int64, amount: Int64, trial: Bool = false, renewal: Bool = false, refunded: Int64? = nil,
              monthly: Int64 = 0, end: Int64? = nil) -> RevenueFact {
        RevenueFact(source: "appStore", chainId: chain, productId: "p", purchasedAtMs: at, currency: amount > 0 ? "USD" : "", amount: amount,
                    trial: trial, renewal: renewal, refundedAmount: refunded ?? 0, refunded: refunded != nil, monthlyAmount: monthly, accessEndMs: end)
    }

    @Test func onlyPurchaseChainsStartedAfterEnrollmentCountForTheVariant() {
        let now = Self.enrolled + 100_000
        let facts = [
            fact("old-sub", at: Self.enrolled - 10, amount: 999, monthly: 999, end: now + 10),                  // before: not attributed
            fact("old-sub", at: Self.enrolled + 10, amount: 999, renewal: true, monthly: 999, end: now + 10),  // its renewal neither
            fact("trial", at: Self.enrolled, amount: 0, trial: true, end: Self.enrolled + 50),
            fact("trial", at: Self.enrolled + 50, amount: 499, renewal: true, monthly: 499, end: now + 1_000),
            fact("coins", at: Self.enrolled + 70, amount: 300, refunded: 300),
        ]
        let o = CustomerOutcome.of(facts, enrolledAtMs: Self.enrolled, nowMs: now)
        #expect(o.trialStarted && o.trialConverted && o.paid && o.refunded)
        #expect(o.revenue == ["USD": 499])  // 499 + 300 − 300 refunded
        #expect(o.mrr == ["USD": 499])
        let none = CustomerOutcome.of(Array(facts.prefix(2)), enrolledAtMs: Self.enrolled, nowMs: now)
        #expect(none == CustomerOutcome())
    }

    @Test func theAppStoresFactsAndOutsidePurchasesBecomeOneShape() {
        let external = RevenueFact.external([
            .init(source: "stripe", externalId: "in_2", bundleId: "app", productId: "premium.monthly", kind: .autoRenewable, price: 980, currency: "JPY",
                  purchasedAtMs: 2_000, periodStartMs: 2_000, expiresAtMs: 2_000 + 30 * 86_400_000, subscriptionId: "sub_1"),
            .init(source: "stripe", externalId: "in_1", bundleId: "app", productId: "premium.monthly", kind: .autoRenewable, price: 0, currency: "JPY",
                  purchasedAtMs: 1_000, periodStartMs: 1_000, expiresAtMs: 2_000, subscriptionId: "sub_1"),
            .init(source: "web", externalId: "w1", bundleId: "app", productId: "coins.500", kind: .consumable, price: 500, currency: "JPY",
                  purchasedAtMs: 3_000, refunds: [.init(amount: 150, atMs: 3_500), .init(amount: 50, atMs: 4_000)]),
        ])
        #expect(external.map(\.trial) == [true, false, false] && external.map(\.renewal) == [false, true, false])
        #expect(external[1].chainId == external[0].chainId && external[1].monthlyAmount > 950 && external[1].monthlyAmount < 1_000)
        #expect(external[2].refundedAmount == 200 && external[2].refunded && external[2].accessEndMs == nil)
        let o = CustomerOutcome.of(external, enrolledAtMs: 0, nowMs: 5_000)
        #expect(o.trialConverted && o.revenue == ["JPY": 980 + 300] && o.mrr["JPY"] == external[1].monthlyAmount)
    }

    static let experiment = Experiment(id: "e", placement: "onboarding",
                                       variants: [ExperimentVariant(id: "a", offering: "standard", weight: 1), ExperimentVariant(id: "b", offering: "annual", weight: 1)],
                                       enrollmentPercent: 100, startsAtMs: 0)

    /// A simulated experiment at the level of the results: 4,000 customers split by the real assignment, each buying with
    /// its variant's true conversion rate (a seeded draw). B at 12 % against A at 8 % must be seen as better (above 0.95);
    /// with equal rates, "better" above 0.95 must stay rare (at most 1 of 20 seeds). `kakin simulate --experiment` runs the
    /// same through the whole system.
    func simulated(seed: UInt64, rates: [String: Double], customers: Int = 4_000) -> JSONValue {
        var rng = SeededRandom(seed: seed)
        var tallies: [String: VariantTally] = [:]
        for i in 0..<customers {
            let variant = ExperimentAssignment.variant(for: "s\(seed)-c\(i)", in: Self.experiment)!
            var o = CustomerOutcome()
            if Double(rng.next() >> 11) / Double(UInt64(1) << 53) < rates[variant.id]! {
                o = CustomerOutcome.of([fact("c\(i)", at: 10, amount: 1_200)], enrolledAtMs: 0, nowMs: 100)
            }
            tallies[variant.id, default: VariantTally()].add(o)
        }
        return ExperimentResults.json(Self.experiment, tallies: tallies, nowMs: 100, complete: true)
    }

    @Test func aBetterVariantIsFoundAndEqualOnesRarelyLookBetter() {
        let better = simulated(seed: 1, rates: ["a": 0.08, "b": 0.12])
        let b = better["variants"]?.arrayValue?[1]
        #expect((b?["probabilityToBeatControl"]?.doubleValue ?? 0) > 0.95, "\(better)")
        #expect(better["variants"]?.arrayValue?[0]["probabilityToBeatControl"] == .null)
        #expect((b?["revenuePerCustomer"]?.arrayValue?.first?["probabilityToBeatControl"]?.doubleValue ?? 0) > 0.95)

        var falseWins: [UInt64] = []
        for seed in UInt64(1)...20 {
            let equal = simulated(seed: seed, rates: ["a": 0.10, "b": 0.10])
            if (equal["variants"]?.arrayValue?[1]["probabilityToBeatControl"]?.doubleValue ?? 0) > 0.95 { falseWins.append(seed) }
        }
        #expect(falseWins.count <= 1, "equal rates judged better for seeds \(falseWins)")
    }

    @Test func theAnswerHasEveryVariantWithCountsIntervalsAndTheControlFirst() {
        var a = VariantTally(), b = VariantTally()
        for i in 0..<10 { a.add(i < 2 ? CustomerOutcome.of([fact("x", at: 1, amount: 500)], enrolledAtMs: 0, nowMs: 2) : CustomerOutcome()) }
        for i in 0..<10 { b.add(i < 5 ? CustomerOutcome.of([fact("x", at: 1, amount: 500, refunded: 100)], enrolledAtMs: 0, nowMs: 2) : CustomerOutcome()) }
        let json = ExperimentResults.json(Self.experiment, tallies: ["a": a, "b": b], nowMs: 2, complete: true)
        let variants = json["variants"]?.arrayValue ?? []
        #expect(variants.map { $0["id"]?.stringValue } == ["a", "b"] && json["control"] == "a" && json["state"] == "running")
        #expect(variants[1]["enrolled"] == 10 && variants[1]["paidConversions"] == 5 && variants[1]["refunds"] == 5)
        let revenue = variants[1]["revenuePerCustomer"]?.arrayValue?.first
        #expect(revenue?["currency"] == "USD" && revenue?["amount"]?.doubleValue == 200)  // 5 × 400 net over 10 enrolled
        let rate = variants[1]["rates"]?["paidConversions"]
        #expect(rate?["rate"]?.doubleValue == 0.5 && (rate?["low"]?.doubleValue ?? 1) < 0.5 && (rate?["high"]?.doubleValue ?? 0) > 0.5)
        // Fewer refunds beat the control: b refunds more, so its refunds are unlikely to beat a's.
        #expect((variants[1]["rates"]?["refunds"]?["probabilityToBeatControl"]?.doubleValue ?? 1) < 0.1)
    }
}
