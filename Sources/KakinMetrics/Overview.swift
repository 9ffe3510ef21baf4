import KakinCore

/// Rollup cells summed over days, kept per metric, app, product, source and currency.
public struct RollupSums: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        public var metric: String
        public var bundleId: String
        public var productId: String
        public var source: String
        public var currency: String

        public init(metric: String, bundleId: String, productId: String, source: String, currency: String) {
            self.metric = metric
            self.bundleId = bundleId
            self.productId = productId
            self.source = source
            self.currency = currency
        }
    }

    public private(set) var values: [Key: Int64] = [:]

    public init() {}

    public mutating func add(_ key: Key, _ value: Int64) {
        guard value != 0 else { return }
        values[key, default: 0] += value
    }

    public mutating func add(_ other: RollupSums) {
        for (k, v) in other.values { add(k, v) }
    }

    func total(_ m: Metric) -> Int64 { values.reduce(0) { $1.key.metric == m.rawValue ? $0 + $1.value : $0 } }

    /// Amounts per currency and source.
    func bySourceAndCurrency(_ m: Metric) -> [Pair: Int64] {
        var out: [Pair: Int64] = [:]
        for (k, v) in values where k.metric == m.rawValue { out[Pair(source: k.source, currency: k.currency), default: 0] += v }
        return out
    }

    /// Amounts per app, source and currency (proceeds: each app's commission for each source).
    func byBundle(_ m: Metric) -> [String: [Pair: Int64]] {
        var out: [String: [Pair: Int64]] = [:]
        for (k, v) in values where k.metric == m.rawValue { out[k.bundleId, default: [:]][Pair(source: k.source, currency: k.currency), default: 0] += v }
        return out
    }

    /// A source and a currency: the finest split money is kept and converted in.
    struct Pair: Hashable {
        var source: String
        var currency: String
    }

    /// Per product (the dashboard's breakdown).
    public func byProduct(_ m: Metric) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for (k, v) in values where k.metric == m.rawValue { out[k.productId, default: 0] += v }
        return out
    }
}

/// What is asked: a range of local dates, an app, a product and a source (nil = all), a reporting currency (nil = per
/// currency).
public struct MetricsFilter: Sendable, Hashable {
    public var bundleId: String?
    public var productId: String?
    /// `appStore`, `googlePlay` or a provider (`PurchaseSource`).
    public var source: String?
    public var currency: String?

    public init(bundleId: String? = nil, productId: String? = nil, source: String? = nil, currency: String? = nil) {
        self.bundleId = bundleId
        self.productId = productId
        self.source = source
        self.currency = currency
    }

    /// Coin figures are wallets', not an app's, a product's or a source's: the filters leave them whole.
    public func keeps(_ key: RollupSums.Key) -> Bool {
        if Metric(rawValue: key.metric)?.isCoins == true { return true }
        if let bundleId, key.bundleId != bundleId { return false }
        if let productId, key.productId != productId { return false }
        if let source, key.source != source { return false }
        return true
    }
}

/// The three sums an overview is made of: levels at the end of the day before `from` and at the end of `to`, and the
/// flows of the days in between.
public struct OverviewInputs: Sendable {
    public var levelsBefore: RollupSums
    public var levelsAtEnd: RollupSums
    public var flows: RollupSums

    public init(levelsBefore: RollupSums, levelsAtEnd: RollupSums, flows: RollupSums) {
        self.levelsBefore = levelsBefore
        self.levelsAtEnd = levelsAtEnd
        self.flows = flows
    }
}

/// `GET /v1/admin/metrics/overview`'s answer (amounts in minor units; rates 0–1).
public struct Overview: Sendable, Hashable {
    public struct Money: Sendable, Hashable {
        public var currency: String
        public var amount: Int64
        /// The amount per source (`appStore`, `googlePlay`, a provider), summing to `amount`.
        public var bySource: [String: Int64]

        public init(currency: String, amount: Int64, bySource: [String: Int64]) {
            self.currency = currency
            self.amount = amount
            self.bySource = bySource
        }

        public var json: JSONValue {
            ["currency": .string(currency), "amount": .int(amount), "bySource": .object(bySource.mapValues(JSONValue.int))]
        }
    }

    /// Gross, refunded and proceeds: a revenue item's amounts, or one source's share of them.
    public struct RevenueAmounts: Sendable, Hashable {
        public var gross: Int64
        public var refunded: Int64
        /// (gross − refunded) × (1 − the commission of the app's store; none for a provider), summed over apps.
        public var proceeds: Int64

        public init(gross: Int64, refunded: Int64, proceeds: Int64) {
            self.gross = gross
            self.refunded = refunded
            self.proceeds = proceeds
        }

        var fields: [String: JSONValue] { ["gross": .int(gross), "refunded": .int(refunded), "proceeds": .int(proceeds)] }
    }

    public struct Revenue: Sendable, Hashable {
        public var currency: String
        public var gross: Int64
        public var refunded: Int64
        public var proceeds: Int64
        /// Each source's share, summing to the item's amounts.
        public var bySource: [String: RevenueAmounts]

        public init(currency: String, bySource: [String: RevenueAmounts]) {
            self.currency = currency
            gross = bySource.values.reduce(0) { $0 + $1.gross }
            refunded = bySource.values.reduce(0) { $0 + $1.refunded }
            proceeds = bySource.values.reduce(0) { $0 + $1.proceeds }
            self.bySource = bySource
        }

        public var json: JSONValue {
            var o = RevenueAmounts(gross: gross, refunded: refunded, proceeds: proceeds).fields
            o["currency"] = .string(currency)
            o["bySource"] = .object(bySource.mapValues { .object($0.fields) })
            return .object(o)
        }
    }

    public var from: String
    public var to: String
    public var timeZone: String
    public var currency: String?
    public var activeSubscriptions: Int64
    public var activeTrials: Int64
    public var newSubscriptions: Int64
    public var trialsStarted: Int64
    public var trialsConverted: Int64
    public var churnedVoluntary: Int64
    public var churnedBilling: Int64
    /// Active subscriptions at the end of the day before `from` (the churn rate's base with the new ones).
    public var activeAtStart: Int64
    public var mrr: [Money]
    public var revenue: [Revenue]
    public var refundCount: Int64
    public var paidTransactions: Int64
    public var coinsSold: Int64
    public var coinsSpent: Int64
    public var coinsGrantedFree: Int64
    public var coinsOutstandingPaid: Int64

    public init(from: String, to: String, timeZone: String, currency: String?, activeSubscriptions: Int64, activeTrials: Int64,
                newSubscriptions: Int64, trialsStarted: Int64, trialsConverted: Int64, churnedVoluntary: Int64, churnedBilling: Int64,
                activeAtStart: Int64, mrr: [Money], revenue: [Revenue], refundCount: Int64, paidTransactions: Int64, coinsSold: Int64,
                coinsSpent: Int64, coinsGrantedFree: Int64, coinsOutstandingPaid: Int64) {
        self.from = from
        self.to = to
        self.timeZone = timeZone
        self.currency = currency
        self.activeSubscriptions = activeSubscriptions
        self.activeTrials = activeTrials
        self.newSubscriptions = newSubscriptions
        self.trialsStarted = trialsStarted
        self.trialsConverted = trialsConverted
        self.churnedVoluntary = churnedVoluntary
        self.churnedBilling = churnedBilling
        self.activeAtStart = activeAtStart
        self.mrr = mrr
        self.revenue = revenue
        self.refundCount = refundCount
        self.paidTransactions = paidTransactions
        self.coinsSold = coinsSold
        self.coinsSpent = coinsSpent
        self.coinsGrantedFree = coinsGrantedFree
        self.coinsOutstandingPaid = coinsOutstandingPaid
    }

    public var trialConversionRate: Double { Self.rate(trialsConverted, trialsStarted) }
    public var churnRate: Double { Self.rate(churnedVoluntary + churnedBilling, activeAtStart + newSubscriptions) }
    public var refundRate: Double { Self.rate(refundCount, paidTransactions) }

    /// n / d to four decimals; 0 when nothing could happen.
    public static func rate(_ n: Int64, _ d: Int64) -> Double {
        guard d > 0 else { return 0 }
        return (Double(n) / Double(d) * 10_000).rounded() / 10_000
    }

    /// Every top-level number, by the name `GET /v1/admin/metrics/{name}` takes.
    public static let names = ["activeSubscriptions", "activeTrials", "newSubscriptions", "trialConversions", "churned", "mrr",
                               "revenue", "refunds", "coins"]

    public func value(named name: String) -> JSONValue? {
        switch name {
        case "activeSubscriptions": return .int(activeSubscriptions)
        case "activeTrials": return .int(activeTrials)
        case "newSubscriptions": return .int(newSubscriptions)
        case "trialConversions": return ["started": .int(trialsStarted), "converted": .int(trialsConverted), "rate": .double(trialConversionRate)]
        case "churned": return ["voluntary": .int(churnedVoluntary), "billing": .int(churnedBilling), "rate": .double(churnRate)]
        case "mrr": return .array(mrr.map(\.json))
        case "revenue": return .array(revenue.map(\.json))
        case "refunds": return ["count": .int(refundCount), "rate": .double(refundRate)]
        case "coins":
            return ["sold": .int(coinsSold), "spent": .int(coinsSpent), "grantedFree": .int(coinsGrantedFree),
                    "outstandingPaid": .int(coinsOutstandingPaid)]
        default: return nil
        }
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = ["from": .string(from), "to": .string(to), "timeZone": .string(timeZone)]
        if let currency { o["currency"] = .string(currency) }
        for name in Self.names { o[name] = value(named: name) }
        return .object(o)
    }
}

/// Failures a query can meet that are the asker's: a currency with no rate.
public enum MetricsQueryError: Error, Sendable, Hashable {
    case noExchangeRate(String)
}

public enum OverviewBuilder {
    public static func build(_ inputs: OverviewInputs, fromDay: Int64, toDay: Int64, filter: MetricsFilter,
                             settings: MetricsSettings) throws(MetricsQueryError) -> Overview {
        func kept(_ s: RollupSums) -> RollupSums {
            var out = RollupSums()
            for (k, v) in s.values where filter.keeps(k) { out.add(k, v) }
            return out
        }
        let before = kept(inputs.levelsBefore), end = kept(inputs.levelsAtEnd), flows = kept(inputs.flows)

        // Money is converted per source and currency, then summed, so the sources always add up to each item.
        func convert(_ amounts: [RollupSums.Pair: Int64]) throws(MetricsQueryError) -> [RollupSums.Pair: Int64] {
            guard let target = filter.currency else { return amounts.filter { $0.value != 0 } }
            guard let rates = settings.exchangeRates, rates.knows(target) else { throw .noExchangeRate(target) }
            var out: [RollupSums.Pair: Int64] = [:]
            for (k, v) in amounts {
                guard let converted = rates.convert(v, from: k.currency, to: target) else { throw .noExchangeRate(k.currency) }
                out[RollupSums.Pair(source: k.source, currency: target), default: 0] += converted
            }
            return out
        }

        let mrr = try convert(end.bySourceAndCurrency(.mrr)).filter { $0.value != 0 }
        // Proceeds per app and source (each with its store's commission), then per source and currency.
        var proceeds: [RollupSums.Pair: Int64] = [:]
        let gross = flows.byBundle(.gross), refunded = flows.byBundle(.refunded)
        for bundle in Set(gross.keys).union(refunded.keys) {
            for pair in Set((gross[bundle] ?? [:]).keys).union((refunded[bundle] ?? [:]).keys) {
                let rate = settings.apps[bundle]?.commissionRate(source: pair.source) ?? 0.30
                let net = (gross[bundle]?[pair] ?? 0) - (refunded[bundle]?[pair] ?? 0)
                proceeds[pair, default: 0] += Int64((Double(net) * (1 - rate)).rounded())
            }
        }
        let g = try convert(flows.bySourceAndCurrency(.gross)), r = try convert(flows.bySourceAndCurrency(.refunded)), p = try convert(proceeds)
        let money = Set(g.keys).union(r.keys).union(p.keys).filter { g[$0] != 0 || r[$0] != 0 || p[$0] != 0 }
        // With a reporting currency, one item in it, zero or not; else one per currency with money.
        func currencies(_ pairs: some Sequence<RollupSums.Pair>) -> [String] {
            filter.currency.map { [$0] } ?? Set(pairs.map(\.currency)).sorted()
        }
        func bySource<V>(_ pairs: some Sequence<RollupSums.Pair>, currency: String, _ value: (RollupSums.Pair) -> V) -> [String: V] {
            Dictionary(pairs.filter { $0.currency == currency }.map { ($0.source, value($0)) }, uniquingKeysWith: { a, _ in a })
        }

        return Overview(
            from: CivilDay.string(fromDay), to: CivilDay.string(toDay), timeZone: settings.timeZone(bundleId: filter.bundleId),
            currency: filter.currency,
            activeSubscriptions: end.total(.active), activeTrials: end.total(.activeTrials),
            newSubscriptions: flows.total(.newSubscriptions),
            trialsStarted: flows.total(.trialsStarted), trialsConverted: flows.total(.trialsConverted),
            churnedVoluntary: flows.total(.churnVoluntary), churnedBilling: flows.total(.churnBilling),
            activeAtStart: before.total(.active),
            mrr: currencies(mrr.keys).map { currency in
                let split = bySource(mrr.keys, currency: currency) { mrr[$0]! }
                return Overview.Money(currency: currency, amount: split.values.reduce(0, +), bySource: split)
            },
            revenue: currencies(money).map { currency in
                Overview.Revenue(currency: currency, bySource: bySource(money, currency: currency) {
                    Overview.RevenueAmounts(gross: g[$0] ?? 0, refunded: r[$0] ?? 0, proceeds: p[$0] ?? 0)
                })
            },
            refundCount: flows.total(.refunds), paidTransactions: flows.total(.paidTransactions),
            coinsSold: flows.total(.coinsSold), coinsSpent: flows.total(.coinsSpent), coinsGrantedFree: flows.total(.coinsGrantedFree),
            coinsOutstandingPaid: end.total(.paidCoins))
    }
}

/// `interval=day|week|month`: the buckets a range is cut into (weeks start on Monday; the first and last are clipped
/// to the range).
public enum MetricsInterval: String, Sendable, CaseIterable {
    case day, week, month

    public func buckets(fromDay: Int64, toDay: Int64) -> [ClosedRange<Int64>] {
        var out: [ClosedRange<Int64>] = []
        var start = fromDay
        while start <= toDay {
            let next: Int64
            switch self {
            case .day: next = start + 1
            case .week: next = CivilDay.weekStart(start) + 7
            case .month: next = CivilDay.nextMonthStart(start)
            }
            out.append(start...min(toDay, next - 1))
            start = next
        }
        return out
    }
}

/// A series: the overview of each bucket, built from the daily cells in the range and the levels before it, so each
/// point is exactly the overview the API answers for that bucket's dates.
public enum SeriesBuilder {
    /// `levelsBefore`: level metrics summed up to the day before `fromDay`; `days`: every cell of the range.
    public static func build(name: String, interval: MetricsInterval, fromDay: Int64, toDay: Int64, levelsBefore: RollupSums,
                             days: [RollupKey: Int64], filter: MetricsFilter, settings: MetricsSettings) throws(MetricsQueryError) -> JSONValue {
        var byDay: [Int64: [(RollupSums.Key, Int64)]] = [:]
        for (k, v) in days {
            byDay[k.day, default: []].append((RollupSums.Key(metric: k.metric, bundleId: k.bundleId, productId: k.productId, source: k.source,
                                                             currency: k.currency), v))
        }
        var levels = levelsBefore
        var points: [JSONValue] = []
        for bucket in interval.buckets(fromDay: fromDay, toDay: toDay) {
            let before = levels
            var flows = RollupSums()
            for d in bucket {
                for (k, v) in byDay[d] ?? [] {
                    if Metric(rawValue: k.metric)?.isLevel == true { levels.add(k, v) } else { flows.add(k, v) }
                }
            }
            let overview = try OverviewBuilder.build(OverviewInputs(levelsBefore: before, levelsAtEnd: levels, flows: flows),
                                                     fromDay: bucket.lowerBound, toDay: bucket.upperBound, filter: filter, settings: settings)
            points.append(["start": .string(CivilDay.string(bucket.lowerBound)), "value": overview.value(named: name) ?? .null])
        }
        return ["name": .string(name), "interval": .string(interval.rawValue), "points": .array(points)]
    }
}
