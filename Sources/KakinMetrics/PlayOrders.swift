import KakinCore

/// Google Play's adapter for the numbers: the orders Kakin read (each order's newest read as the one apply kept it, a
/// `PurchaseFact`) → purchases counted under `source` "googlePlay" by the same rules as a provider's, with the entitlement
/// Play's state gives (`ExternalEntitlement` "googlePlay", the chain's id) deciding how a subscription ends.
///
/// What an order charged: a subscription order's line item's `autoRenewingPlan.recurringPrice` (a free trial's order
/// 0), the only price the Developer API's purchase reads give; an order without a price (a one-time product: productsv2
/// names none) is not counted as money, its coins still count from the ledger. A period starts at the token's
/// `startTime`, a renewal (`..N`, the same token) where the order before it expired. Refunds as Play voided them: in full
/// the price, a quantity-based one that share of it.
public enum PlayOrders {
    public static func purchases(_ orders: [PurchaseFact]) -> [ExternalPurchaseFact] {
        var out: [ExternalPurchaseFact] = []
        let chains = Dictionary(grouping: orders.filter { $0.store == .googlePlay }, by: \.chainId)
        for chainId in chains.keys.sorted() {
            let list = chains[chainId]!.sorted { ($0.purchasedAtMs, $0.expiresAtMs ?? 0, $0.periodId) < ($1.purchasedAtMs, $1.expiresAtMs ?? 0, $1.periodId) }
            var previous: PurchaseFact?
            for o in list {
                defer { previous = o }
                guard let milli = o.priceMilli, milli >= 0, let currency = o.currency, !currency.isEmpty else { continue }
                var start = o.purchasedAtMs
                if let p = previous, p.purchasedAtMs == o.purchasedAtMs, let end = p.expiresAtMs, end > start { start = end }
                let price = CurrencyUnits.minor(milli: milli, currency: currency)
                let subscription = o.storeKind == .autoRenewable
                out.append(ExternalPurchaseFact(
                    source: PlayPurchaseFacts.source, externalId: o.periodId, bundleId: o.appId, productId: o.productId,
                    kind: o.storeKind ?? .consumable, price: price, currency: currency, purchasedAtMs: start,
                    periodStartMs: subscription ? start : nil, expiresAtMs: subscription ? o.expiresAtMs : nil,
                    subscriptionId: subscription ? chainId : nil, refunds: o.revocation.map { [refund($0, price: price, quantity: o.quantity)] } ?? []))
            }
        }
        return out
    }

    /// What a revocation took back of an order's price.
    static func refund(_ r: PurchaseFact.Revocation, price: Int64, quantity: Int) -> ExternalPurchaseFact.Refund {
        let amount: Int64
        switch r.refund {
        case .full: amount = price
        case .quantity(let units): amount = price * Int64(min(units, quantity)) / Int64(max(quantity, 1))
        case .prorated(let shareMilli): amount = (price * Int64(shareMilli) + 50_000) / 100_000
        }
        return ExternalPurchaseFact.Refund(amount: amount, atMs: r.atMs)
    }
}
