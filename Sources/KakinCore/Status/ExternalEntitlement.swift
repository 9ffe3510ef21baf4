/// An entitlement bought outside the App Store (the web, Stripe, the team's own provider), as Kakin recorded its
/// facts: `StatusEngine.evaluate` judges it at `nowMs` beside the App Store's transactions, so a customer with an
/// App Store subscription and a web subscription to the same entitlement stays active until both have ended.
///
/// The facts are what the use case merged from the provider's events (for Stripe, `ExternalSubscriptionState`,
/// order-free); nothing here depends on when they arrived. The source's id never mixes with Apple's: a status item
/// carries `source`, and its `originalTransactionId` is the provider's id (`sub_…`, or the purchase's externalId).
public struct ExternalEntitlement: Sendable, Hashable {
    /// Where the provider says the subscription stands (one-time purchases are `active` until refunded).
    public enum Standing: String, Sendable, Hashable, CaseIterable {
        /// Paid up (or trialing).
        case active
        /// A renewal payment failed and the provider is retrying: served, like the App Store's grace period.
        case pastDue
        /// Not paid yet, unpaid past retries, or paused: not served.
        case pending
        /// Cancelled or expired for good.
        case ended
        /// Google Play's grace period: served while Play retries the payment, whatever the period's end says (Play keeps
        /// the old expiry), until Play says otherwise.
        case inGracePeriod
        /// Google Play's account hold: not served (the App Store's billing retry), until Play recovers or ends it.
        case onHold
        /// Google Play's pause: not served until it resumes.
        case paused
    }

    /// `stripe`, `web`, … (never `appStore`).
    public var source: String
    /// The subscription's id (Stripe `sub_…`), or the one-time purchase's `externalId`.
    public var id: String
    public var productId: String
    public var kind: ProductKind
    /// The newest paid period's name (the subscription's id and the period's end): a new one is a renewal.
    public var latestId: String
    public var purchasedAtMs: Int64
    /// The end of the paid period (subscriptions, passes); for an ended subscription, when it ended.
    public var expiresAtMs: Int64?
    public var standing: Standing
    public var willAutoRenew: Bool
    /// A refund in full took it back.
    public var revokedAtMs: Int64?
    /// Google Play: the chain's newest purchase token (the one that entitles), shown in the status item.
    public var purchaseToken: String?

    public init(source: String, id: String, productId: String, kind: ProductKind, latestId: String, purchasedAtMs: Int64,
                expiresAtMs: Int64?, standing: Standing, willAutoRenew: Bool, revokedAtMs: Int64? = nil, purchaseToken: String? = nil) {
        precondition(source != "appStore" && !source.isEmpty, "an external entitlement names its provider")
        self.source = source
        self.id = id
        self.productId = productId
        self.kind = kind
        self.latestId = latestId
        self.purchasedAtMs = purchasedAtMs
        self.expiresAtMs = expiresAtMs
        self.standing = standing
        self.willAutoRenew = willAutoRenew
        self.revokedAtMs = revokedAtMs
        self.purchaseToken = purchaseToken
    }

    /// As stored beside the customer (`external_entitlements`).
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "source": .string(source), "id": .string(id), "productId": .string(productId), "kind": .string(kind.rawValue),
            "latestId": .string(latestId), "purchasedAtMs": .int(purchasedAtMs), "expiresAtMs": .int(expiresAtMs),
            "standing": .string(standing.rawValue), "willAutoRenew": .bool(willAutoRenew), "revokedAtMs": .int(revokedAtMs)]
        if let purchaseToken { o["purchaseToken"] = .string(purchaseToken) }
        return .object(o)
    }

    public init?(json: JSONValue) {
        guard let source = json["source"]?.stringValue, !source.isEmpty, source != "appStore", let id = json["id"]?.stringValue,
              let productId = json["productId"]?.stringValue, let kind = json["kind"]?.stringValue.flatMap(ProductKind.init(rawValue:)),
              let latestId = json["latestId"]?.stringValue, let purchasedAtMs = json["purchasedAtMs"]?.int64Value,
              let standing = json["standing"]?.stringValue.flatMap(Standing.init(rawValue:)) else { return nil }
        self.init(source: source, id: id, productId: productId, kind: kind, latestId: latestId, purchasedAtMs: purchasedAtMs,
                  expiresAtMs: json["expiresAtMs"]?.int64Value, standing: standing, willAutoRenew: json["willAutoRenew"]?.boolValue ?? false,
                  revokedAtMs: json["revokedAtMs"]?.int64Value, purchaseToken: json["purchaseToken"]?.stringValue)
    }

    /// The state the status shows at `nowMs`: revoked after a full refund; served (`subscribed`, or `inGracePeriod`
    /// while the provider retries a payment) until the period's end; `expired` after it, whatever the provider said last.
    /// Google Play's grace, hold and pause are what Play said last, whatever the dates (`PlayPurchaseFacts.standing`).
    func state(atMs nowMs: Int64) -> SubscriptionState {
        if revokedAtMs != nil { return .revoked }
        switch standing {
        case .inGracePeriod: return .inGracePeriod
        case .onHold: return .inBillingRetryPeriod
        case .paused: return .expired
        case .active, .pastDue, .pending, .ended: break
        }
        guard let end = expiresAtMs, nowMs < end else { return .expired }
        switch standing {
        case .active: return .subscribed
        case .pastDue: return .inGracePeriod
        case .pending, .ended, .inGracePeriod, .onHold, .paused: return .expired
        }
    }

    /// The subscription as `GET /v1/customers/{id}` shows it, with `source`.
    func subscriptionStatus(catalog: Catalog, nowMs: Int64) -> SubscriptionStatus {
        let state = state(atMs: nowMs)
        var s = SubscriptionStatus(
            groupId: catalog[productId]?.groupId, productId: productId, originalTransactionId: id, latestTransactionId: latestId,
            state: state, expiresAtMs: revokedAtMs.map { min($0, expiresAtMs ?? $0) } ?? expiresAtMs,
            gracePeriodExpiresAtMs: state == .inGracePeriod ? expiresAtMs : nil, willAutoRenew: state.isRenewable && willAutoRenew,
            autoRenewProductId: productId, ownership: .purchased, offer: nil, pendingOffer: nil, expirationReason: nil)
        if state == .expired {
            switch standing {
            case .pastDue, .pending, .onHold: s.expirationReason = .billingError
            case .paused: s.expirationReason = nil
            default: s.expirationReason = willAutoRenew ? .other : .voluntary
            }
        }
        s.source = source
        s.purchaseToken = purchaseToken
        return s
    }
}
