import KakinCore
import KakinMetrics
import KakinStorage

extension MetricsSettings {
    /// The numbers' settings from the apps' (zone, commission, environments, catalog periods) and the rate table. A Google
    /// Play app whose package name is an App Store app's bundle ID is counted with that app's settings; another one in the
    /// coin figures' zone with the default commission (a Play app configures neither).
    public static func from(apps: [AppSettings], googlePlayApps: [GooglePlayAppSettings] = [], exchangeRates: ExchangeRates?) -> MetricsSettings {
        var calendars: [String: any ReportingCalendar] = [:]
        func calendar(_ zone: String) -> any ReportingCalendar {
            if let c = calendars[zone] { return c }
            let c: any ReportingCalendar = ZoneDays(identifier: zone) ?? FixedOffsetCalendar()
            calendars[zone] = c
            return c
        }
        let list = apps.map { app in
            AppMetricsSettings(bundleId: app.bundleId, calendar: calendar(app.reportingTimeZone), commissionRate: app.commissionRate,
                               environments: app.environments,
                               periods: Dictionary(app.catalog.sortedProducts.compactMap { p in p.period.map { (p.productId, $0) } },
                                                   uniquingKeysWith: { a, _ in a }))
        }
        let zones = Set(apps.map(\.reportingTimeZone))
        let coinZone = zones.count == 1 ? zones.first! : (apps.first?.reportingTimeZone ?? AppSettings.defaultReportingTimeZone)
        let play = googlePlayApps.map { app in
            AppMetricsSettings(bundleId: app.packageName, calendar: calendar(coinZone), environments: [.production])
        }
        // The App Store apps first: the settings of a bundle ID both stores use are the App Store app's.
        return MetricsSettings(apps: list + play, coinCalendar: calendar(coinZone), exchangeRates: exchangeRates)
    }
}

/// Business numbers (`docs/metrics.md`): the daily rollups kept up from the facts, the overview and series read from
/// them, and the rebuild that recomputes them from the facts.
///
/// Kept up by a worker that reads the events outbox past its cursor (every change a customer sees appends an event in
/// the change's own write), recomputes each customer named there from its stored facts (`Contributions.of`, pure),
/// and, in ONE write, applies the difference from the customer's stored share to `metric_days`, stores the new share
/// and moves the cursor. A re-run, a crash between passes or two processes doing the same pass cannot count twice:
/// the rollups are always the sum of the stored shares, and each share is what the facts say.
public final class BusinessMetrics: Sendable {
    public let store: any MetricsRepository
    public let settings: MetricsSettings
    let clock: any Clock
    let logger: Logger
    /// The rollup worker's loop (polls; a pass catches up to the end of the feed).
    public let worker: BackgroundLoop
    /// Events one pass reads, at most (`KakinStore.metricEventsPerReadMax` a statement).
    public static let passEventsMax = 20_000
    /// Customers one pass recomputes and writes the shares of, at most: a customer changed many times since the last
    /// pass is recomputed once, and the pass's one write stays short (a few multi-row statements).
    public static let passCustomersMax = 1_000

    public init(store: any MetricsRepository, settings: MetricsSettings, clock: any Clock, logger: Logger,
                worker: BackgroundLoop = BackgroundLoop(pollIntervalMs: 2_000)) {
        self.store = store
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.worker = worker
    }

    static func facts(_ stored: StoredMetricFacts) -> CustomerFacts {
        CustomerFacts(customerId: stored.customerId, transactions: stored.transactions, renewalInfos: stored.renewalInfos,
                      ledger: stored.ledger.map { LedgerFact(kind: $0.kind, paidDelta: $0.paidDelta, freeDelta: $0.freeDelta, atMs: $0.atMs) },
                      externalPurchases: stored.externalPurchases.compactMap(fact) + PlayOrders.purchases(stored.playOrders),
                      externalEntitlements: stored.externalEntitlements)
    }

    /// A purchase outside the App Store as the numbers read it (nil until its product's kind is known: not applied).
    static func fact(_ row: ExternalPurchaseRow) -> ExternalPurchaseFact? {
        guard row.applied, let productId = row.productId, let kind = row.productKind.flatMap(ProductKind.init(rawValue:)) else { return nil }
        let refunds = (row.refunds.arrayValue ?? []).compactMap { r -> ExternalPurchaseFact.Refund? in
            guard let amount = r["amount"]?.int64Value, let at = r["atMs"]?.int64Value else { return nil }
            return ExternalPurchaseFact.Refund(amount: amount, atMs: at)
        }
        return ExternalPurchaseFact(source: row.provider, externalId: row.externalId, bundleId: row.bundleId, productId: productId, kind: kind,
                                    price: row.price, currency: row.currency, purchasedAtMs: row.purchasedAtMs, periodStartMs: row.periodStartMs,
                                    expiresAtMs: row.expiresAtMs, subscriptionId: row.subscriptionId, refunds: refunds)
    }

    static func cells(_ c: Contribution) -> [MetricCell] {
        c.cells.keys.sorted().map { k in
            MetricCell(metric: k.metric, bundleId: k.bundleId, productId: k.productId, source: k.source, currency: k.currency, day: k.day,
                       value: c.cells[k]!)
        }
    }

    static func key(_ c: MetricCell) -> RollupKey {
        RollupKey(metric: c.metric, bundleId: c.bundleId, productId: c.productId, source: c.source, currency: c.currency, day: c.day)
    }

    /// Gives the rollup worker its place in the events outbox unless it has one (the start), so the outbox's retention
    /// waits for it from now on. Awaited before the process takes requests, beside the webhooks' `prepare`.
    public func prepare() async throws(KakinError) {
        try await store.transaction { r in try r.registerMetricsCursor() }
    }

    // MARK: Keeping up

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        /// Events read past the cursor (0: it was at the end of the feed).
        public var events: Int
        /// Customers recomputed.
        public var customers: Int
        /// It read to the end of the feed (as its snapshot saw it) and moved the cursor there.
        public var caughtUp: Bool
    }

    /// One pass: the customers of the events past the cursor, up to `passCustomersMax` of them (each once, however
    /// many of its events there are), recomputed from their facts, read on ONE snapshot (so the ingest's writes never
    /// conflict with the reading: no SERIALIZABLE read locks on its tables); then ONE write that moves the cursor from
    /// where it was read (a compare-and-set: another pass that moved it first wins and this one writes nothing) and the
    /// rollups by each share's difference from the stored share. A fact committed after the snapshot has its event
    /// after the cursor handed out, so its customer is recomputed by a later pass.
    @discardableResult
    public func step() async throws(KakinError) -> Pass {
        let settings = settings
        let (cursor, read, shares) = try await store.snapshot { r -> (EventFeedCursor, MetricsEventsRead, [(String, Contribution)]) in
            let cursor = try r.metricsCursor()
            let read = try r.customersWithEvents(after: cursor, eventsMax: Self.passEventsMax, customersMax: Self.passCustomersMax)
            return (cursor, read, try Self.shares(of: read.customers, r, settings: settings))
        }
        guard read.events > 0 else { return Pass(events: 0, customers: 0, caughtUp: true) }
        let moved = try await store.transaction { r -> Bool in
            guard try r.moveMetricsCursor(from: cursor, to: read.next) else { return false }
            try Self.apply(shares, r)
            return true
        }
        return Pass(events: read.events, customers: read.customers.count, caughtUp: moved && read.end)
    }

    /// Moves the rollups by each share's difference from the stored one and stores the shares (inside a write), a page of
    /// customers at a time: their differences summed into one multi-row upsert of the rollups, their shares into one of
    /// `metric_contributions` (the rollups end the same as moved customer by customer: a sum is a sum). Answers what the
    /// rollups moved by.
    @discardableResult
    static func apply(_ shares: [(String, Contribution)], _ r: Records) throws -> Contribution {
        var moved = Contribution()
        var start = 0
        while start < shares.count {
            let page = Array(shares[start..<min(shares.count, start + KakinStore.metricFactsCustomersMax)])
            let stored = try r.metricContributions(customerIds: page.map(\.0))
            var pageMoved = Contribution()
            var changed: [(customerId: String, cells: String?)] = []
            for (customerId, share) in page {
                var old = Contribution()
                if let text = stored[customerId] {
                    guard let parsed = Contribution(json: text) else { preconditionFailure("a stored share is always readable") }
                    old = parsed
                }
                let delta = share.minus(old)
                guard !delta.isEmpty else { continue }
                changed.append((customerId, share.isEmpty ? nil : share.json))
                pageMoved.add(delta)
            }
            try r.addToMetricDays(cells(pageMoved))
            try r.setMetricContributions(changed)
            moved.add(pageMoved)
            start += page.count
        }
        return moved
    }

    /// Recomputes these customers' shares from their facts and moves the rollups by each difference, reading and writing
    /// in ONE write: for changes that told no event (an import without `--events`), which the worker would not see. The
    /// rollups of exactly the days those facts touch move.
    /// `change` runs first in the same write (a fact stored without an event: a Play order's charge read after its apply).
    public func recompute(customerIds: [String], after change: @escaping @Sendable (Records) throws -> Void = { _ in }) async throws(KakinError) {
        guard !customerIds.isEmpty else { return }
        let settings = settings
        try await store.transaction { r in
            try change(r)
            try Self.apply(try Self.shares(of: customerIds, r, settings: settings), r)
        }
    }

    /// Each customer's share of the rollups, computed from its facts as `r` reads them (page by page).
    static func shares(of customerIds: [String], _ r: Records, settings: MetricsSettings) throws -> [(String, Contribution)] {
        var shares: [(String, Contribution)] = []
        var start = 0
        while start < customerIds.count {
            let page = Array(customerIds[start..<min(customerIds.count, start + KakinStore.metricFactsCustomersMax)])
            for facts in try r.metricFacts(customerIds: page, ledgerSpanMs: CivilDay.quarterHourMs) {
                shares.append((facts.customerId, Contributions.of(Self.facts(facts), settings: settings)))
            }
            start += page.count
        }
        return shares
    }

    /// Steps until a pass reaches the end of the feed as it serves now (the worker's pass). Events appended meanwhile wait
    /// for the next poll, so a customer changing all the time is recomputed once a poll.
    func keepUp() async throws(KakinError) {
        while try await !step().caughtUp {}
    }

    /// Keeps up until the rollups include every event committed before the call (tests and tools call it to be current).
    /// On PostgreSQL the feed serves a transaction's events only once no older transaction is running anywhere in the
    /// cluster, so a pass can reach the feed's end before it shows what was committed: this waits for that too, for
    /// `catchUpWaitsMax` waits of 10 ms at most (then it returns having kept up with what the feed showed, as the
    /// worker's pass does).
    public func catchUp() async throws(KakinError) {
        let committed = try await store.snapshot { r in try r.eventFeedLastCommitted() }
        for _ in 0..<Self.catchUpWaitsMax {
            try await keepUp()
            guard try await store.snapshot({ r in try r.metricsCursor() }) < committed else { return }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// How many times `catchUp` waits 10 ms for committed events to show in the feed, at most (30 s).
    public static let catchUpWaitsMax = 3_000

    /// The worker's pass: keep up, logging a failure (the next pass tries again from the same cursor).
    public func processDue() async {
        do {
            try await keepUp()
        } catch {
            logger.log(.error, "business numbers: catching up failed", ["error.detail": .string(error.description)])
        }
    }

    // MARK: Rebuild

    public struct RebuildResult: Sendable, Hashable {
        public var customers: Int
        /// Rollup cells recomputed from the facts.
        public var cells: Int
        /// Cells whose stored value differed (0: the incremental rollups were exactly what the facts say).
        public var differing: Int
        public var sample: [String]
        /// Writes it took (one per customer range, and one to take out what the rollups held beyond the shares).
        public var writes: Int
        /// Customers changed between a range's read and its write, left to the rollup worker.
        public var leftToTheWorker: Int
    }

    /// Customers recomputed per range of a rebuild, at most: each range's facts are read on one snapshot, then one short
    /// write moves the rollups, so ingest goes on between (and beside) them.
    public static let rebuildCustomersPerWrite = 250

    /// Recomputes every customer's share and the rollups from the facts alone and corrects what is stored, in bounded
    /// steps while ingest and the rollup worker go on:
    /// 1. on one snapshot, what the rollups hold beyond the sum of the stored shares (nothing, unless they were written
    ///    another way), taken out in one write — every write keeps "rollups − shares" as it is, so it is still that;
    /// 2. customer ranges in ID order, `customersPerWrite` each: their facts, stored shares and last event sequences read
    ///    on one snapshot and their shares recomputed (no write is held meanwhile); then ONE short write moves the rollups
    ///    by each share's difference from the stored one and stores it, for each customer whose stored share and last
    ///    event are still as read. A customer changed meanwhile is left as it is: its change has an event past the rollup
    ///    worker's cursor, or the worker's pass that stored its share read facts at least as new.
    /// `differing` counts the cells the rebuild corrected: 0 when the incremental rollups were exact (with ingest going on,
    /// customers whose facts changed since the worker's last pass count too). `afterWrite` is told the customers done.
    public func rebuild(customersPerWrite: Int = rebuildCustomersPerWrite,
                        afterWrite: @Sendable (Int) async -> Void = { _ in }) async throws(KakinError) -> RebuildResult {
        precondition((1...KakinStore.metricFactsCustomersMax).contains(customersPerWrite), "a rebuild's range fits one facts read")
        let drift = try await store.snapshot { r -> Contribution in
            var held = Contribution(), shares = Contribution()
            for c in try r.allMetricDays() { held.add(Self.key(c), c.value) }
            var after: String?
            while true {
                let page = try r.metricContributions(after: after, limit: KakinStore.metricFactsCustomersMax)
                guard let last = page.last else { break }
                for share in page {
                    guard let parsed = Contribution(json: share.cells) else { preconditionFailure("a stored share is always readable") }
                    shares.add(parsed)
                }
                after = last.customerId
            }
            return held.minus(shares)
        }
        var correction = Contribution().minus(drift)
        var writes = 0
        if !drift.isEmpty {
            try await store.transaction { r in try r.addToMetricDays(Self.cells(Contribution().minus(drift))) }
            writes += 1
        }
        struct Recomputed: Sendable {
            var customerId: String
            var share: Contribution
            /// The stored share and the last event sequence it was computed beside.
            var stored: String?
            var lastEvent: Int64?
        }
        let settings = settings
        var total = Contribution()
        var customers = 0, left = 0
        var after: String?
        while true {
            let from = after
            let range = try await store.snapshot { r -> [Recomputed] in
                let page = try r.customerIds(after: from, limit: customersPerWrite)
                let stored = try r.metricContributions(customerIds: page), events = try r.lastEventSequences(customerIds: page)
                return try r.metricFacts(customerIds: page, ledgerSpanMs: CivilDay.quarterHourMs).map { facts in
                    Recomputed(customerId: facts.customerId, share: Contributions.of(Self.facts(facts), settings: settings),
                               stored: stored[facts.customerId], lastEvent: events[facts.customerId])
                }
            }
            guard let last = range.last else { break }
            let (moved, applied) = try await store.transaction { r -> (Contribution, Int) in
                let ids = range.map(\.customerId)
                let stored = try r.metricContributions(customerIds: ids), events = try r.lastEventSequences(customerIds: ids)
                let unchanged = range.filter { stored[$0.customerId] == $0.stored && events[$0.customerId] == $0.lastEvent }
                return (try Self.apply(unchanged.map { ($0.customerId, $0.share) }, r), unchanged.count)
            }
            writes += 1
            for c in range { total.add(c.share) }
            correction.add(moved)
            customers += range.count
            left += range.count - applied
            after = last.customerId
            await afterWrite(customers)
        }
        let sample = correction.cells.keys.sorted().prefix(5).map { k in
            let facts = total.cells[k] ?? 0
            return "\(k.metric) \(k.bundleId) \(k.productId) \(k.source) \(k.currency) \(CivilDay.string(k.day)): stored \(facts - correction.cells[k]!), facts \(facts)"
        }
        return RebuildResult(customers: customers, cells: total.cells.count, differing: correction.cells.count, sample: Array(sample), writes: writes,
                             leftToTheWorker: left)
    }

    // MARK: Reading

    /// Checks a range and a filter; answers the day numbers.
    public func days(from: String, to: String, bundleId: String?) throws(KakinError) -> (Int64, Int64) {
        guard let a = CivilDay.parse(from), let b = CivilDay.parse(to), a <= b, b - a < Self.daysMax else {
            throw KakinError(.invalidMetricsQuery)
        }
        if let bundleId, settings.apps[bundleId] == nil { throw KakinError(.invalidMetricsQuery, "No app with this bundleId is configured.") }
        return (a, b)
    }

    static let levels = Metric.allCases.filter(\.isLevel).map(\.rawValue)
    static let flows = Metric.allCases.filter { !$0.isLevel }.map(\.rawValue)

    static func sums(_ cells: [MetricCell]) -> RollupSums {
        var s = RollupSums()
        for c in cells {
            s.add(RollupSums.Key(metric: c.metric, bundleId: c.bundleId, productId: c.productId, source: c.source, currency: c.currency), c.value)
        }
        return s
    }

    /// `GET /v1/admin/metrics/overview` (a product filter is the desk's); with a cohort, its customers' numbers.
    public func overview(from: String, to: String, filter: MetricsFilter, cohort: CohortCells? = nil) async throws(KakinError) -> Overview {
        let (a, b) = try days(from: from, to: to, bundleId: filter.bundleId)
        let (before, end, flows) = try await overviewSums(fromDay: a, toDay: b, cohort: cohort)
        do {
            return try OverviewBuilder.build(OverviewInputs(levelsBefore: Self.sums(before), levelsAtEnd: Self.sums(end), flows: Self.sums(flows)),
                                             fromDay: a, toDay: b, filter: filter, settings: settings)
        } catch {
            throw Self.error(error)
        }
    }

    /// `GET /v1/admin/metrics/{name}`.
    public func series(name: String, interval: MetricsInterval, from: String, to: String, filter: MetricsFilter,
                       cohort: CohortCells? = nil) async throws(KakinError) -> JSONValue {
        guard Overview.names.contains(name) else { throw KakinError(.unknownMetric) }
        let (a, b) = try days(from: from, to: to, bundleId: filter.bundleId)
        guard interval.buckets(fromDay: a, toDay: b).count <= Self.pointsMax else {
            throw KakinError(.invalidMetricsQuery, "At most \(Self.pointsMax) points: choose a longer interval or a shorter range.")
        }
        let (before, cells) = try await seriesCells(fromDay: a, toDay: b, cohort: cohort)
        var days: [RollupKey: Int64] = [:]
        for c in cells { days[Self.key(c), default: 0] += c.value }
        do {
            return try SeriesBuilder.build(name: name, interval: interval, fromDay: a, toDay: b, levelsBefore: Self.sums(before), days: days,
                                           filter: filter, settings: settings)
        } catch {
            throw Self.error(error)
        }
    }

    /// The sources the numbers count anything for (`appStore`, `googlePlay`, providers): the desk's source filter.
    public func sources() async throws(KakinError) -> [String] {
        try await store.metricSources()
    }

    static func error(_ e: MetricsQueryError) -> KakinError {
        switch e {
        case .noExchangeRate(let c): return KakinError(.noExchangeRate, "No exchange rate for \(c): add it to exchangeRates.rates.")
        }
    }

    /// The level numbers at the end of today (the coin zone's date): what `/metrics` shows as gauges.
    public struct Gauges: Sendable, Hashable {
        /// Active subscriptions (trials and grace included) by app and product.
        public var activeSubscriptions: [String: [String: Int64]]
        public var activeTrials: [String: Int64]
        public var outstandingPaidCoins: Int64
    }

    public func gauges() async throws(KakinError) -> Gauges {
        let today = settings.coinCalendar.day(ofMs: clock.nowMs())
        let cells = try await store.metricLevels([Metric.active.rawValue, Metric.activeTrials.rawValue, Metric.paidCoins.rawValue], upToDay: today)
        var g = Gauges(activeSubscriptions: [:], activeTrials: [:], outstandingPaidCoins: 0)
        for c in cells {
            switch Metric(rawValue: c.metric) {
            case .active?: g.activeSubscriptions[c.bundleId, default: [:]][c.productId, default: 0] += c.value
            case .activeTrials?: g.activeTrials[c.bundleId, default: 0] += c.value
            case .paidCoins?: g.outstandingPaidCoins += c.value
            default: break
            }
        }
        return g
    }
}
