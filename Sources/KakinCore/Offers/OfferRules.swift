// Who may get a promotional offer is the developer's decision, not StoreKit's: Apple signs nothing and checks
// only the signature. Kakin decides from the app's `offerRules` and the customer's signed history, before it
// signs anything. Pure: the caller passes the evaluated status and the history it came from.

/// Which customers an offer is for (`offerRules[].eligibility`).
public enum OfferAudience: String, Sendable, Hashable, CaseIterable {
    /// Has a subscription in the offer's group that gives service now (`subscribed` or `inGracePeriod`).
    case current
    /// Had one in the group, none gives service now (expired, revoked, or in billing retry).
    case lapsed
    /// Has or had one in the group: the default for an offer without a rule.
    case currentOrLapsed
    /// Anyone, including customers who never subscribed.
    case anyone
}

/// One entry of an app's `offerRules`.
public struct OfferRule: Sendable, Hashable {
    public var offerId: String
    public var eligibility: OfferAudience
    /// How many times one customer may redeem the offer; nil = no limit.
    public var maxRedemptions: Int?

    public init(offerId: String, eligibility: OfferAudience = .currentOrLapsed, maxRedemptions: Int? = nil) {
        self.offerId = offerId
        self.eligibility = eligibility
        self.maxRedemptions = maxRedemptions
    }
}

/// Why Kakin refuses to sign an offer for a customer (each a 403 `offer_not_eligible` with its own error ID).
public enum OfferRefusal: Sendable, Hashable {
    /// The customer is not in the rule's audience.
    case notInAudience(OfferAudience)
    /// The customer already redeemed the offer `maxRedemptions` times.
    case redemptionLimitReached(Int)
    /// The same offer already waits in renewal info for the next renewal (redeeming it again would replace it).
    case alreadyPending

    public var errorKind: ErrorKind {
        switch self {
        case .notInAudience: return .offerNotEligible
        case .redemptionLimitReached: return .offerRedemptionLimitReached
        case .alreadyPending: return .offerAlreadyPending
        }
    }

    /// One sentence for the caller.
    public var message: String {
        switch self {
        case .notInAudience(.current): return "This offer is for current subscribers of its subscription group."
        case .notInAudience(.lapsed): return "This offer is for customers whose subscription in its group has lapsed."
        case .notInAudience: return "This offer is for customers who have or had a subscription in its group."
        case .redemptionLimitReached(let max): return "This customer already redeemed this offer \(max) time\(max == 1 ? "" : "s"), the most allowed."
        case .alreadyPending: return "This offer is already waiting for the subscription's next renewal."
        }
    }
}

public enum OfferRules {
    /// Whether a customer may get a signature for a promotional offer.
    /// - Parameters:
    ///   - rule: the app's rule for the offer (`OfferRule(offerId:)` when it has none).
    ///   - groupId: the offer's subscription group, as the catalog names it.
    ///   - status: the customer's evaluated status (`StatusEngine.evaluate`).
    ///   - history: the history the status was evaluated from.
    ///   - catalog: to name the groups of transactions as the status engine does.
    /// - Returns: nil when the offer may be signed, else why not.
    public static func refusal(rule: OfferRule, groupId: String, status: CustomerStatus, history: CustomerHistory,
                               catalog: Catalog) -> OfferRefusal? {
        // Family members can't redeem offers on a shared subscription: only the customer's own purchases count.
        let own = status.subscriptions.filter { $0.groupId == groupId && $0.ownership != .familyShared }
        let current = own.contains { $0.state.isEntitled }
        let inAudience: Bool
        switch rule.eligibility {
        case .current: inAudience = current
        case .lapsed: inAudience = !own.isEmpty && !current
        case .currentOrLapsed: inAudience = !own.isEmpty
        case .anyone: inAudience = true
        }
        guard inAudience else { return .notInAudience(rule.eligibility) }
        if own.contains(where: { $0.pendingOffer?.type == .promotional && $0.pendingOffer?.id == rule.offerId }) {
            return .alreadyPending
        }
        if let max = rule.maxRedemptions,
           redemptions(of: rule.offerId, type: .promotional, groupId: groupId, history: history, catalog: catalog) >= max {
            return .redemptionLimitReached(max)
        }
        return nil
    }

    /// How many times the customer redeemed an offer, as Apple's signed transactions show it: each run of
    /// consecutive transactions of one subscription under the offer (a pay-as-you-go offer spans several) is
    /// one redemption. (An offer still waiting in renewal info is refused as `alreadyPending` before counting.)
    public static func redemptions(of offerId: String, type: AppleOfferType, groupId: String, history: CustomerHistory,
                                   catalog: Catalog) -> Int {
        let h = history.deduplicated()
        let groups = GroupResolver(catalog: catalog, transactions: h.transactions)
        var count = 0
        for (_, chain) in Dictionary(grouping: h.transactions.filter { groups.group(of: $0) == groupId }, by: \.originalTransactionId) {
            var previousHadIt = false
            for t in chain.sorted(by: StatusOrder.purchasedBefore) {
                let hasIt = t.offerType == type && t.offerIdentifier == offerId
                if hasIt, !previousHadIt { count += 1 }
                previousHadIt = hasIt
            }
        }
        return count
    }

    /// The transaction id a signed offer request names (Apple: any transaction of the customer; the latest in
    /// the offer's group is the most telling): the newest purchase in the group, else the customer's newest
    /// purchase of any entitlement, else nil (the caller may then use the app's `appTransactionId`).
    public static func transactionIdForSigning(groupId: String, history: CustomerHistory, catalog: Catalog) -> String? {
        let h = history.deduplicated()
        let groups = GroupResolver(catalog: catalog, transactions: h.transactions)
        let inGroup = h.transactions.filter { groups.group(of: $0) == groupId }
        return (inGroup.max(by: StatusOrder.purchasedBefore) ?? h.transactions.max(by: StatusOrder.purchasedBefore))?.transactionId
    }
}
