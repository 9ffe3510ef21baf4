import KakinCore
import KakinCrypto

/// What Kakin recorded of one purchase that followed an external purchase token: the input of report building.
public struct ExternalPurchaseRecord: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// Coins, a non-consumable, a pass: Apple's ONE_TIME_BUY.
        case oneTime(quantity: Int64)
        /// One period of a subscription; `subscriptionKey` ties a subscription's periods together (Stripe's
        /// `sub_…`; for the generic source the caller's key, e.g. provider, customer and group).
        case subscriptionPeriod(subscriptionKey: String, periodStartMs: Int64, periodEndMs: Int64)
    }

    /// A refund of the purchase; `refundKey` is stable per refund (its order number, a provider's refund id).
    public struct Refund: Sendable, Hashable {
        public var refundKey: String
        /// Minor units.
        public var amount: Int64
        public var refundedAtMs: Int64

        public init(refundKey: String, amount: Int64, refundedAtMs: Int64) {
            self.refundKey = refundKey
            self.amount = amount
            self.refundedAtMs = refundedAtMs
        }
    }

    public var provider: String
    public var externalId: String
    public var productId: String
    public var kind: Kind
    /// Minor units of `currency`, tax included.
    public var price: Int64
    public var currency: CurrencyCode
    public var purchasedAtMs: Int64
    public var refunds: [Refund]

    public init(provider: String, externalId: String, productId: String, kind: Kind, price: Int64, currency: CurrencyCode,
                purchasedAtMs: Int64, refunds: [Refund] = []) {
        self.provider = provider
        self.externalId = externalId
        self.productId = productId
        self.kind = kind
        self.price = price
        self.currency = currency
        self.purchasedAtMs = purchasedAtMs
        self.refunds = refunds
    }

    /// The purchase's line item ID: a UUID derived from provider and externalId, so every rebuild of a report —
    /// after a restart, a failure, a correction — names the same line the same way.
    public var lineItemId: String { Self.derivedUUID("kakin-line-item\u{0}\(provider)\u{0}\(externalId)") }

    public func refundLineItemId(_ refund: Refund) -> String {
        Self.derivedUUID("kakin-line-item\u{0}\(provider)\u{0}\(externalId)\u{0}refund\u{0}\(refund.refundKey)")
    }

    /// A UUID (version 8, RFC 9562's custom layout) from SHA-256 of `name`.
    public static func derivedUUID(_ name: String) -> String {
        var b = SHA256Hash.digest(Array(name.utf8))
        b[6] = (b[6] & 0x0F) | 0x80
        b[8] = (b[8] & 0x3F) | 0x80
        let hex = Hex.encode(Array(b.prefix(16)))
        let c = Array(hex)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-" + String(c[20..<32])
    }
}

/// Tax as Apple's reports need it. Kakin does not know each customer's tax; the app's config gives the country
/// whose tax the prices include and its rate (Japan: JPN, 10 %).
public struct ExternalPurchaseTaxPolicy: Sendable, Hashable {
    /// ISO 3166-1 alpha-3 (Apple's `taxCountry`).
    public var taxCountry: String
    /// The rate included in prices, in basis points (10 % = 1000).
    public var taxRateBasisPoints: Int64

    public init(taxCountry: String, taxRateBasisPoints: Int64) {
        precondition(taxCountry.utf8.count == 3 && taxCountry.utf8.allSatisfy { $0 >= 65 && $0 <= 90 }, "taxCountry is ISO 3166-1 alpha-3")
        precondition((0...10_000).contains(taxRateBasisPoints), "a tax rate of 0 to 100 %")
        self.taxCountry = taxCountry
        self.taxRateBasisPoints = taxRateBasisPoints
    }

    /// The tax-exclusive part of a tax-inclusive amount, rounded half up; `amount - exclusive` is the tax, so
    /// exclusive + tax = inclusive holds exactly (Apple's IncorrectAmountTaxInclusiveError).
    public func exclusive(ofInclusive amount: Int64) -> Int64 {
        let d = 10_000 + taxRateBasisPoints
        let (n, overflow) = amount.multipliedReportingOverflow(by: 20_000)
        precondition(!overflow, "amount beyond report limits")
        return (n + d) / (2 * d)
    }
}

/// Builds Apple's line items from a token's recorded purchases, the same way every time (pure).
public enum ExternalPurchaseReportBuilder {
    /// Days count whole 24-hour days of a paid period.
    static let dayMs: Int64 = 86_400_000

    /// Every line item of the token's history, in time order: one buy per purchase (one-time buys, subscription
    /// starts, renewals and plan changes with their reference to the start), one refund per refund.
    /// - Throws: KKN-3050 when a purchase cannot be reported (an amount too large, a refund above the price).
    public static func lineItems(for purchases: [ExternalPurchaseRecord], tax: ExternalPurchaseTaxPolicy) throws(KakinError) -> [ExternalPurchaseLineItem] {
        var items: [(order: (Int64, Int, String), item: ExternalPurchaseLineItem)] = []
        // Subscription chains: start, then each later period in order.
        var chains: [String: [ExternalPurchaseRecord]] = [:]
        for p in purchases { if case .subscriptionPeriod(let key, _, _) = p.kind { chains[key, default: []].append(p) } }
        var subscriptionInfo: [String: ExternalPurchaseLineItem.Subscription] = [:]
        for (_, chain) in chains {
            let sorted = chain.sorted { a, b in
                let (sa, sb) = (a.periodStart, b.periodStart)
                return (sa, a.purchasedAtMs, a.externalId) < (sb, b.purchasedAtMs, b.externalId)
            }
            let startId = sorted[0].lineItemId
            var paidDays: Int64 = 0
            var previousProduct: String?
            for (i, p) in sorted.enumerated() {
                guard case .subscriptionPeriod(_, let start, let end) = p.kind else { continue }
                let event: ExternalPurchaseSubscriptionEvent = i == 0 ? .subscriptionStart : (p.productId == previousProduct ? .renewal : .subscriptionChange)
                subscriptionInfo[p.lineItemId] = ExternalPurchaseLineItem.Subscription(
                    productIdentifier: p.productId, quantity: 1, event: event, referenceLineItemId: i == 0 ? nil : startId,
                    startDateMs: start, endDateMs: end, daysOfPaidService: i == 0 ? 0 : paidDays)
                if p.price > 0 { paidDays += max(0, end - start) / dayMs }
                previousProduct = p.productId
            }
        }
        for p in purchases {
            guard let inclusive = p.currency.milliUnits(fromMinor: p.price), p.price >= 0 else {
                throw KakinError(.externalPurchaseInvalid, "The price of \(p.provider) \(p.externalId) is too large to report.")
            }
            let exclusive = tax.exclusive(ofInclusive: inclusive)
            let kind: ExternalPurchaseLineItem.Kind
            switch p.kind {
            case .oneTime(let quantity): kind = .oneTimeBuy(productIdentifier: p.productId, quantity: quantity)
            case .subscriptionPeriod: kind = .subscriptionBuy(subscriptionInfo[p.lineItemId]!)
            }
            let buy = ExternalPurchaseLineItem(
                lineItemId: p.lineItemId, creationDateMs: p.purchasedAtMs, kind: kind, pricingCurrency: p.currency.code,
                reportingCurrency: p.currency.code, amountTaxExclusive: exclusive, amountTaxInclusive: inclusive,
                taxAmount: inclusive - exclusive, netAmountTaxExclusive: exclusive, taxCountry: tax.taxCountry)
            items.append(((p.purchasedAtMs, 0, p.lineItemId), buy))
            // Refunds in time order; the one that completes the refund takes exactly the rest, so net ends at 0.
            var refundedMinor: Int64 = 0
            var refundedExclusive: Int64 = 0
            for r in p.refunds.sorted(by: { ($0.refundedAtMs, $0.refundKey) < ($1.refundedAtMs, $1.refundKey) }) {
                refundedMinor += r.amount
                guard r.amount > 0, refundedMinor <= p.price, let refundInclusive = p.currency.milliUnits(fromMinor: r.amount) else {
                    throw KakinError(.externalPurchaseInvalid, "The refunds of \(p.provider) \(p.externalId) exceed its price.")
                }
                let refundExclusive = refundedMinor == p.price ? exclusive - refundedExclusive : tax.exclusive(ofInclusive: refundInclusive)
                refundedExclusive += refundExclusive
                precondition(refundedExclusive <= exclusive, "refunds never exceed the purchase")
                let refund = ExternalPurchaseLineItem(
                    lineItemId: p.refundLineItemId(r), creationDateMs: max(r.refundedAtMs, p.purchasedAtMs),
                    kind: .refund(referenceLineItemId: p.lineItemId), pricingCurrency: p.currency.code, reportingCurrency: p.currency.code,
                    amountTaxExclusive: refundExclusive, amountTaxInclusive: refundInclusive, taxAmount: refundInclusive - refundExclusive,
                    netAmountTaxExclusive: exclusive - refundedExclusive, taxCountry: tax.taxCountry)
                items.append(((max(r.refundedAtMs, p.purchasedAtMs), 1, refund.lineItemId), refund))
            }
        }
        return items.sorted { $0.order < $1.order }.map(\.item)
    }

    /// The report to send next for a token, or nil when Apple already has everything:
    /// - LINE_ITEM with the line items Apple has not accepted yet (new purchases, renewals, refunds);
    /// - NO_LINE_ITEM (or DUPLICATE_TOKEN for a period token another token reports) once `noPurchaseReportDue`
    ///   and the token has no purchase and was never reported;
    /// - UNRECOGNIZED_TOKEN is `unrecognized(…)`'s.
    /// - Parameters:
    ///   - requestIdentifier: a fresh UUID for a new report; a failed report is resent with its own (see
    ///     `ExternalPurchaseReportJob.correct`).
    ///   - accepted: what Apple accepted for this token so far.
    public static func nextReport(externalPurchaseId: String, purchases: [ExternalPurchaseRecord], accepted: AcceptedReports,
                                  tax: ExternalPurchaseTaxPolicy, noPurchaseReportDue: Bool, duplicate: Bool = false,
                                  requestIdentifier: String) throws(KakinError) -> ExternalPurchaseReport? {
        let all = try lineItems(for: purchases, tax: tax)
        let new = all.filter { !accepted.lineItemIds.contains($0.lineItemId) }
        if !new.isEmpty {
            return ExternalPurchaseReport(requestIdentifier: requestIdentifier, externalPurchaseId: externalPurchaseId,
                                          status: .lineItem, lineItems: new)
        }
        guard purchases.isEmpty, !accepted.any, noPurchaseReportDue else { return nil }
        return ExternalPurchaseReport(requestIdentifier: requestIdentifier, externalPurchaseId: externalPurchaseId,
                                      status: duplicate ? .duplicateToken : .noLineItem)
    }

    /// The answer to an EXTERNAL_PURCHASE_TOKEN/UNREPORTED notification for a token Kakin never recorded.
    public static func unrecognized(externalPurchaseId: String, requestIdentifier: String) -> ExternalPurchaseReport {
        ExternalPurchaseReport(requestIdentifier: requestIdentifier, externalPurchaseId: externalPurchaseId, status: .unrecognizedToken)
    }

    /// What Apple accepted of a token's reports.
    public struct AcceptedReports: Sendable, Hashable {
        public var lineItemIds: Set<String>
        /// A NO_LINE_ITEM, UNRECOGNIZED_TOKEN or DUPLICATE_TOKEN report was accepted.
        public var statusOnly: Bool

        public init(lineItemIds: Set<String> = [], statusOnly: Bool = false) {
            self.lineItemIds = lineItemIds
            self.statusOnly = statusOnly
        }

        public var any: Bool { statusOnly || !lineItemIds.isEmpty }

        /// Adds a report Apple accepted.
        public mutating func add(_ report: ExternalPurchaseReport) {
            if report.status == .lineItem { lineItemIds.formUnion(report.lineItems.map(\.lineItemId)) } else { statusOnly = true }
        }
    }
}

extension ExternalPurchaseRecord {
    var periodStart: Int64 {
        if case .subscriptionPeriod(_, let start, _) = kind { return start }
        return purchasedAtMs
    }
}
