/// What a purchase grants, decided once for every source (the app, a notification, a restore, a receipt, a
/// purchase outside the App Store): coins for a consumable — paid coins × quantity plus the configured bonus as
/// free coins — or an entitlement to the product otherwise.
public enum PurchaseGrant: Sendable, Hashable {
    case coins(paid: Int64, free: Int64)
    case entitlement(Entitlement)

    public struct Entitlement: Sendable, Hashable {
        public var productId: String
        public var kind: ProductKind
        public var originalTransactionId: String
        /// Auto-renewables: the transaction's `expiresDate` (nil if Apple sent none); non-renewing passes:
        /// purchase date + the catalog's length; non-consumables: nil (they never expire).
        public var expiresAtMs: Int64?
        /// Whether an expiry belongs in the answer at all (auto-renewables always show one, even null).
        var showsExpiry: Bool

        public init(productId: String, kind: ProductKind, originalTransactionId: String, expiresAtMs: Int64?) {
            precondition(kind != .consumable, "a consumable grants coins, not an entitlement")
            self.productId = productId
            self.kind = kind
            self.originalTransactionId = originalTransactionId
            self.expiresAtMs = expiresAtMs
            self.showsExpiry = kind == .autoRenewable || expiresAtMs != nil
        }
    }

    /// The grant of `quantity` units of `product` bought at `purchaseDateMs` (an App Store transaction's fields,
    /// or a purchase outside the App Store, which names its own `expiresAtMs`).
    public static func of(_ product: Product, quantity: Int, originalTransactionId: String, purchaseDateMs: Int64,
                          expiresAtMs: Int64?) -> PurchaseGrant {
        switch product.kind {
        case .consumable:
            let credit = WalletRules.purchaseCredit(product: product, quantity: quantity)
            precondition(credit.paid >= 0 && credit.free >= 0, "a purchase never debits")
            return .coins(paid: credit.paid, free: credit.free)
        case .autoRenewable, .nonConsumable:
            return .entitlement(Entitlement(productId: product.productId, kind: product.kind,
                                            originalTransactionId: originalTransactionId, expiresAtMs: expiresAtMs))
        case .nonRenewing:
            let end = product.durationDays.map { purchaseDateMs + Int64($0) * 86_400_000 } ?? expiresAtMs
            return .entitlement(Entitlement(productId: product.productId, kind: product.kind,
                                            originalTransactionId: originalTransactionId, expiresAtMs: end))
        }
    }

    /// The grant of an App Store transaction.
    public static func of(_ product: Product, transaction tx: TransactionPayload) -> PurchaseGrant {
        of(product, quantity: tx.quantity, originalTransactionId: tx.originalTransactionId, purchaseDateMs: tx.purchaseDate,
           expiresAtMs: tx.expiresDate)
    }

    public var coins: (paid: Int64, free: Int64)? {
        if case .coins(let paid, let free) = self { return (paid, free) }
        return nil
    }

    /// The contract's `grant`: `{"coins": {"paid", "free"}}` or `{"entitlement": {"productId", "type",
    /// "originalTransactionId", "expiresAt"?}}`.
    public var json: JSONValue {
        switch self {
        case .coins(let paid, let free):
            return ["coins": ["paid": .int(paid), "free": .int(free)]]
        case .entitlement(let e):
            var o: [String: JSONValue] = ["productId": .string(e.productId), "type": .string(e.kind.rawValue),
                                          "originalTransactionId": .string(e.originalTransactionId)]
            if e.showsExpiry { o["expiresAt"] = Timestamp.rfc3339(e.expiresAtMs) }
            return ["entitlement": .object(o)]
        }
    }
}
