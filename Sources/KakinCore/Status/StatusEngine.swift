// The subscription and customer status engine: from a customer's stored App Store transactions and renewal
// infos, it computes what `GET /v1/customers/{customerId}` answers (new / active / inactive, each subscription
// instance's state, owned non-consumables, non-renewing passes, real introductory-offer eligibility).
//
// It lives in the pure core because it must be exactly right and provably so: no I/O, no clock (the caller
// passes `nowMs`), and a result that depends only on the SET of signed copies received — never on their
// arrival order or count — so late, duplicated and reordered notifications can't change the answer. The
// traps the seed teams fell into are ruled out here: expiry comes from each instance's latest transaction,
// never from the largest `expiresDate` in history (seed 003); only one pending offer exists (renewal info
// holds one slot); and intro eligibility counts any subscription ever had in the group, not only past intro
// offers (seed 002: StoreKit says "eligible" while an active subscription makes the offer unusable).
//
// Files: `CustomerHistory` (deduplication, total orders), `SubscriptionStatus` (per-instance rules),
// `CustomerStatus` (results and the contract JSON), this file (the customer-level evaluation).

/// Evaluates a customer's purchase history against the catalog at a given time.
public enum StatusEngine {
    /// Apple retries a failed renewal for at most 60 days; past that an instance is expired even if the
    /// EXPIRED notification never arrived.
    public static let billingRetryDurationMaxMs: Int64 = 60 * dayMs
    static let dayMs: Int64 = 86_400_000

    /// The customer's status.
    /// - Parameters:
    ///   - history: every stored transaction and renewal info copy, duplicates and any order allowed.
    ///   - catalog: product kinds, groups, levels, periods and non-renewing lengths.
    ///   - nowMs: the injected clock, milliseconds since the UNIX epoch.
    public static func evaluate(_ history: CustomerHistory, catalog: Catalog, nowMs: Int64) -> CustomerStatus {
        let h = history.distinct()
        let groups = GroupResolver(catalog: catalog, transactions: h.transactions)
        func kind(_ t: TransactionPayload) -> ProductKind? { ProductKind(appleType: t.type) ?? catalog[t.productId]?.kind }

        // Auto-renewable subscriptions, one status per instance. Indices into `h.transactions`, not copies: a payload is a
        // large value, and this runs on every status read.
        let all = h.transactions
        let subscriptionTransactions = all.indices.filter { kind(all[$0]) == .autoRenewable }
        let renewals = Dictionary(h.renewalInfos.indices.map { (h.renewalInfos[$0].originalTransactionId, $0) }, uniquingKeysWith: { a, _ in a })
        var subscriptions: [SubscriptionStatus] = []
        var notices: [StatusNotice] = []
        for (originalId, transactions) in Dictionary(grouping: subscriptionTransactions, by: { all[$0].originalTransactionId }) {
            let latest = all[transactions.max { StatusOrder.purchasedBefore(all[$0], all[$1]) }!]
            let groupId = groups.group(of: latest)
                ?? transactions.sorted { StatusOrder.purchasedBefore(all[$0], all[$1]) }.reversed().lazy
                .compactMap { groups.group(of: all[$0]) }.first
            var takeoverMs: Int64?
            if latest.isUpgraded, let groupId {
                takeoverMs = subscriptionTransactions.lazy.map { all[$0] }
                    .filter { $0.originalTransactionId != originalId && groups.group(of: $0) == groupId && $0.purchaseDate >= latest.purchaseDate }
                    .map(\.purchaseDate).min()
            }
            let status = SubscriptionStatus.evaluate(
                latest: latest, renewalInfo: renewals[originalId].map { h.renewalInfos[$0] }, groupId: groupId,
                takeoverMs: takeoverMs, nowMs: nowMs)
            subscriptions.append(status)
            notices += changeNotices(status, latest: latest, catalog: catalog)
        }
        // Introductory offers are the App Store's: only its subscriptions count for eligibility.
        let appStoreGroups = Set(subscriptions.compactMap(\.groupId))
        // Subscriptions bought outside the App Store, one status each beside the App Store's (`source`): the customer
        // is served while any of them is.
        for e in h.external where e.kind == .autoRenewable {
            subscriptions.append(e.subscriptionStatus(catalog: catalog, nowMs: nowMs))
        }
        subscriptions.sort { a, b in
            switch (a.groupId, b.groupId) {
            case let (x?, y?) where x != y: return x < y
            case (nil, _?): return true
            case (_?, nil): return false
            default: return StatusOrder.idLess(a.originalTransactionId, b.originalTransactionId)
            }
        }
        notices.sort { a, b in
            if a.originalTransactionId != b.originalTransactionId { return StatusOrder.idLess(a.originalTransactionId, b.originalTransactionId) }
            return a.kind.rawValue < b.kind.rawValue
        }

        // Non-consumables: owned while any purchase stands; a purchased copy is reported before a shared one.
        var nonConsumables: [NonConsumableOwnership] = []
        let ownedCopies = h.transactions.filter { kind($0) == .nonConsumable && !$0.isRevoked }
        for (productId, copies) in Dictionary(grouping: ownedCopies, by: \.productId) {
            let purchased = copies.filter { $0.inAppOwnershipType != .familyShared }
            let first = (purchased.isEmpty ? copies : purchased).min(by: StatusOrder.purchasedBefore)!
            nonConsumables.append(NonConsumableOwnership(productId: productId, transactionId: first.transactionId, ownership: first.inAppOwnershipType))
        }
        // Bought outside the App Store: owned unless refunded; an App Store copy is reported first.
        let ownedElsewhere = h.external.filter { $0.kind == .nonConsumable && $0.revokedAtMs == nil }
        for (productId, copies) in Dictionary(grouping: ownedElsewhere, by: \.productId) where !nonConsumables.contains(where: { $0.productId == productId }) {
            let first = copies.min { ($0.purchasedAtMs, $0.source, $0.id) < ($1.purchasedAtMs, $1.source, $1.id) }!
            nonConsumables.append(NonConsumableOwnership(productId: productId, transactionId: first.id, ownership: .purchased, source: first.source))
        }
        nonConsumables.sort { $0.productId < $1.productId }

        // Non-renewing: each standing purchase lasts the catalog's length; the latest end counts (no stacking).
        var nonRenewing: [NonRenewingStatus] = []
        // A pass bought outside the App Store lasts until its `expiresAt`, else the catalog's length; per product the
        // latest end counts, whichever source sold it.
        var ends: [String: [(end: Int64?, source: String)]] = [:]
        let passes = h.transactions.filter { kind($0) == .nonRenewing && !$0.isRevoked }
        for (productId, purchases) in Dictionary(grouping: passes, by: \.productId) {
            let lengthMs = catalog[productId]?.durationDays.map { Int64($0) * dayMs }
            ends[productId, default: []].append((lengthMs.map { length in purchases.map { $0.purchaseDate + length }.max()! }, "appStore"))
        }
        for e in h.external where e.kind == .nonRenewing && e.revokedAtMs == nil {
            let end = e.expiresAtMs ?? catalog[e.productId]?.durationDays.map { e.purchasedAtMs + Int64($0) * dayMs }
            ends[e.productId, default: []].append((end, e.source))
        }
        for (productId, candidates) in ends {
            let latest = candidates.max { a, b in ((a.end ?? Int64.min), b.source) < ((b.end ?? Int64.min), a.source) }!
            nonRenewing.append(NonRenewingStatus(productId: productId, expiresAtMs: latest.end, active: latest.end.map { nowMs < $0 } ?? false,
                                                 source: latest.source))
        }
        nonRenewing.sort { $0.productId < $1.productId }

        // Introductory offers (the contract's decision, Apple staff's reading): only for a customer who never had a
        // subscription in the group — intro or not, refunded or not, active or long gone.
        let subscribedGroups = appStoreGroups
        var eligibility: [String: Bool] = [:]
        for group in Set(catalog.groupIds).union(subscribedGroups) {
            eligibility[group] = !subscribedGroups.contains(group)
        }

        let hadEntitlement = h.transactions.contains { kind($0).map { $0 != .consumable } ?? false }
            || h.external.contains { $0.kind != .consumable }
        let isActive = subscriptions.contains { $0.state.isEntitled } || !nonConsumables.isEmpty || nonRenewing.contains(where: \.active)
        return CustomerStatus(
            status: isActive ? .active : (hadEntitlement ? .inactive : .new),
            subscriptions: subscriptions, nonConsumables: nonConsumables, nonRenewing: nonRenewing,
            introductoryOfferEligibility: eligibility, notices: notices)
    }

    /// What changing plan or redeeming an offer now would cost a subscriber who bought the subscription
    /// (family members can't change it). Seed 003: a pending offer is replaced by the next one; an upgrade, or
    /// a crossgrade to the same duration, is immediate — discarding a free period, refunding a paid one pro rata.
    /// When a change is immediate is `PlanChange`'s rule, the one the simulator changes plans by.
    ///
    /// A 12-month commitment billed monthly binds the customer to its end (Apple: customers can cancel at any
    /// time, but the subscription remains active through the end of the commitment term; StoreKit "Supporting
    /// monthly subscriptions with a 12-month commitment"): only an upgrade is immediate, and a subscriber in
    /// any month but the last is told that cancelling ends the subscription at the commitment's end, not the
    /// month's. Introductory-offer eligibility is unchanged by a commitment (it stays per group).
    static func changeNotices(_ status: SubscriptionStatus, latest: TransactionPayload, catalog: Catalog) -> [StatusNotice] {
        guard status.state == .subscribed, status.ownership != .familyShared else { return [] }
        var notices: [StatusNotice] = []
        if status.pendingOffer != nil {
            notices.append(StatusNotice(kind: .pendingOfferWouldBeReplaced, originalTransactionId: status.originalTransactionId, productIds: []))
        }
        let committed = status.commitment.map { $0.billingPeriod < $0.totalBillingPeriods } ?? false
        if let current = catalog[status.productId], let groupId = current.groupId {
            let immediate = catalog.products(inGroup: groupId).filter {
                $0.productId != current.productId && $0.kind == .autoRenewable
                    && PlanChange(from: current, to: $0, committed: committed).isImmediate
            }
            if !immediate.isEmpty {
                let free = latest.offerDiscountType == .freeTrial || (latest.offerType != nil && latest.price == 0)
                notices.append(StatusNotice(
                    kind: free ? .immediateChangeDiscardsFreePeriod : .immediateChangeRefundsProrated,
                    originalTransactionId: status.originalTransactionId, productIds: immediate.map(\.productId)))
            }
        }
        if committed {
            notices.append(StatusNotice(kind: .cancellationAtCommitmentEnd, originalTransactionId: status.originalTransactionId, productIds: []))
        }
        return notices
    }
}

/// One name per subscription group. The catalog's `groupId` is what the app asks eligibility for, and a
/// `.storekit` or JSON catalog may name a group differently from Apple's numeric `subscriptionGroupIdentifier`;
/// keying by both would report a group twice and its eligibility wrongly. So a known product's catalog group
/// wins, Apple's id of that group maps to the catalog's name for products the catalog no longer lists, and
/// otherwise Apple's id is used as is.
struct GroupResolver {
    let catalog: Catalog
    private var catalogNameOfAppleGroup: [String: String] = [:]

    init(catalog: Catalog, transactions: [TransactionPayload]) {
        self.catalog = catalog
        for t in transactions {
            guard let apple = t.subscriptionGroupIdentifier, let named = catalog[t.productId]?.groupId, apple != named else { continue }
            // Several names for one Apple group means a misconfigured catalog: pick one deterministically.
            catalogNameOfAppleGroup[apple] = min(catalogNameOfAppleGroup[apple] ?? named, named)
        }
    }

    func group(of t: TransactionPayload) -> String? {
        if let named = catalog[t.productId]?.groupId { return named }
        return t.subscriptionGroupIdentifier.map { catalogNameOfAppleGroup[$0] ?? $0 }
    }
}
