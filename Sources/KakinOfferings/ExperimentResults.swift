import KakinCore
import KakinMetrics

/// What one enrolled customer did after enrolling, from the purchase facts of every store (`RevenueFact`).
///
/// Attribution: a purchase chain (a subscription instance with its renewals, or a one-off purchase) that started at or
/// after the enrollment belongs to the variant, with everything that happens to it later (renewals, refunds); a chain
/// that started before does not (a subscriber renewing is not a conversion the paywall made).
public struct CustomerOutcome: Sendable, Hashable {
    public var trialStarted = false
    /// A trial whose next payment was a paid renewal.
    public var trialConverted = false
    /// Any payment (amount > 0).
    public var paid = false
    /// Any refund.
    public var refunded = false
    /// Revenue net of refunds, per currency (minor units).
    public var revenue: [String: Int64] = [:]
    /// MRR now, per currency (minor units): the periods in force at `nowMs`.
    public var mrr: [String: Int64] = [:]

    public init() {}

    public static func of(_ facts: [RevenueFact], enrolledAtMs: Int64, nowMs: Int64) -> CustomerOutcome {
        var out = CustomerOutcome()
        let chains = Dictionary(grouping: facts, by: \.chainId)
        for chainId in chains.keys.sorted() {
            let chain = chains[chainId]!.sorted { $0.purchasedAtMs < $1.purchasedAtMs }
            guard chain[0].purchasedAtMs >= enrolledAtMs else { continue }
            if chain[0].trial {
                out.trialStarted = true
                if let next = chain.dropFirst().first(where: { !$0.trial }), next.renewal, next.amount > 0 { out.trialConverted = true }
            }
            for f in chain {
                if f.amount > 0 {
                    out.paid = true
                    out.revenue[f.currency, default: 0] += f.amount - f.refundedAmount
                }
                if f.refunded { out.refunded = true }
                if f.monthlyAmount > 0, !f.refunded, f.purchasedAtMs <= nowMs, let end = f.accessEndMs, nowMs < end {
                    out.mrr[f.currency, default: 0] += f.monthlyAmount
                }
            }
        }
        return out
    }
}

/// One variant's running totals, added to customer by customer (a results read walks the enrollments page by page).
public struct VariantTally: Sendable, Hashable {
    public var enrolled = 0
    public var trialsStarted = 0
    public var trialConversions = 0
    public var paidConversions = 0
    public var refunds = 0
    /// Per currency: Σ amount and Σ amount² over the variant's customers (those without the currency add 0).
    var revenueSums: [String: Sums] = [:]
    var mrrSums: [String: Sums] = [:]

    struct Sums: Sendable, Hashable {
        var sum = 0.0
        var squares = 0.0
        mutating func add(_ v: Int64) {
            sum += Double(v)
            squares += Double(v) * Double(v)
        }
    }

    public init() {}

    public mutating func add(_ o: CustomerOutcome) {
        enrolled += 1
        if o.trialStarted { trialsStarted += 1 }
        if o.trialConverted { trialConversions += 1 }
        if o.paid { paidConversions += 1 }
        if o.refunded { refunds += 1 }
        for (c, v) in o.revenue where v != 0 { revenueSums[c, default: Sums()].add(v) }
        for (c, v) in o.mrr where v != 0 { mrrSums[c, default: Sums()].add(v) }
    }

    func revenueMean(_ currency: String) -> ExperimentStatistics.Mean {
        let s = revenueSums[currency] ?? Sums()
        return .init(n: enrolled, sum: s.sum, sumOfSquares: s.squares)
    }

    func mrrMean(_ currency: String) -> ExperimentStatistics.Mean {
        let s = mrrSums[currency] ?? Sums()
        return .init(n: enrolled, sum: s.sum, sumOfSquares: s.squares)
    }
}

/// `GET /v1/admin/experiments/{id}/results`.
public enum ExperimentResults {
    /// The counts a rate is made of, in the answer's `rates` (refunds: fewer is better).
    static var rates: [(name: String, count: KeyPath<VariantTally, Int>, higherIsBetter: Bool)] {
        [("trialsStarted", \.trialsStarted, true), ("trialConversions", \.trialConversions, true),
         ("paidConversions", \.paidConversions, true), ("refunds", \.refunds, false)]
    }

    /// `{"experiment", "placement", "control", "state", "asOf", "complete", "variants": [{"id", "offering", "enrolled",
    /// "trialsStarted", "trialConversions", "paidConversions", "refunds", "revenuePerCustomer": [{"currency", "amount",
    /// "low", "high", "probabilityToBeatControl"}], "probabilityToBeatControl", "rates": {name: {"rate", "low", "high",
    /// "probabilityToBeatControl"}}, "mrr": [{"currency", "amount"}], "mrrPerCustomer": [{…as revenuePerCustomer}]}]}`.
    /// The variant's own `probabilityToBeatControl` is its paid conversion rate's; the control's are null. Amounts per
    /// customer are minor units with two decimals; probabilities and rates four decimals.
    public static func json(_ experiment: Experiment, tallies: [String: VariantTally], nowMs: Int64, complete: Bool) -> JSONValue {
        let control = tallies[experiment.control.id] ?? VariantTally()
        let revenueCurrencies = Set(tallies.values.flatMap(\.revenueSums.keys)).sorted()
        let mrrCurrencies = Set(tallies.values.flatMap(\.mrrSums.keys)).sorted()
        func round(_ d: Double, _ places: Double) -> JSONValue { .double((d * places).rounded() / places) }
        func probability(_ p: Double?, isControl: Bool) -> JSONValue { isControl ? .null : round(p ?? 0.5, 10_000) }

        let variants: [JSONValue] = experiment.variants.map { v in
            let t = tallies[v.id] ?? VariantTally()
            let isControl = v.id == experiment.control.id
            func share(_ count: KeyPath<VariantTally, Int>) -> (successes: Int, trials: Int) { (t[keyPath: count], t.enrolled) }
            var rateJSON: [String: JSONValue] = [:]
            for r in rates {
                let mine = share(r.count), theirs = (successes: control[keyPath: r.count], trials: control.enrolled)
                let interval = ExperimentStatistics.rateInterval(successes: mine.successes, trials: mine.trials)
                let above = ExperimentStatistics.probabilityAbove(mine, theirs)
                rateJSON[r.name] = ["rate": round(mine.trials > 0 ? Double(mine.successes) / Double(mine.trials) : 0, 10_000),
                                    "low": round(interval.low, 10_000), "high": round(interval.high, 10_000),
                                    "probabilityToBeatControl": probability(r.higherIsBetter ? above : 1 - above, isControl: isControl)]
            }
            func perCustomer(_ currencies: [String], _ mean: (VariantTally, String) -> ExperimentStatistics.Mean) -> JSONValue {
                .array(currencies.map { c in
                    let m = mean(t, c), interval = m.interval
                    return ["currency": .string(c), "amount": round(m.mean, 100), "low": round(interval.low, 100), "high": round(interval.high, 100),
                            "probabilityToBeatControl": probability(ExperimentStatistics.probabilityAbove(m, mean(control, c)), isControl: isControl)]
                })
            }
            return [
                "id": .string(v.id), "offering": .string(v.offering), "enrolled": .int(Int64(t.enrolled)),
                "trialsStarted": .int(Int64(t.trialsStarted)), "trialConversions": .int(Int64(t.trialConversions)),
                "paidConversions": .int(Int64(t.paidConversions)), "refunds": .int(Int64(t.refunds)),
                "revenuePerCustomer": perCustomer(revenueCurrencies) { $0.revenueMean($1) },
                "probabilityToBeatControl": rateJSON["paidConversions"]?["probabilityToBeatControl"] ?? .null,
                "rates": .object(rateJSON),
                "mrr": .array(mrrCurrencies.map { c in ["currency": .string(c), "amount": .int(Int64((t.mrrSums[c]?.sum ?? 0).rounded()))] }),
                "mrrPerCustomer": perCustomer(mrrCurrencies) { $0.mrrMean($1) },
            ]
        }
        return ["experiment": .string(experiment.id), "placement": .string(experiment.placement), "control": .string(experiment.control.id),
                "state": .string(experiment.state(atMs: nowMs)), "asOf": .string(Timestamp.rfc3339(nowMs)), "complete": .bool(complete),
                "variants": .array(variants)]
    }
}
