extension SubscriptionStatus {
    /// The entitlement a subscription serves: its group (`groupId`), shared by every store and provider that sells the
    /// group's products; a subscription outside any group of the catalog serves its product.
    public var entitlement: String { groupId ?? productId }
}

extension CustomerStatus {
    /// What the customer has access to now, by entitlement — a subscription group, a non-consumable's or an active
    /// pass's product ID — with the sources serving it (`PurchaseSource`: `appStore`, `googlePlay`, providers). A
    /// subscription serves while entitled (subscribed or in its grace period). `entitlement.granted` is told when a key
    /// appears, `entitlement.revoked` when it goes: the first source to serve it, the last to stop.
    public var entitlementSources: [String: Set<String>] {
        var out: [String: Set<String>] = [:]
        for s in subscriptions where s.state.isEntitled { out[s.entitlement, default: []].insert(s.source) }
        for n in nonConsumables { out[n.productId, default: []].insert(n.source) }
        for p in nonRenewing where p.active { out[p.productId, default: []].insert(p.source) }
        return out
    }

    /// Whether an entitlement is a subscription group's (or a subscription's) of this customer, not a product's.
    public func isSubscriptionEntitlement(_ entitlement: String) -> Bool {
        subscriptions.contains { $0.entitlement == entitlement }
    }
}
