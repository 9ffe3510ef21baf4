import KakinCore

/// One ledger entry as the numbers read it, or several of one kind summed within a UTC quarter hour (the numbers only
/// add the deltas up per day, and a day is one over a quarter hour: `ReportingCalendar`), as storage reads them.
public struct LedgerFact: Sendable, Hashable {
    /// `LedgerEntryKind`'s raw value (`purchase`, `spend`, `grant`, `refund`, `refundReversed`, `adjustment`).
    public var kind: String
    public var paidDelta: Int64
    public var freeDelta: Int64
    /// When it was written (Kakin's clock), or the start of the quarter hour of the entries summed.
    public var atMs: Int64

    public init(kind: String, paidDelta: Int64, freeDelta: Int64, atMs: Int64) {
        self.kind = kind
        self.paidDelta = paidDelta
        self.freeDelta = freeDelta
        self.atMs = atMs
    }
}

/// A purchase outside the stores as the numbers read it (`external_purchases`, applied to the customer): a one-time
/// purchase or one period of a provider's subscription.
public struct ExternalPurchaseFact: Sendable, Hashable {
    /// The provider (`stripe`, `web`, …): the `source` it is counted under.
    public var source: String
    public var externalId: String
    public var bundleId: String
    public var productId: String
    public var kind: ProductKind
    /// Minor units of `currency`, as the provider charged it.
    public var price: Int64
    public var currency: String
    public var purchasedAtMs: Int64
    /// A subscription period's start (nil: `purchasedAtMs`) and end.
    public var periodStartMs: Int64?
    public var expiresAtMs: Int64?
    /// The provider's subscription a period belongs to (its `ExternalEntitlement.id`).
    public var subscriptionId: String?
    /// Each refund, in order.
    public var refunds: [Refund]

    public struct Refund: Sendable, Hashable {
        /// Minor units of the purchase's currency.
        public var amount: Int64
        public var atMs: Int64

        public init(amount: Int64, atMs: Int64) {
            self.amount = amount
            self.atMs = atMs
        }
    }

    public init(source: String, externalId: String, bundleId: String, productId: String, kind: ProductKind, price: Int64, currency: String,
                purchasedAtMs: Int64, periodStartMs: Int64? = nil, expiresAtMs: Int64? = nil, subscriptionId: String? = nil,
                refunds: [Refund] = []) {
        precondition(source != PurchaseSource.appStore && !source.isEmpty, "an external purchase names its provider")
        self.source = source
        self.externalId = externalId
        self.bundleId = bundleId
        self.productId = productId
        self.kind = kind
        self.price = price
        self.currency = currency
        self.purchasedAtMs = purchasedAtMs
        self.periodStartMs = periodStartMs
        self.expiresAtMs = expiresAtMs
        self.subscriptionId = subscriptionId
        self.refunds = refunds
    }

    /// When the whole price had been refunded, if it was.
    public var fullRefundMs: Int64? {
        var total: Int64 = 0
        for r in refunds {
            total += r.amount
            if price > 0, total >= price { return r.atMs }
        }
        return nil
    }
}

/// Every fact about one customer the numbers are made of: its stored transactions (the newest signed copy of each,
/// consumables included), the newest renewal info of each of its subscriptions, its ledger entries, and what it bought
/// outside the stores (the purchases, and the entitlements their providers' state gives).
public struct CustomerFacts: Sendable {
    public var customerId: String
    public var transactions: [TransactionPayload]
    public var renewalInfos: [RenewalInfoPayload]
    public var ledger: [LedgerFact]
    public var externalPurchases: [ExternalPurchaseFact]
    public var externalEntitlements: [ExternalEntitlement]

    public init(customerId: String, transactions: [TransactionPayload] = [], renewalInfos: [RenewalInfoPayload] = [],
                ledger: [LedgerFact] = [], externalPurchases: [ExternalPurchaseFact] = [], externalEntitlements: [ExternalEntitlement] = []) {
        self.customerId = customerId
        self.transactions = transactions
        self.renewalInfos = renewalInfos
        self.ledger = ledger
        self.externalPurchases = externalPurchases
        self.externalEntitlements = externalEntitlements
    }
}

/// One app's settings as the numbers read them.
public struct AppMetricsSettings: Sendable {
    public var bundleId: String
    /// Days are this zone's dates (`reportingTimeZone`).
    public var calendar: any ReportingCalendar
    /// The store's commission, 0…1 (`commissionRate`; Apple's 0.30 standard, 0.15 for the Small Business Program).
    public var commissionRate: Double
    /// The environments whose facts count: Production when the app accepts it, else every environment it accepts
    /// (a test or local-mode app), so sandbox purchases never inflate a production app's revenue.
    public var environments: Set<AppStoreEnvironment>
    /// Each auto-renewable product's billing period (from the catalog), to normalise MRR to a month.
    public var periods: [String: ISOPeriod]

    public init(bundleId: String, calendar: any ReportingCalendar, commissionRate: Double = 0.30,
                environments: Set<AppStoreEnvironment>, periods: [String: ISOPeriod] = [:]) {
        precondition((0...1).contains(commissionRate), "a commission rate is 0…1")
        self.bundleId = bundleId
        self.calendar = calendar
        self.commissionRate = commissionRate
        self.environments = environments.contains(.production) ? [.production] : environments
        self.periods = periods
    }

    /// What is deducted from a source's sales: the store's commission; nothing for a provider (its fee is not known).
    public func commissionRate(source: String) -> Double {
        PurchaseSource.isStore(source) ? commissionRate : 0
    }
}

/// Every app's settings, the zone of coin figures (wallets span apps) and the optional exchange-rate table.
public struct MetricsSettings: Sendable {
    public var apps: [String: AppMetricsSettings]
    /// Coin figures are not an app's: their days are this zone's (the apps' shared zone, else the first app's).
    public var coinCalendar: any ReportingCalendar
    public var exchangeRates: ExchangeRates?

    public init(apps: [AppMetricsSettings], coinCalendar: (any ReportingCalendar)? = nil, exchangeRates: ExchangeRates? = nil) {
        self.apps = Dictionary(apps.map { ($0.bundleId, $0) }, uniquingKeysWith: { a, _ in a })
        self.coinCalendar = coinCalendar ?? apps.first?.calendar ?? FixedOffsetCalendar()
        self.exchangeRates = exchangeRates
    }

    /// The zone the answer is in: the filtered app's, else the one every app shares, else `per-app`.
    public func timeZone(bundleId: String?) -> String {
        if let bundleId, let app = apps[bundleId] { return app.calendar.identifier }
        let zones = Set(apps.values.map(\.calendar.identifier))
        return zones.count == 1 ? zones.first! : (zones.isEmpty ? coinCalendar.identifier : "per-app")
    }
}
