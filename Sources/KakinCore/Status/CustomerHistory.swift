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
        let transactions = Self.newestCopies(transactions, id: \.transactionId) {
            NewestCopy.isNewer($0.signedDate, $0.raw, than: $1.signedDate, $1.raw)
        }
        let renewalInfos = Self.newestCopies(renewalInfos, id: \.originalTransactionId) {
            NewestCopy.isNewer($0.signedDate, $0.raw, than: $1.signedDate, $1.raw)
        }
        var external: [String: ExternalEntitlement] = [:]
        for e in self.external {
            let key = e.source + "\u{0}" + e.id
            if let kept = external[key], kept.json.jsonString >= e.json.jsonString { continue }
            external[key] = e
        }
        return CustomerHistory(transactions: transactions, renewalInfos: renewalInfos,
                               external: external.values.sorted { ($0.source, $0.id) < ($1.source, $1.id) })
    }

    /// `deduplicated()` as a set: when no id repeats (a status read's inputs, one stored copy each), this history as it
    /// is, nothing copied or sorted. The engine's result never depends on the order of distinct copies.
    func distinct() -> CustomerHistory {
        func distinct(_ ids: [String]) -> Bool { Set(ids).count == ids.count }
        guard external.isEmpty, distinct(transactions.map(\.transactionId)), distinct(renewalInfos.map(\.originalTransactionId)) else {
            return deduplicated()
        }
        return self
    }

    /// The newest of the copies of each id, sorted by id. Sorts indices, not the copies (a payload is a large value,
    /// and a status read deduplicates on every read), then copies each kept one once.
    static func newestCopies<Payload>(_ copies: [Payload], id: (Payload) -> String, isNewer: (Payload, Payload) -> Bool) -> [Payload] {
        let ids = copies.map(id)
        let order = copies.indices.sorted { a, b in
            if ids[a] != ids[b] { return StatusOrder.idLess(ids[a], ids[b]) }
            return isNewer(copies[a], copies[b])
        }
        var kept: [Payload] = []
        kept.reserveCapacity(order.count)
        var keptId: String?
        for index in order where ids[index] != keptId {
            keptId = ids[index]
            kept.append(copies[index])
        }
        return kept
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
