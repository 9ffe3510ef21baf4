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
    /// A yearly subscription billed monthly with a 12-month commitment (the latest transaction's
    /// `billingPlanType` `MONTHLY` and `commitmentInfo`); nil for every other subscription.
    public var commitment: StatusCommitment? = nil
    /// `appStore`, or the provider of a subscription bought outside the App Store (`ExternalEntitlement`).
    public var source: String = "appStore"
    /// Google Play: the chain's newest purchase token (the contract's `purchaseToken`, only on Play's items).
    public var purchaseToken: String? = nil

    public var json: JSONValue {
        var o: [String: JSONValue] = [
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
            "source": .string(source),
        ]
        // Only a subscription with a commitment carries the key (the contract's "Apple's 2026 additions").
        if let commitment { o["commitment"] = commitment.json }
        if let purchaseToken { o["purchaseToken"] = .string(purchaseToken) }
        return .object(o)
    }

    /// `json`, written straight to bytes (members in key order).
    func write(to w: inout JSONBytesWriter) {
        w.object { w in
            w.member("autoRenewProductId", autoRenewProductId)
            if let commitment {
                w.key("commitment")
                commitment.write(to: &w)
            }
            w.key("eligibleWinBackOfferIds")
            w.array(eligibleWinBackOfferIds) { w, id in w.string(id) }
            w.member("expirationReason", expirationReason?.rawValue)
            w.member("expiresAt", timestamp: expiresAtMs)
            w.member("gracePeriodExpiresAt", timestamp: gracePeriodExpiresAtMs)
            w.member("groupId", groupId)
            w.key("offer")
            if let offer {
                w.object { w in
                    w.member("id", offer.id)
                    w.member("type", offer.type.contractName)
                }
            } else {
                w.string(nil)
            }
            w.member("originalTransactionId", originalTransactionId)
            w.member("ownership", ownership.contractName)
            w.key("pendingOffer")
            if let pendingOffer {
                w.object { w in
                    w.member("id", pendingOffer.id)
                    w.member("period", pendingOffer.period)
                    w.member("type", pendingOffer.type.contractName)
                }
            } else {
                w.string(nil)
            }
            w.member("productId", productId)
            if let purchaseToken { w.member("purchaseToken", purchaseToken) }
            w.member("source", source)
            w.member("state", state.rawValue)
            w.member("willAutoRenew", willAutoRenew)
        }
    }
}

extension SubscriptionStatus {
    /// Evaluates one instance (reference §7): everything comes from its latest transaction and latest renewal
    /// info, never from the largest `expiresDate` in history.
    /// - Parameters:
    ///   - latest: the instance's latest transaction (newest `purchaseDate`, `StatusOrder.purchasedBefore`).
    ///   - renewalInfo: its newest renewal info, if any; without one the instance is judged by dates alone.
    ///   - groupId: the resolved group.
    ///   - takeoverMs: when the latest transaction is `isUpgraded`, the purchase time of the group's transaction
    ///     (on another instance) that replaced it, if known.
    ///   - nowMs: the injected clock.
    static func evaluate(latest: TransactionPayload, renewalInfo: RenewalInfoPayload?, groupId: String?,
                         takeoverMs: Int64?, nowMs: Int64) -> SubscriptionStatus {
        var status = SubscriptionStatus(
            groupId: groupId, productId: latest.productId, originalTransactionId: latest.originalTransactionId,
            latestTransactionId: latest.transactionId, state: .expired, expiresAtMs: latest.expiresDate,
            gracePeriodExpiresAtMs: nil, willAutoRenew: false, autoRenewProductId: renewalInfo?.autoRenewProductId,
            ownership: latest.inAppOwnershipType, offer: nil, pendingOffer: nil, expirationReason: nil)

        let committed = StatusCommitment.Terms(latest)
        func withCommitment(_ status: SubscriptionStatus) -> SubscriptionStatus {
            var s = status
            s.commitment = committed.map { StatusCommitment($0, renewalInfo: renewalInfo, state: s.state) }
            return s
        }
        if let revoked = latest.revocationDate {
            status.state = .revoked
            status.expiresAtMs = min(latest.expiresDate ?? revoked, revoked)
            return withCommitment(status)
        }
        if latest.isUpgraded {
            status.expirationReason = .upgraded
            status.expiresAtMs = [latest.expiresDate, takeoverMs ?? latest.signedDate].compactMap { $0 }.min()
            return withCommitment(status)
        }
        if let expires = latest.expiresDate, nowMs < expires {
            status.state = .subscribed
            status.offer = latest.offerType.map { StatusOffer(type: $0, id: latest.offerIdentifier) }
        } else if let renewal = renewalInfo, let expires = latest.expiresDate {
            status.state = retryState(renewal, latest: latest, expiresMs: expires, nowMs: nowMs)
            if status.state == .inGracePeriod { status.gracePeriodExpiresAtMs = renewal.gracePeriodExpiresDate }
        }
        // A committed month ended before the next month's transaction reached Kakin. The customer is bound to
        // every month of the commitment (a cancellation takes effect at its end), so the service goes on until
        // the commitment's end, unless renewal info about this period says billing failed or it ended.
        if status.state == .expired, let terms = committed, nowMs < terms.endsAtMs {
            let fresh = renewalInfo.map { $0.signedDate >= latest.purchaseDate } ?? false
            let stopped = fresh && (renewalInfo!.expirationIntent != nil || renewalInfo!.isInBillingRetryPeriod)
            if !stopped { status.state = .subscribed }
        }
        // Mid-commitment, the next month is owed whatever auto-renew says: the subscription renews.
        let owesNextMonth = committed.map { $0.owesNextMonth(afterPeriodEnding: latest.expiresDate) } ?? false
        if status.state.isRenewable, owesNextMonth, renewalInfo == nil { status.willAutoRenew = true }

        if let renewal = renewalInfo {
            if status.state.isRenewable {
                status.willAutoRenew = renewal.willAutoRenew || owesNextMonth
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
        return withCommitment(status)
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

/// The contract's `commitment` of a subscription billed monthly with a 12-month commitment:
/// `{"billingPeriod", "totalBillingPeriods", "endsAt", "price", "willRenew"}`. `price` is Apple's
/// `commitmentPrice` as Apple gives it (milliunits of the transaction's currency); `willRenew` is whether a
/// new commitment starts at `endsAt` (renewal info's `commitmentAutoRenewStatus`; the customer's cancel turns
/// it off, and the months until `endsAt` are billed and served all the same).
public struct StatusCommitment: Sendable, Hashable {
    public var billingPeriod: Int
    public var totalBillingPeriods: Int
    public var endsAtMs: Int64
    public var priceMilli: Int64?
    public var willRenew: Bool

    public init(billingPeriod: Int, totalBillingPeriods: Int, endsAtMs: Int64, priceMilli: Int64?, willRenew: Bool) {
        self.billingPeriod = billingPeriod
        self.totalBillingPeriods = totalBillingPeriods
        self.endsAtMs = endsAtMs
        self.priceMilli = priceMilli
        self.willRenew = willRenew
    }

    public var json: JSONValue {
        ["billingPeriod": .int(Int64(billingPeriod)), "totalBillingPeriods": .int(Int64(totalBillingPeriods)),
         "endsAt": Timestamp.rfc3339(endsAtMs), "price": .int(priceMilli), "willRenew": .bool(willRenew)]
    }

    /// `json`, written straight to bytes.
    func write(to w: inout JSONBytesWriter) {
        w.object { w in
            w.member("billingPeriod", Int64(billingPeriod))
            w.member("endsAt", timestamp: endsAtMs)
            w.member("price", priceMilli)
            w.member("totalBillingPeriods", Int64(totalBillingPeriods))
            w.member("willRenew", willRenew)
        }
    }

    /// What a transaction says of its commitment: present only for `billingPlanType` `MONTHLY` with a
    /// `commitmentInfo` that has an end.
    struct Terms {
        var billingPeriod: Int
        var totalBillingPeriods: Int
        var endsAtMs: Int64
        var priceMilli: Int64?

        init?(_ t: TransactionPayload) {
            guard t.billingPlanType == .monthly, let info = t.commitmentInfo, let end = info.commitmentExpiresDate else { return nil }
            totalBillingPeriods = max(1, info.totalBillingPeriods ?? 12)
            billingPeriod = min(max(1, info.billingPeriodNumber ?? 1), totalBillingPeriods)
            endsAtMs = end
            priceMilli = info.commitmentPrice
        }

        /// Whether the month after the one ending at `periodEnd` still belongs to the commitment.
        func owesNextMonth(afterPeriodEnding periodEnd: Int64?) -> Bool {
            guard billingPeriod < totalBillingPeriods else { return false }
            return periodEnd.map { $0 < endsAtMs } ?? true
        }
    }

    init(_ terms: Terms, renewalInfo: RenewalInfoPayload?, state: SubscriptionState) {
        billingPeriod = terms.billingPeriod
        totalBillingPeriods = terms.totalBillingPeriods
        endsAtMs = terms.endsAtMs
        priceMilli = terms.priceMilli
        // Without renewal info Apple's default (on) holds; an ended subscription renews nothing.
        let on = renewalInfo.map { $0.commitmentInfo?.willRenew ?? $0.willAutoRenew } ?? true
        willRenew = state.isRenewable && on
    }
}
