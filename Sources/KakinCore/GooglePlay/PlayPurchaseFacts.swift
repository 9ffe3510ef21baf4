/// Google Play's adapter: what the Developer API answered (read back by Kakin, so it is verified by the TLS channel and
/// the service account, never by a signature) → store-neutral `PurchaseFact`s for the one apply, and the entitlement a
/// subscription or one-time product gives (`ExternalEntitlement` with `source` "googlePlay") for the status engine.
/// Pure: the caller passes when it read the resource (`readAtMs`, the copy's date for `NewestCopy`) and the chain a
/// linked token belongs to (`linkedChainId`, looked up in its write).
public enum PlayPurchaseFacts {
    /// The ledger's and the status's `source` for Play.
    public static let source = "googlePlay"

    /// A chain's id from an order id: the order without its renewal suffix (`GPA.1234-5678-9012-34567..0` → `GPA.1234-5678-9012-34567`).
    public static func orderBase(_ orderId: String) -> String {
        guard let r = orderId.firstRange(of: "..") else { return orderId }
        return String(orderId[..<r.lowerBound])
    }

    /// The facts of a subscription read (`purchases.subscriptionsv2.get`): one per order its line items name (an
    /// initial order, a renewal `..N`, a free trial's zero-priced order); none while it is pending (no order yet).
    /// - Parameters:
    ///   - linkedChainId: the chain of `linkedPurchaseToken` when Kakin knows it (an upgrade, a downgrade, a resubscribe
    ///     before lapse keep their chain); nil: the chain starts at this token's first order.
    ///   - voided: voided purchases known for this token (from a notification or the poll): an order named there is revoked.
    public static func subscription(_ s: SubscriptionPurchaseV2, packageName: String, linkedChainId: String?,
                                    voided: [VoidedPurchase] = [], readAtMs: Int64) -> [PurchaseFact] {
        var facts: [PurchaseFact] = []
        for (index, item) in s.lineItems.enumerated() {
            guard let orderId = item.latestSuccessfulOrderId, !orderId.isEmpty, !facts.contains(where: { $0.periodId == orderId }) else { continue }
            var price = recurringPriceMilli(s.raw["lineItems"]?.arrayValue?[index])
            if item.offerPhase == "freeTrial" { price?.milli = 0 }
            facts.append(PurchaseFact(
                store: .googlePlay, appId: packageName, chainId: linkedChainId ?? orderBase(orderId), periodId: orderId,
                productId: item.productId, storeKind: item.isPrepaid ? .nonRenewing : .autoRenewable, quantity: 1,
                owner: PurchaseFact.OwnerHints(accountToken: s.externalAccountIdentifiers.obfuscatedExternalAccountId),
                purchasedAtMs: s.startTimeMs ?? readAtMs, expiresAtMs: item.expiryTimeMs, priceMilli: price?.milli, currency: price?.currency,
                offer: item.offerPhase.map { PurchaseFact.Offer(type: $0, id: item.offerId) },
                revocation: revocation(orderId: orderId, quantity: 1, refundableQuantity: nil, cancelled: false, voided: voided, readAtMs: readAtMs),
                signedAtMs: readAtMs, raw: s.raw))
        }
        return facts
    }

    /// The fact of a one-time purchase read (`purchases.productsv2.getproductpurchasev2`): a chain of its own, the order
    /// its period; quantity from the line item; a refund from voided purchases, a `CANCELLED` state (in full) or fewer
    /// refundable units than bought (quantity-based partial refunds). Nil without an order id.
    public static func product(_ p: ProductPurchaseV2, packageName: String, voided: [VoidedPurchase] = [], readAtMs: Int64) -> PurchaseFact? {
        guard let orderId = p.orderId, !orderId.isEmpty, let item = p.lineItems.first else { return nil }
        return PurchaseFact(
            store: .googlePlay, appId: packageName, chainId: orderId, periodId: orderId, productId: item.productId, storeKind: nil,
            quantity: item.quantity, owner: PurchaseFact.OwnerHints(accountToken: p.externalAccountIdentifiers.obfuscatedExternalAccountId),
            purchasedAtMs: p.purchaseCompletionTimeMs ?? readAtMs, expiresAtMs: nil, priceMilli: nil, currency: nil,
            offer: item.offerId.map { PurchaseFact.Offer(type: "offer", id: $0) },
            revocation: revocation(orderId: orderId, quantity: item.quantity, refundableQuantity: item.refundableQuantity,
                                   cancelled: p.purchaseState == .cancelled, voided: voided, readAtMs: readAtMs),
            signedAtMs: readAtMs, raw: p.raw)
    }

    /// What Play says was taken back of an order: a voided purchase naming it (in full, or `voidedQuantity` units), else a
    /// cancelled purchase (in full), else units no longer refundable (a quantity-based partial refund).
    static func revocation(orderId: String, quantity: Int, refundableQuantity: Int?, cancelled: Bool, voided: [VoidedPurchase],
                           readAtMs: Int64) -> PurchaseFact.Revocation? {
        if let v = voided.filter({ $0.orderId == orderId }).max(by: { $0.voidedTimeMs < $1.voidedTimeMs }) {
            let units = v.voidedQuantity ?? quantity
            return PurchaseFact.Revocation(atMs: v.voidedTimeMs, refund: units >= quantity ? .full : .quantity(units))
        }
        if cancelled { return PurchaseFact.Revocation(atMs: readAtMs, refund: .full) }
        if let refundable = refundableQuantity, refundable < quantity {
            return PurchaseFact.Revocation(atMs: readAtMs, refund: .quantity(quantity - max(refundable, 0)))
        }
        return nil
    }

    /// The `Money` of a line item's auto-renewing plan, in milli-units.
    static func recurringPriceMilli(_ lineItem: JSONValue?) -> (milli: Int64, currency: String)? {
        moneyMilli(lineItem?["autoRenewingPlan"]?["recurringPrice"])
    }

    /// Google's `Money` (`{currencyCode, units, nanos}`) in milli-units; nil when absent or negative.
    public static func moneyMilli(_ json: JSONValue?) -> (milli: Int64, currency: String)? {
        guard let money = json, let currency = money["currencyCode"]?.stringValue else { return nil }
        let units = money["units"]?.googleInt64 ?? 0
        let nanos = Int64(money["nanos"]?.intValue ?? 0)
        guard units >= 0, units < Int64.max / 1_000 else { return nil }
        return (units * 1_000 + nanos / 1_000_000, currency)
    }

    // MARK: Status

    /// Play's `subscriptionState` → where the status engine puts the subscription. Exact: active and cancelled-but-unexpired
    /// are served until the line item's expiry; grace is served (Play keeps the old expiry while it retries); on hold and
    /// paused are not served, whatever the dates say, until Play says otherwise; expired and a cancelled pending purchase
    /// are over; pending (and unspecified) was never paid.
    public static func standing(_ state: PlaySubscriptionState) -> ExternalEntitlement.Standing {
        switch state {
        case .active, .canceled: return .active
        case .inGracePeriod: return .inGracePeriod
        case .onHold: return .onHold
        case .paused: return .paused
        case .expired, .pendingPurchaseCanceled: return .ended
        default: return .pending
        }
    }

    /// A subscription's entitlement, as the latest read of the chain's newest token says.
    /// - Parameters:
    ///   - chainId: the chain (`originalTransactionId` in the status: its first order without `..N`).
    ///   - purchaseToken: the token read (the status item's `purchaseToken`).
    ///   - revocations: what Play took back, by order id (a refund in full of the latest order revokes it).
    public static func entitlement(_ s: SubscriptionPurchaseV2, chainId: String, purchaseToken: String? = nil,
                                   revocations: [String: PurchaseFact.Revocation] = [:]) -> ExternalEntitlement? {
        guard let item = s.lineItems.max(by: { ($0.expiryTimeMs ?? 0) < ($1.expiryTimeMs ?? 0) }) else { return nil }
        let latest = item.latestSuccessfulOrderId ?? chainId
        let revoked = revocations[latest].flatMap { $0.refund == .full ? $0.atMs : nil }
        return ExternalEntitlement(
            source: source, id: chainId, productId: item.productId, kind: .autoRenewable, latestId: latest,
            purchasedAtMs: s.startTimeMs ?? 0, expiresAtMs: item.expiryTimeMs, standing: standing(s.subscriptionState),
            willAutoRenew: item.autoRenewEnabled ?? false, revokedAtMs: revoked, purchaseToken: purchaseToken)
    }

    /// A non-consumable's entitlement (its own chain), revoked by a refund in full.
    public static func entitlement(nonConsumable fact: PurchaseFact) -> ExternalEntitlement {
        let revokedAtMs: Int64? = fact.revocation.flatMap { $0.refund == .full ? $0.atMs : nil }
        return ExternalEntitlement(source: source, id: fact.chainId, productId: fact.productId, kind: .nonConsumable, latestId: fact.periodId,
                                   purchasedAtMs: fact.purchasedAtMs, expiresAtMs: nil, standing: .active, willAutoRenew: false,
                                   revokedAtMs: revokedAtMs)
    }
}
