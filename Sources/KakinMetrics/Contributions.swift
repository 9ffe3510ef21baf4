import KakinCore

/// What the rollups count. Levels are kept as deltas (the value at a day is the sum of every delta up to it); flows
/// are counted on the day they happened. Definitions: `docs/metrics.md`.
public enum Metric: String, Sendable, CaseIterable {
    // Levels, at the end of a day.
    case active, activeTrials, mrr, paidCoins
    // Flows, on a day.
    case newSubscriptions, trialsStarted, trialsConverted, churnVoluntary, churnBilling
    case gross, refunded, refunds, paidTransactions
    case coinsSold, coinsSpent, coinsGrantedFree

    public var isLevel: Bool { self == .active || self == .activeTrials || self == .mrr || self == .paidCoins }
    /// Coin figures belong to wallets, not to an app or a product: they are kept with bundle and product `""`.
    public var isCoins: Bool { self == .paidCoins || self == .coinsSold || self == .coinsSpent || self == .coinsGrantedFree }
}

/// One rollup cell: a metric for an app, a product and a currency (`""` when not split that way) on a day.
public struct RollupKey: Sendable, Hashable, Comparable {
    public var metric: String
    public var bundleId: String
    public var productId: String
    public var currency: String
    public var day: Int64

    public init(metric: String, bundleId: String, productId: String, currency: String, day: Int64) {
        self.metric = metric
        self.bundleId = bundleId
        self.productId = productId
        self.currency = currency
        self.day = day
    }

    public static func < (a: RollupKey, b: RollupKey) -> Bool {
        (a.metric, a.bundleId, a.productId, a.currency, a.day) < (b.metric, b.bundleId, b.productId, b.currency, b.day)
    }
}

/// One customer's share of the rollups (or the rollups themselves: the sum of every customer's share). Cells that
/// sum to zero are not kept, so two contributions are equal exactly when they count the same.
public struct Contribution: Sendable, Hashable {
    public private(set) var cells: [RollupKey: Int64] = [:]

    public init() {}

    public init(cells: [RollupKey: Int64]) {
        for (k, v) in cells { add(k, v) }
    }

    public var isEmpty: Bool { cells.isEmpty }

    public mutating func add(_ key: RollupKey, _ value: Int64) {
        guard value != 0 else { return }
        let sum = (cells[key] ?? 0) + value
        cells[key] = sum == 0 ? nil : sum
    }

    public mutating func add(_ metric: Metric, bundleId: String = "", productId: String = "", currency: String = "", day: Int64, _ value: Int64) {
        add(RollupKey(metric: metric.rawValue, bundleId: bundleId, productId: productId, currency: currency, day: day), value)
    }

    public mutating func add(_ other: Contribution) {
        for (k, v) in other.cells { add(k, v) }
    }

    /// What moves the rollups from `old` to `self`: `self − old`.
    public func minus(_ old: Contribution) -> Contribution {
        var d = self
        for (k, v) in old.cells { d.add(k, -v) }
        return d
    }

    /// Compact JSON: `[[metric, bundleId, productId, currency, day, value], …]` in key order.
    public var json: String {
        JSONValue.array(cells.keys.sorted().map { k in
            .array([.string(k.metric), .string(k.bundleId), .string(k.productId), .string(k.currency), .int(k.day), .int(cells[k]!)])
        }).jsonString
    }

    /// Nil for anything `json` did not write.
    public init?(json text: String) {
        guard let v = try? JSONParser.parse(Array(text.utf8)), let list = v.arrayValue else { return nil }
        for item in list {
            guard let a = item.arrayValue, a.count == 6, let m = a[0].stringValue, let b = a[1].stringValue, let p = a[2].stringValue,
                  let c = a[3].stringValue, let d = a[4].int64Value, let value = a[5].int64Value else { return nil }
            add(RollupKey(metric: m, bundleId: b, productId: p, currency: c, day: d), value)
        }
    }
}

/// From one customer's facts to its share of the daily rollups. Pure: the same facts give the same share, whatever
/// order they were stored in; the rollups are the sum of the shares, so recomputing a customer and applying the
/// difference can never count anything twice.
public enum Contributions {
    static let dayMs: Int64 = 86_400_000

    public static func of(_ facts: CustomerFacts, settings: MetricsSettings) -> Contribution {
        var c = Contribution()
        let transactions = newestCopies(facts.transactions)
        let renewals = Dictionary(facts.renewalInfos.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, b in
            a.signedDate >= b.signedDate ? a : b
        })
        var counted: [TransactionPayload] = []
        for t in transactions {
            guard let app = settings.apps[t.bundleId], app.environments.contains(t.environment), t.inAppOwnershipType != .familyShared else { continue }
            counted.append(t)
            revenue(t, app: app, into: &c)
        }
        let subscriptions = Dictionary(grouping: counted.filter { $0.type == .autoRenewable }, by: \.originalTransactionId)
        for otid in subscriptions.keys.sorted() {
            let list = subscriptions[otid]!.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
            subscription(list, renewal: renewals[otid], app: settings.apps[list[0].bundleId]!, into: &c)
        }
        for e in facts.ledger { coins(e, calendar: settings.coinCalendar, into: &c) }
        return c
    }

    /// The newest copy of each transaction id (by `signedDate`, then the JSON text), as the status engine keeps.
    static func newestCopies(_ list: [TransactionPayload]) -> [TransactionPayload] {
        var newest: [String: TransactionPayload] = [:]
        for t in list {
            if let kept = newest[t.transactionId],
               kept.signedDate > t.signedDate || (kept.signedDate == t.signedDate && kept.raw.jsonString >= t.raw.jsonString) { continue }
            newest[t.transactionId] = t
        }
        return newest.values.sorted { $0.transactionId < $1.transactionId }
    }

    // MARK: Revenue and refunds

    static func revenue(_ t: TransactionPayload, app: AppMetricsSettings, into c: inout Contribution) {
        guard let price = t.price, price > 0, let currency = t.currency, !currency.isEmpty else { return }
        let amount = CurrencyUnits.minor(milli: price, currency: currency)
        let day = app.calendar.day(ofMs: t.purchaseDate)
        c.add(.gross, bundleId: t.bundleId, productId: t.productId, currency: currency, day: day, amount)
        c.add(.paidTransactions, bundleId: t.bundleId, productId: t.productId, day: day, 1)
        if let revoked = t.revocationDate {
            let share = Int64(t.revokedShareMilli ?? 100_000)
            let refunded = (amount * share + 50_000) / 100_000
            let refundDay = app.calendar.day(ofMs: revoked)
            c.add(.refunded, bundleId: t.bundleId, productId: t.productId, currency: currency, day: refundDay, refunded)
            c.add(.refunds, bundleId: t.bundleId, productId: t.productId, day: refundDay, 1)
        }
    }

    // MARK: Subscriptions

    /// A stretch of access: a paid period, a free trial or a billing grace period.
    struct Access {
        var startMs: Int64
        var endMs: Int64
        var productId: String
        var trial: Bool
        var mrr: Int64
        var currency: String
        /// The transaction that opened it was a purchase (a new start), not a renewal.
        var purchase: Bool
    }

    static func isTrial(_ t: TransactionPayload) -> Bool { t.offerType == .introductory && t.offerDiscountType == .freeTrial }

    static func subscription(_ list: [TransactionPayload], renewal: RenewalInfoPayload?, app: AppMetricsSettings, into c: inout Contribution) {
        let bundle = list[0].bundleId
        var stretches: [Access] = []
        for (i, t) in list.enumerated() {
            guard let expires = t.expiresDate else { continue }
            var end = expires
            if let revoked = t.revocationDate { end = min(end, revoked) }
            if i + 1 < list.count { end = min(end, list[i + 1].purchaseDate) }  // an upgrade ends the period it replaces
            guard end > t.purchaseDate else { continue }
            let trial = isTrial(t)
            var mrr: Int64 = 0
            if !trial, let price = t.price, price > 0, let currency = t.currency {
                mrr = monthly(CurrencyUnits.minor(milli: price, currency: currency), t, app: app)
            }
            stretches.append(Access(startMs: t.purchaseDate, endMs: end, productId: t.productId, trial: trial, mrr: mrr,
                                    currency: t.currency ?? "", purchase: t.transactionReason != .renewal || i == 0))
        }
        // Billing grace: access continues after a failed renewal until the grace period ends.
        if let last = list.last, last.revocationDate == nil, let expires = last.expiresDate, let grace = renewal?.gracePeriodExpiresDate,
           grace > expires, let lastStretch = stretches.last, lastStretch.endMs == expires {
            stretches.append(Access(startMs: expires, endMs: grace, productId: last.productId, trial: false, mrr: 0,
                                    currency: lastStretch.currency, purchase: false))
        }
        guard !stretches.isEmpty else { return }
        let day = app.calendar.day(ofMs:)

        for s in stretches {
            let first = day(s.startMs), end = day(s.endMs)  // covered days: first ..< end (active at each day's end)
            guard end > first else { continue }
            c.add(.active, bundleId: bundle, productId: s.productId, day: first, 1)
            c.add(.active, bundleId: bundle, productId: s.productId, day: end, -1)
            if s.trial {
                c.add(.activeTrials, bundleId: bundle, productId: s.productId, day: first, 1)
                c.add(.activeTrials, bundleId: bundle, productId: s.productId, day: end, -1)
            }
            if s.mrr != 0 {
                c.add(.mrr, bundleId: bundle, productId: s.productId, currency: s.currency, day: first, s.mrr)
                c.add(.mrr, bundleId: bundle, productId: s.productId, currency: s.currency, day: end, -s.mrr)
            }
        }

        // Runs: access without a gap, or with a gap closed by a renewal (a billing retry that recovered). A gap closed
        // by a new purchase (the subscriber came back) ends a run: a churn, then a new subscription.
        var runs: [[Access]] = [[stretches[0]]]
        for s in stretches.dropFirst() {
            if s.startMs > runs[runs.count - 1].last!.endMs && s.purchase { runs.append([s]) } else { runs[runs.count - 1].append(s) }
        }
        for (i, run) in runs.enumerated() {
            c.add(.newSubscriptions, bundleId: bundle, productId: run[0].productId, day: day(run[0].startMs), 1)
            let end = run.last!
            if i + 1 < runs.count {
                c.add(.churnVoluntary, bundleId: bundle, productId: end.productId, day: day(end.endMs), 1)
            } else if let reason = ended(list.last!, renewal: renewal) {
                c.add(reason, bundleId: bundle, productId: end.productId, day: day(end.endMs), 1)
            }
        }

        // Trials, by the day they started: converted when the transaction after the trial is a paid renewal.
        if let first = list.first, isTrial(first) {
            let cohort = day(first.purchaseDate)
            c.add(.trialsStarted, bundleId: bundle, productId: first.productId, day: cohort, 1)
            if list.count > 1, !isTrial(list[1]), list[1].transactionReason == .renewal, (list[1].price ?? 0) > 0 {
                c.add(.trialsConverted, bundleId: bundle, productId: first.productId, day: cohort, 1)
            }
        }
    }

    /// Whether the facts say the subscription's last run is over (or will be at its end), and why: turned off or
    /// expired for any reason but billing → voluntary; expired after billing retry gave up → billing; refunded with
    /// nothing after → voluntary. In billing retry it is not over yet.
    static func ended(_ last: TransactionPayload, renewal: RenewalInfoPayload?) -> Metric? {
        if let r = renewal {
            if r.isInBillingRetryPeriod { return nil }
            if let intent = r.expirationIntent { return intent == 2 ? .churnBilling : .churnVoluntary }
            if r.autoRenewStatus == 0 { return .churnVoluntary }
        }
        return last.revocationDate != nil ? .churnVoluntary : nil
    }

    /// A period's price normalised to a month: a yearly plan counts 1/12, a weekly one 12/52·… (by days: 12/365 per day).
    static func monthly(_ amount: Int64, _ t: TransactionPayload, app: AppMetricsSettings) -> Int64 {
        var months: Double
        if t.billingPlanType == .monthly {
            months = 1
        } else if t.offerDiscountType == .payUpFront, let p = t.offerPeriod.flatMap(ISOPeriod.init) {
            months = Self.months(of: p)
        } else if let p = app.periods[t.productId] {
            months = Self.months(of: p)
        } else {
            months = Double((t.expiresDate ?? t.purchaseDate) - t.purchaseDate) / (365.25 / 12 * Double(dayMs))
        }
        if months <= 0 { months = 1 }
        return Int64((Double(amount) / months).rounded())
    }

    static func months(of p: ISOPeriod) -> Double {
        Double(p.years * 12 + p.months) + Double(p.weeks * 7 + p.days) * 12 / 365
    }

    // MARK: Coins

    static func coins(_ e: LedgerFact, calendar: any ReportingCalendar, into c: inout Contribution) {
        let day = calendar.day(ofMs: e.atMs)
        c.add(.paidCoins, day: day, e.paidDelta)
        switch e.kind {
        case "purchase":
            c.add(.coinsSold, day: day, e.paidDelta)
            c.add(.coinsGrantedFree, day: day, e.freeDelta)
        case "grant":
            c.add(.coinsGrantedFree, day: day, e.freeDelta)
        case "spend":
            c.add(.coinsSpent, day: day, -(e.paidDelta + e.freeDelta))
        default:
            break
        }
    }
}
