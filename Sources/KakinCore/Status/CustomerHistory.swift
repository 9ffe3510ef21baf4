/// What the server holds about one customer: every signed transaction and renewal info copy it has stored,
/// in arrival order, with duplicates. `deduplicated()` turns it into a set, so that nothing computed from it
/// can depend on the order or the number of times a copy arrived.
public struct CustomerHistory: Sendable, Hashable {
    public var transactions: [TransactionPayload]
    public var renewalInfos: [RenewalInfoPayload]
    /// Entitlements bought outside the App Store (`ExternalEntitlement`), one per (source, id).
    public var external: [ExternalEntitlement]

    public init(transactions: [TransactionPayload] = [], renewalInfos: [RenewalInfoPayload] = [], external: [ExternalEntitlement] = []) {
        self.transactions = transactions
        self.renewalInfos = renewalInfos
        self.external = external
    }

    /// The newest signed copy of each `transactionId` and of each instance's renewal info (`NewestCopy`, the rule
    /// the stored copies follow too), sorted by id.
    public func deduplicated() -> CustomerHistory {
        var newestTransaction: [String: TransactionPayload] = [:]
        for t in transactions {
            if let kept = newestTransaction[t.transactionId], !NewestCopy.isNewer(t.signedDate, t.raw, than: kept.signedDate, kept.raw) {
                continue
            }
            newestTransaction[t.transactionId] = t
        }
        var newestRenewal: [String: RenewalInfoPayload] = [:]
        for r in renewalInfos {
            if let kept = newestRenewal[r.originalTransactionId], !NewestCopy.isNewer(r.signedDate, r.raw, than: kept.signedDate, kept.raw) {
                continue
            }
            newestRenewal[r.originalTransactionId] = r
        }
        var external: [String: ExternalEntitlement] = [:]
        for e in self.external {
            let key = e.source + "\u{0}" + e.id
            if let kept = external[key], kept.json.jsonString >= e.json.jsonString { continue }
            external[key] = e
        }
        return CustomerHistory(
            transactions: newestTransaction.values.sorted { StatusOrder.idLess($0.transactionId, $1.transactionId) },
            renewalInfos: newestRenewal.values.sorted { StatusOrder.idLess($0.originalTransactionId, $1.originalTransactionId) },
            external: external.values.sorted { ($0.source, $0.id) < ($1.source, $1.id) })
    }
}

/// Total orders the engine relies on; each ends in a field that is unique, so ties never fall to input order.
enum StatusOrder {
    /// Apple ids are decimal strings: compare them as numbers (shorter is smaller), anything else as text after them.
    static func idLess(_ a: String, _ b: String) -> Bool {
        let aDigits = !a.isEmpty && a.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        let bDigits = !b.isEmpty && b.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        if aDigits != bDigits { return aDigits }
        if aDigits {
            // ASCII digits: their bytes compare as the characters do (and count without walking graphemes).
            let a0 = a.utf8.drop { $0 == 0x30 }, b0 = b.utf8.drop { $0 == 0x30 }
            if a0.count != b0.count { return a0.count < b0.count }
            if !a0.elementsEqual(b0) { return a0.lexicographicallyPrecedes(b0) }
        }
        return a < b
    }

    /// Chronological order of an instance's transactions: purchase date, then id (unique after deduplication).
    static func purchasedBefore(_ a: TransactionPayload, _ b: TransactionPayload) -> Bool {
        if a.purchaseDate != b.purchaseDate { return a.purchaseDate < b.purchaseDate }
        if a.transactionId != b.transactionId { return idLess(a.transactionId, b.transactionId) }
        return a.signedDate < b.signedDate
    }
}
