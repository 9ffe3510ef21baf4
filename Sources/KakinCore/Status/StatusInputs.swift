/// Which of a customer's signed transactions `StatusEngine.evaluate` needs, so that reading a status loads a
/// bounded number of them however long the history: ten years of monthly renewals cost what one month does.
///
/// The engine reads the history only through extremes: each subscription instance's latest transaction
/// (state, expiry, offers, group), the latest one that names a group, one transaction per product and
/// Apple group (group names, introductory offers, "had an entitlement"), the first standing purchase of
/// each non-consumable and ownership type, and the last standing purchase of each non-renewing product.
/// So grouping transactions by `SelectionKey` and keeping the first and last of each group (the last only,
/// for auto-renewables) keeps everything it reads; `StatusEngine.evaluate` of any set between `select(h)`
/// and `h` equals `evaluate(h)`. The one rule that looks across instances, when an instance's latest
/// transaction was upgraded away (the takeover time), needs the whole history: `needsWholeHistory`.
/// A rule added to the engine that reads more (a count, a middle transaction) must widen the key or
/// `needsWholeHistory`; `StatusInputsTests` compares both ways of evaluating on random histories.
///
/// A pure function of the set of newest copies, like the engine, so storing the selection beside the
/// transactions never makes the status depend on the order they arrived in.
public enum StatusInputs {
    /// The one rule of which transactions a status can read at all: never a consumable (the wallet accounts for them).
    /// Storage turns it into SQL once (`KakinStore.statusInputTypes`).
    public static func canBeInput(_ type: AppleProductType) -> Bool { type != .consumable }

    /// The product types `canBeInput` refuses, as stored (`transactions.product_type`).
    public static let excludedTypes: [AppleProductType] = [.consumable]

    /// What makes two transactions interchangeable for the engine, apart from their order in time.
    public struct SelectionKey: Hashable, Sendable {
        var type: String
        /// The subscription instance (each has its own state); empty for non-consumables and passes, which
        /// count per product. An unknown Apple type is kept per instance too: the catalog may call it a
        /// subscription.
        var instance: String
        var productId: String
        var subscriptionGroupIdentifier: String?
        var offerType: Int?
        var offerIdentifier: String?
        var ownership: String
        /// Non-consumables and passes count only while they stand; a subscription's latest transaction is
        /// kept revoked or not.
        var revoked: Bool

        public init(_ t: TransactionPayload) {
            let subscription = t.type == .autoRenewable
            type = t.type.rawValue
            instance = t.type == .nonConsumable || t.type == .nonRenewing ? "" : t.originalTransactionId
            productId = t.productId
            subscriptionGroupIdentifier = t.subscriptionGroupIdentifier
            offerType = t.offerType?.rawValue
            offerIdentifier = t.offerIdentifier
            ownership = t.inAppOwnershipType.rawValue
            revoked = subscription ? false : t.isRevoked
        }
    }

    /// The ids of the transactions the engine needs out of `transactions` (the newest copy of each id, as
    /// stored; consumables are ignored, the engine doesn't count them).
    public static func select(_ transactions: [TransactionPayload]) -> Set<String> {
        var first: [SelectionKey: TransactionPayload] = [:]
        var last: [SelectionKey: TransactionPayload] = [:]
        for t in transactions where t.type != .consumable {
            let key = SelectionKey(t)
            if let kept = last[key] {
                if StatusOrder.purchasedBefore(kept, t) { last[key] = t }
            } else {
                last[key] = t
            }
            // A subscription instance's earlier transactions never decide anything (see the type's comment).
            guard t.type != .autoRenewable else { continue }
            if let kept = first[key] {
                if StatusOrder.purchasedBefore(t, kept) { first[key] = t }
            } else {
                first[key] = t
            }
        }
        return Set(last.values.map(\.transactionId)).union(first.values.map(\.transactionId))
    }

    /// Whether a newer copy of a selected transaction can replace it in the selection as it is: same key
    /// and same place in time. Otherwise the copies it stood for must be looked at again (`select` on
    /// the customer's whole history), since another transaction may now be the first or last of its key.
    public static func canReplace(_ selected: TransactionPayload, with copy: TransactionPayload) -> Bool {
        SelectionKey(selected) == SelectionKey(copy) && selected.purchaseDate == copy.purchaseDate
    }

    /// Whether `selected` (a selection from `select`) can't stand for the whole history: an instance's
    /// latest transaction was upgraded away, and the engine then looks for the time another instance of
    /// the group took over, which may be any of its transactions.
    public static func needsWholeHistory(_ selected: [TransactionPayload]) -> Bool {
        // Indices, not copies: a payload is a large value, and this runs on every status read.
        var latest: [String: Int] = [:]
        for (index, t) in selected.enumerated() where t.type == .autoRenewable {
            if let kept = latest[t.originalTransactionId], !StatusOrder.purchasedBefore(selected[kept], t) { continue }
            latest[t.originalTransactionId] = index
        }
        return latest.values.contains { selected[$0].isUpgraded }
    }
}
