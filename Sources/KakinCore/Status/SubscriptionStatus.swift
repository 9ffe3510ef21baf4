/// The state of one subscription instance (`originalTransactionId`), as StoreKit's `RenewalState` and
/// Get All Subscription Statuses name it; the raw values are the contract's strings.
public enum SubscriptionState: String, Sendable, CaseIterable, Hashable {
    case subscribed, inGracePeriod, inBillingRetryPeriod, expired, revoked

    /// Whether the customer keeps service: paid up, or in the billing grace period.
    public var isEntitled: Bool { self == .subscribed || self == .inGracePeriod }

    /// Whether Apple may still renew it (billing retry included).
    public var isRenewable: Bool { self == .subscribed || self == .inGracePeriod || self == .inBillingRetryPeriod }
}

/// Why an instance is `expired` (the contract's `expirationReason`). The first five map renewal info's
/// `expirationIntent` 1…5; `upgraded` is Kakin's: the instance's latest transaction was upgraded away and
/// the service continues on another instance of the group.
public enum ExpirationReason: String, Sendable, CaseIterable, Hashable {
    /// 1: the customer turned auto-renew off (also inferred when no intent is known and auto-renew was off).
    case voluntary
    /// 2: billing failed and Apple stopped retrying (also inferred past the 60-day billing retry).
    case billingError
    /// 3: the customer did not consent to a price increase.
    case priceIncrease
    /// 4: the product was not for sale at renewal time.
    case productUnavailable
    /// 5, or an intent value Apple adds later.
    case other
    case upgraded

    public init(expirationIntent: Int) {
        switch expirationIntent {
        case 1: self = .voluntary
        case 2: self = .billingError
        case 3: self = .priceIncrease
        case 4: self = .productUnavailable
        default: self = .other
        }
    }
}

/// An offer on a subscription: the one of the current period (`offer`), or the single one waiting in
/// renewal info for the next renewal (`pendingOffer`, with its `period`).
public struct StatusOffer: Sendable, Hashable {
    public var type: AppleOfferType
    /// nil for introductory offers (Apple sends no identifier for them).
    public var id: String?
    /// ISO 8601 total duration (`offerPeriod`), when Apple gave it.
    public var period: String?

    public init(type: AppleOfferType, id: String?, period: String? = nil) {
        self.type = type
        self.id = id
        self.period = period
    }
}

extension InAppOwnershipType {
    /// The contract's `ownership`: `familyShared`, or `purchased` for everything else.
    public var contractName: String { self == .familyShared ? "familyShared" : "purchased" }
}

/// What `GET /v1/customers/{id}` says about one subscription instance.
public struct SubscriptionStatus: Sendable, Hashable {
    /// The group as the catalog names it (see `StatusEngine`); nil only for an unknown product without a group.
    public var groupId: String?
    public var productId: String
    public var originalTransactionId: String
    /// The instance's latest transaction (newest `purchaseDate`): the one everything here is read from.
    public var latestTransactionId: String
    public var state: SubscriptionState
    /// End of the current period from the latest transaction; for `revoked`, the revocation time when earlier;
    /// for `upgraded`, the time the higher-level subscription took over.
    public var expiresAtMs: Int64?
    /// Only while `inGracePeriod`.
    public var gracePeriodExpiresAtMs: Int64?
    public var willAutoRenew: Bool
    public var autoRenewProductId: String?
    public var ownership: InAppOwnershipType
    /// The offer of the current period, while that period lasts.
    public var offer: StatusOffer?
    /// The one offer renewal info holds for the next renewal (a newer offer replaces it; offers never stack).
    public var pendingOffer: StatusOffer?
    /// Only when `expired`.
    public var expirationReason: ExpirationReason?
    /// Only when `expired`: the win-back offers Apple says the customer may redeem, best first (renewal info's
    /// `eligibleWinBackOfferIds`; Apple lists none while in grace or billing retry).
    public var eligibleWinBackOfferIds: [String] = []

    public var json: JSONValue {
        [
            "groupId": .string(groupId),
            "productId": .string(productId),
            "originalTransactionId": .string(originalTransactionId),
            "state": .string(state.rawValue),
            "expiresAt": Timestamp.rfc3339(expiresAtMs),
            "gracePeriodExpiresAt": Timestamp.rfc3339(gracePeriodExpiresAtMs),
            "willAutoRenew": .bool(willAutoRenew),
            "autoRenewProductId": .string(autoRenewProductId),
            "ownership": .string(ownership.contractName),
            "offer": offer.map { ["type": .string($0.type.contractName), "id": .string($0.id)] } ?? .null,
            "pendingOffer": pendingOffer.map {
                ["type": .string($0.type.contractName), "id": .string($0.id), "period": .string($0.period)]
            } ?? .null,
            "expirationReason": .string(expirationReason?.rawValue),
            "eligibleWinBackOfferIds": .array(eligibleWinBackOfferIds.map { .string($0) }),
        ]
    }
}

extension SubscriptionStatus {
    /// Evaluates one instance (reference §7): everything comes from its latest transaction and latest renewal
    /// info, never from the largest `expiresDate` in history.
    /// - Parameters:
    ///   - transactions: the instance's deduplicated transactions (not empty).
    ///   - renewalInfo: its newest renewal info, if any; without one the instance is judged by dates alone.
    ///   - groupId: the resolved group.
    ///   - takeoverMs: when the latest transaction is `isUpgraded`, the purchase time of the group's transaction
    ///     (on another instance) that replaced it, if known.
    ///   - nowMs: the injected clock.
    static func evaluate(transactions: [TransactionPayload], renewalInfo: RenewalInfoPayload?, groupId: String?,
                         takeoverMs: Int64?, nowMs: Int64) -> SubscriptionStatus {
        precondition(!transactions.isEmpty, "an instance has at least one transaction")
        let latest = transactions.max(by: StatusOrder.purchasedBefore)!
        var status = SubscriptionStatus(
            groupId: groupId, productId: latest.productId, originalTransactionId: latest.originalTransactionId,
            latestTransactionId: latest.transactionId, state: .expired, expiresAtMs: latest.expiresDate,
            gracePeriodExpiresAtMs: nil, willAutoRenew: false, autoRenewProductId: renewalInfo?.autoRenewProductId,
            ownership: latest.inAppOwnershipType, offer: nil, pendingOffer: nil, expirationReason: nil)

        if let revoked = latest.revocationDate {
            status.state = .revoked
            status.expiresAtMs = min(latest.expiresDate ?? revoked, revoked)
            return status
        }
        if latest.isUpgraded {
            status.expirationReason = .upgraded
            status.expiresAtMs = [latest.expiresDate, takeoverMs ?? latest.signedDate].compactMap { $0 }.min()
            return status
        }
        if let expires = latest.expiresDate, nowMs < expires {
            status.state = .subscribed
            status.offer = latest.offerType.map { StatusOffer(type: $0, id: latest.offerIdentifier) }
        } else if let renewal = renewalInfo, let expires = latest.expiresDate {
            status.state = retryState(renewal, latest: latest, expiresMs: expires, nowMs: nowMs)
            if status.state == .inGracePeriod { status.gracePeriodExpiresAtMs = renewal.gracePeriodExpiresDate }
        }

        if let renewal = renewalInfo {
            if status.state.isRenewable {
                status.willAutoRenew = renewal.willAutoRenew
                status.pendingOffer = renewal.offerType.map {
                    StatusOffer(type: $0, id: renewal.offerIdentifier, period: renewal.offerPeriod)
                }
            } else if renewal.signedDate >= latest.purchaseDate {
                // Only renewal info about the latest period explains why it ended and what may win the customer back.
                if status.state == .expired { status.eligibleWinBackOfferIds = renewal.eligibleWinBackOfferIds }
                if let intent = renewal.expirationIntent {
                    status.expirationReason = ExpirationReason(expirationIntent: intent)
                } else if renewal.isInBillingRetryPeriod {
                    status.expirationReason = .billingError
                } else if !renewal.willAutoRenew {
                    status.expirationReason = .voluntary
                }
            }
        }
        return status
    }

    /// After the period's end: grace, billing retry, or expired. Renewal info signed before the latest
    /// purchase speaks of an earlier period and can't put this one in retry; an intent other than a billing
    /// error means Apple stopped; and retry never outlives `StatusEngine.billingRetryDurationMaxMs`, even
    /// when the EXPIRED notification was lost.
    private static func retryState(_ renewal: RenewalInfoPayload, latest: TransactionPayload, expiresMs: Int64,
                                   nowMs: Int64) -> SubscriptionState {
        guard renewal.signedDate >= latest.purchaseDate,
              renewal.expirationIntent == nil || renewal.expirationIntent == 2,
              nowMs < expiresMs + StatusEngine.billingRetryDurationMaxMs else { return .expired }
        // A future grace date counts even when `isInBillingRetryPeriod` is false (seen after a free trial).
        if let grace = renewal.gracePeriodExpiresDate, nowMs < grace { return .inGracePeriod }
        return renewal.isInBillingRetryPeriod ? .inBillingRetryPeriod : .expired
    }
}
