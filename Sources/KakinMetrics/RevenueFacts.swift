import KakinCore

/// One purchase as an experiment's results read it, whichever store sold it: what was charged, whether it was a free
/// trial or a renewal, what was refunded, and what it adds to MRR while its period runs. The App Store's facts
/// (`RevenueFact.appStore`) and purchases outside it (`RevenueFact.external`, from the numbers' `ExternalPurchaseFact`s)
/// become this one shape; a new store is one more adapter here, never a second set of rules. (KakinCore's `PurchaseFact` is what a store says of a purchase, for
/// the ingest to apply; this is what the purchase earned, counted as the business numbers count it.)
public struct RevenueFact: Sendable, Hashable {
    /// `appStore`, `googlePlay`, or an outside provider (`stripe`, `web`, …).
    public var source: String
    /// The purchase chain: a subscription instance (its renewals and plan changes share it) or a one-off purchase.
    public var chainId: String
    public var productId: String
    public var purchasedAtMs: Int64
    /// ISO 4217; "" when nothing was charged.
    public var currency: String
    /// What was charged, in the currency's minor units (0 for a free trial).
    public var amount: Int64
    /// An introductory free trial.
    public var trial: Bool
    /// A renewal of the chain (not its first purchase, not a new purchase after a lapse).
    public var renewal: Bool
    /// What was refunded of `amount`, in minor units (a prorated refund its share).
    public var refundedAmount: Int64
    public var refunded: Bool
    /// The period's price normalised to a month (0 for one-off purchases and trials), counted while it runs.
    public var monthlyAmount: Int64
    /// When the period's access ends (a subscription's; nil for one-off purchases).
    public var accessEndMs: Int64?

    public init(source: String, chainId: String, productId: String, purchasedAtMs: Int64, currency: String, amount: Int64, trial: Bool,
                renewal: Bool, refundedAmount: Int64 = 0, refunded: Bool = false, monthlyAmount: Int64 = 0, accessEndMs: Int64? = nil) {
        precondition(amount >= 0 && refundedAmount >= 0 && refundedAmount <= amount, "a refund takes at most what was charged")
        self.source = source
        self.chainId = chainId
        self.productId = productId
        self.purchasedAtMs = purchasedAtMs
        self.currency = currency
        self.amount = amount
        self.trial = trial
        self.renewal = renewal
        self.refundedAmount = refundedAmount
        self.refunded = refunded
        self.monthlyAmount = monthlyAmount
        self.accessEndMs = accessEndMs
    }

    /// The App Store's facts of one customer, counted as the business numbers count them (`docs/metrics.md`): the newest
    /// copy of each transaction, only the environments an app's numbers count, never a family-shared copy.
    public static func appStore(_ facts: CustomerFacts, settings: MetricsSettings) -> [RevenueFact] {
        var out: [RevenueFact] = []
        for t in Contributions.newestCopies(facts.transactions) {
            guard let app = settings.apps[t.bundleId], app.environments.contains(t.environment), t.inAppOwnershipType != .familyShared else { continue }
            let currency = t.currency ?? ""
            let amount = (t.price ?? 0) > 0 && !currency.isEmpty ? CurrencyUnits.minor(milli: t.price!, currency: currency) : 0
            var refunded: Int64 = 0
            if t.revocationDate != nil {
                refunded = (amount * Int64(t.revokedShareMilli ?? 100_000) + 50_000) / 100_000
            }
            let trial = Contributions.isTrial(t)
            let subscription = t.type == .autoRenewable
            var end = t.expiresDate
            if let revoked = t.revocationDate, let e = end { end = min(e, revoked) }
            let monthly = subscription && !trial && amount > 0 ? Contributions.monthly(amount, months: Contributions.months(t, app: app)) : 0
            out.append(RevenueFact(source: "appStore", chainId: t.originalTransactionId, productId: t.productId, purchasedAtMs: t.purchaseDate,
                                   currency: amount > 0 ? currency : "", amount: amount, trial: trial,
                                   renewal: t.transactionReason == .renewal,
                                   refundedAmount: min(refunded, amount), refunded: t.revocationDate != nil, monthlyAmount: monthly,
                                   accessEndMs: subscription ? end : nil))
        }
        return out
    }

    /// Purchases outside the App Store: a subscription's payments share its `subscriptionId` (the first is its start, the
    /// later ones renewals); a payment of 0 that starts a subscription is its free trial; MRR is the price over the
    /// period's length in months.
    public static func external(_ purchases: [ExternalPurchaseFact]) -> [RevenueFact] {
        var seenChains: Set<String> = []
        return purchases.sorted { ($0.purchasedAtMs, $0.externalId) < ($1.purchasedAtMs, $1.externalId) }.map { p in
            let chain = p.subscriptionId.map { "\(p.source):\($0)" } ?? "\(p.source):\(p.externalId)"
            let renewal = p.subscriptionId != nil && !seenChains.insert(chain).inserted
            let amount = max(0, p.price)
            var monthly: Int64 = 0
            if p.subscriptionId != nil, amount > 0, let end = p.expiresAtMs {
                monthly = Contributions.monthly(amount, months: Double(end - (p.periodStartMs ?? p.purchasedAtMs)) / (365.25 / 12 * Double(Contributions.dayMs)))
            }
            let refundedTotal = p.refunds.reduce(0) { $0 + $1.amount }
            return RevenueFact(source: p.source, chainId: chain, productId: p.productId, purchasedAtMs: p.purchasedAtMs,
                               currency: amount > 0 ? p.currency : "", amount: amount, trial: p.subscriptionId != nil && amount == 0 && !renewal,
                               renewal: renewal, refundedAmount: min(max(0, refundedTotal), amount), refunded: refundedTotal > 0,
                               monthlyAmount: monthly, accessEndMs: p.subscriptionId != nil ? p.expiresAtMs : nil)
        }
    }
}
