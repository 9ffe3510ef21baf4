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

/// One rollup cell: a metric for an app, a product, a source and a currency (`""` when not split that way) on a day.
public struct RollupKey: Sendable, Hashable, Comparable {
    public var metric: String
    public var bundleId: String
    public var productId: String
    /// Where it was sold (`PurchaseSource`: `appStore`, `googlePlay`, a provider); `""` for coin figures.
    public var source: String
    public var currency: String
    public var day: Int64

    public init(metric: String, bundleId: String, productId: String, source: String, currency: String, day: Int64) {
        self.metric = metric
        self.bundleId = bundleId
        self.productId = productId
        self.source = source
        self.currency = currency
        self.day = day
    }

    /// The source of a cell stored before cells had one (migration 20): the App Store's, coins none.
    public static func defaultSource(metric: String) -> String {
        Metric(rawValue: metric)?.isCoins == true ? "" : PurchaseSource.appStore
    }

    public static func < (a: RollupKey, b: RollupKey) -> Bool {
        (a.metric, a.bundleId, a.productId, a.source, a.currency, a.day) < (b.metric, b.bundleId, b.productId, b.source, b.currency, b.day)
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

    public mutating func add(_ metric: Metric, bundleId: String = "", productId: String = "", source: String = "", currency: String = "", day: Int64,
                             _ value: Int64) {
        add(RollupKey(metric: metric.rawValue, bundleId: bundleId, productId: productId, source: source, currency: currency, day: day), value)
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

    /// Compact JSON: `[[metric, bundleId, productId, currency, day, value, source?], …]` in key order; the source only
    /// when it is not the metric's default (the App Store's; none for coins), so shares stored before sources read alike.
    public var json: String {
        JSONValue.array(cells.keys.sorted().map { k in
            var cell: [JSONValue] = [.string(k.metric), .string(k.bundleId), .string(k.productId), .string(k.currency), .int(k.day), .int(cells[k]!)]
            if k.source != RollupKey.defaultSource(metric: k.metric) { cell.append(.string(k.source)) }
            return .array(cell)
        }).jsonString
    }

    /// Nil for anything `json` did not write.
    public init?(json text: String) {
        guard let v = try? JSONParser.parse(Array(text.utf8)), let list = v.arrayValue else { return nil }
        for item in list {
            guard let a = item.arrayValue, a.count == 6 || a.count == 7, let m = a[0].stringValue, let b = a[1].stringValue,
                  let p = a[2].stringValue, let c = a[3].stringValue, let d = a[4].int64Value, let value = a[5].int64Value else { return nil }
            var source = RollupKey.defaultSource(metric: m)
            if a.count == 7 {
                guard let named = a[6].stringValue else { return nil }
                source = named
            }
            add(RollupKey(metric: m, bundleId: b, productId: p, source: source, currency: c, day: d), value)
        }
    }
}

/// From one customer's facts to its share of the daily rollups. Pure: the same facts give the same share, whatever
/// order they were stored in; the rollups are the sum of the shares, so recomputing a customer and applying the
/// difference can never count anything twice.
///
/// Each source's facts are first read as the same neutral facts — sales (`Sale`) and subscription instances
/// (`Instance`, periods in order and how the store says they end) — by one adapter per source: the App Store's signed
/// transactions and renewal infos, a provider's purchases and the entitlement its state gives. The rules count those,
/// so each rule exists once whatever sold the purchase, and Google Play is one more adapter.
public enum Contributions {
    static let dayMs: Int64 = 86_400_000

    public static func of(_ facts: CustomerFacts, settings: MetricsSettings) -> Contribution {
        var c = Contribution()
        // The App Store: the newest copy of each transaction, of an app whose environments count, not family-shared.
        let renewals = Dictionary(facts.renewalInfos.map { ($0.originalTransactionId, $0) }, uniquingKeysWith: { a, b in
            a.signedDate >= b.signedDate ? a : b
        })
        var counted: [TransactionPayload] = []
        for t in newestCopies(facts.transactions) {
            guard let app = settings.apps[t.bundleId], app.environments.contains(t.environment), t.inAppOwnershipType != .familyShared else { continue }
            counted.append(t)
            if let sale = sale(t) { revenue(sale, app: app, into: &c) }
        }
        let subscriptions = Dictionary(grouping: counted.filter { $0.type == .autoRenewable }, by: \.originalTransactionId)
        for otid in subscriptions.keys.sorted() {
            let list = subscriptions[otid]!.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
            let app = settings.apps[list[0].bundleId]!
            subscription(instance(list, renewal: renewals[otid], app: app), app: app, into: &c)
        }

        // Outside the stores: every purchase a provider reported for an app configured here.
        let purchases = facts.externalPurchases.filter { settings.apps[$0.bundleId] != nil }
            .sorted { ($0.source, $0.externalId) < ($1.source, $1.externalId) }
        for p in purchases { revenue(sale(p), app: settings.apps[p.bundleId]!, into: &c) }
        let entitlements = Dictionary(facts.externalEntitlements.map { ("\($0.source) \($0.id)", $0) }, uniquingKeysWith: { a, _ in a })
        let periods = Dictionary(grouping: purchases.filter { $0.kind == .autoRenewable && $0.expiresAtMs != nil }) {
            "\($0.source) \($0.subscriptionId ?? $0.externalId)"
        }
        for key in periods.keys.sorted() {
            let list = periods[key]!
            let app = settings.apps[list[0].bundleId]!
            subscription(instance(list, entitlement: entitlements[key], app: app), app: app, into: &c)
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

    /// Money taken for one purchase or period, and what was refunded of it.
    struct Sale {
        var source: String
        var bundleId: String
        var productId: String
        var currency: String
        /// Minor units.
        var amount: Int64
        var atMs: Int64
        var refunds: [ExternalPurchaseFact.Refund]
    }

    /// An App Store transaction's sale: its price (× quantity, as Apple signs it); a revocation refunds it (a prorated
    /// one its `revocationPercentage` share).
    static func sale(_ t: TransactionPayload) -> Sale? {
        guard let price = t.price, price > 0, let currency = t.currency, !currency.isEmpty else { return nil }
        let amount = CurrencyUnits.minor(milli: price, currency: currency)
        var refunds: [ExternalPurchaseFact.Refund] = []
        if let revoked = t.revocationDate {
            refunds.append(.init(amount: (amount * Int64(t.revokedShareMilli ?? 100_000) + 50_000) / 100_000, atMs: revoked))
        }
        return Sale(source: PurchaseSource.appStore, bundleId: t.bundleId, productId: t.productId, currency: currency, amount: amount,
                    atMs: t.purchaseDate, refunds: refunds)
    }

    /// A provider's purchase: its price as charged, each refund as reported.
    static func sale(_ p: ExternalPurchaseFact) -> Sale {
        Sale(source: p.source, bundleId: p.bundleId, productId: p.productId, currency: p.currency, amount: p.price, atMs: p.purchasedAtMs,
             refunds: p.refunds)
    }

    /// Gross on the sale's day; each refund's amount on its day, and the sale counted refunded once, on its first.
    static func revenue(_ s: Sale, app: AppMetricsSettings, into c: inout Contribution) {
        guard s.amount > 0, !s.currency.isEmpty else { return }
        let day = app.calendar.day(ofMs: s.atMs)
        c.add(.gross, bundleId: s.bundleId, productId: s.productId, source: s.source, currency: s.currency, day: day, s.amount)
        c.add(.paidTransactions, bundleId: s.bundleId, productId: s.productId, source: s.source, day: day, 1)
        for r in s.refunds {
            c.add(.refunded, bundleId: s.bundleId, productId: s.productId, source: s.source, currency: s.currency,
                  day: app.calendar.day(ofMs: r.atMs), r.amount)
        }
        if let first = s.refunds.first {
            c.add(.refunds, bundleId: s.bundleId, productId: s.productId, source: s.source, day: app.calendar.day(ofMs: first.atMs), 1)
        }
    }

    // MARK: Subscriptions

    /// One period of a subscription, whatever store sold it.
    struct Period {
        var startMs: Int64
        var expiresMs: Int64
        /// A refund in full ends access then.
        var revokedMs: Int64?
        var productId: String
        var trial: Bool
        /// Charged more than nothing.
        var paid: Bool
        /// Opened by a renewal of the instance, not by a purchase.
        var renewal: Bool
        /// The price normalised to a month, minor units (0 for a trial).
        var mrr: Int64
        var currency: String
    }

    /// A subscription instance: its periods in purchase order, a billing grace period after the last one while the store
    /// says it is in one, and whether (and why) the facts say it ends.
    struct Instance {
        var source: String
        var bundleId: String
        var periods: [Period]
        var graceEndMs: Int64?
        var ending: Metric?
    }

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

    /// An App Store instance: its transactions (one `originalTransactionId`) and renewal info.
    static func instance(_ list: [TransactionPayload], renewal: RenewalInfoPayload?, app: AppMetricsSettings) -> Instance {
        let periods = list.compactMap { t -> Period? in
            guard let expires = t.expiresDate else { return nil }
            let trial = isTrial(t)
            var mrr: Int64 = 0
            if !trial, let price = t.price, price > 0, let currency = t.currency {
                mrr = monthly(CurrencyUnits.minor(milli: price, currency: currency), months: months(t, app: app))
            }
            return Period(startMs: t.purchaseDate, expiresMs: expires, revokedMs: t.revocationDate, productId: t.productId, trial: trial,
                          paid: (t.price ?? 0) > 0, renewal: t.transactionReason == .renewal, mrr: mrr, currency: t.currency ?? "")
        }
        // Apple's renewal info carries the grace period's end while the subscription is in it (and drops it after).
        let grace = list.last?.revocationDate == nil ? renewal?.gracePeriodExpiresDate : nil
        return Instance(source: PurchaseSource.appStore, bundleId: list[0].bundleId, periods: periods, graceEndMs: grace,
                        ending: ended(list.last!, renewal: renewal))
    }

    /// A provider's instance: the periods it was paid for (a period paid 0 is a free trial; each after the first renews
    /// the subscription), and the entitlement its state gives: served while the provider retries a failed payment
    /// (`pastDue`, like the App Store's grace period); ended when cancelled, refunded in full or turned off
    /// (voluntary), or unpaid after the provider's retries (billing).
    static func instance(_ list: [ExternalPurchaseFact], entitlement: ExternalEntitlement?, app: AppMetricsSettings) -> Instance {
        let sorted = list.sorted { ($0.periodStartMs ?? $0.purchasedAtMs, $0.externalId) < ($1.periodStartMs ?? $1.purchasedAtMs, $1.externalId) }
        let periods = sorted.enumerated().map { i, p -> Period in
            let start = p.periodStartMs ?? p.purchasedAtMs, expires = p.expiresAtMs!
            return Period(startMs: start, expiresMs: expires, revokedMs: p.fullRefundMs, productId: p.productId, trial: p.price == 0,
                          paid: p.price > 0, renewal: i > 0,
                          mrr: p.price > 0 ? monthly(p.price, months: months(p.productId, startMs: start, expiresMs: expires, app: app)) : 0,
                          currency: p.currency)
        }
        var ending: Metric?
        if periods.last?.revokedMs != nil {
            ending = .churnVoluntary
        } else if let e = entitlement {
            switch e.standing {
            case .ended: ending = .churnVoluntary
            case .pending, .onHold: ending = .churnBilling
            // Google Play's pause ends nothing: the subscription resumes by itself.
            case .pastDue, .inGracePeriod, .paused: ending = nil
            case .active: ending = e.willAutoRenew ? nil : .churnVoluntary
            }
        }
        let inGrace = entitlement?.standing == .pastDue || entitlement?.standing == .inGracePeriod
        let grace = inGrace && periods.last?.revokedMs == nil ? entitlement?.expiresAtMs : nil
        return Instance(source: sorted[0].source, bundleId: sorted[0].bundleId, periods: periods, graceEndMs: grace, ending: ending)
    }

    static func subscription(_ instance: Instance, app: AppMetricsSettings, into c: inout Contribution) {
        let bundle = instance.bundleId, source = instance.source, list = instance.periods
        var stretches: [Access] = []
        for (i, p) in list.enumerated() {
            var end = p.expiresMs
            if let revoked = p.revokedMs { end = min(end, revoked) }
            if i + 1 < list.count { end = min(end, list[i + 1].startMs) }  // an upgrade ends the period it replaces
            guard end > p.startMs else { continue }
            stretches.append(Access(startMs: p.startMs, endMs: end, productId: p.productId, trial: p.trial, mrr: p.mrr, currency: p.currency,
                                    purchase: !p.renewal || i == 0))
        }
        // Billing grace: access continues after a failed renewal until the grace period ends.
        if let last = list.last, last.revokedMs == nil, let grace = instance.graceEndMs, grace > last.expiresMs, let lastStretch = stretches.last,
           lastStretch.endMs == last.expiresMs {
            stretches.append(Access(startMs: last.expiresMs, endMs: grace, productId: last.productId, trial: false, mrr: 0,
                                    currency: lastStretch.currency, purchase: false))
        }
        guard !stretches.isEmpty else { return }
        let day = app.calendar.day(ofMs:)

        for s in stretches {
            let first = day(s.startMs), end = day(s.endMs)  // covered days: first ..< end (active at each day's end)
            guard end > first else { continue }
            c.add(.active, bundleId: bundle, productId: s.productId, source: source, day: first, 1)
            c.add(.active, bundleId: bundle, productId: s.productId, source: source, day: end, -1)
            if s.trial {
                c.add(.activeTrials, bundleId: bundle, productId: s.productId, source: source, day: first, 1)
                c.add(.activeTrials, bundleId: bundle, productId: s.productId, source: source, day: end, -1)
            }
            if s.mrr != 0 {
                c.add(.mrr, bundleId: bundle, productId: s.productId, source: source, currency: s.currency, day: first, s.mrr)
                c.add(.mrr, bundleId: bundle, productId: s.productId, source: source, currency: s.currency, day: end, -s.mrr)
            }
        }

        // Runs: access without a gap, or with a gap closed by a renewal (a billing retry that recovered). A gap closed
        // by a new purchase (the subscriber came back) ends a run: a churn, then a new subscription.
        var runs: [[Access]] = [[stretches[0]]]
        for s in stretches.dropFirst() {
            if s.startMs > runs[runs.count - 1].last!.endMs && s.purchase { runs.append([s]) } else { runs[runs.count - 1].append(s) }
        }
        for (i, run) in runs.enumerated() {
            c.add(.newSubscriptions, bundleId: bundle, productId: run[0].productId, source: source, day: day(run[0].startMs), 1)
            let end = run.last!
            if i + 1 < runs.count {
                c.add(.churnVoluntary, bundleId: bundle, productId: end.productId, source: source, day: day(end.endMs), 1)
            } else if let reason = instance.ending {
                c.add(reason, bundleId: bundle, productId: end.productId, source: source, day: day(end.endMs), 1)
            }
        }

        // Trials, by the day they started: converted when the period after the trial is a paid renewal.
        if let first = list.first, first.trial {
            let cohort = day(first.startMs)
            c.add(.trialsStarted, bundleId: bundle, productId: first.productId, source: source, day: cohort, 1)
            if list.count > 1, !list[1].trial, list[1].renewal, list[1].paid {
                c.add(.trialsConverted, bundleId: bundle, productId: first.productId, source: source, day: cohort, 1)
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

    /// A price normalised to a month.
    static func monthly(_ amount: Int64, months: Double) -> Int64 {
        Int64((Double(amount) / (months > 0 ? months : 1)).rounded())
    }

    /// The months an App Store period's price pays for: one for a yearly plan billed monthly, a pay-up-front offer's
    /// period, else the product's.
    static func months(_ t: TransactionPayload, app: AppMetricsSettings) -> Double {
        if t.billingPlanType == .monthly { return 1 }
        if t.offerDiscountType == .payUpFront, let p = t.offerPeriod.flatMap(ISOPeriod.init) { return months(of: p) }
        return months(t.productId, startMs: t.purchaseDate, expiresMs: t.expiresDate ?? t.purchaseDate, app: app)
    }

    /// The catalog's period of the product (a yearly plan counts 1/12, a weekly one 12/365 × 7), else the period's own length.
    static func months(_ productId: String, startMs: Int64, expiresMs: Int64, app: AppMetricsSettings) -> Double {
        if let p = app.periods[productId] { return months(of: p) }
        return Double(expiresMs - startMs) / (365.25 / 12 * Double(dayMs))
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
