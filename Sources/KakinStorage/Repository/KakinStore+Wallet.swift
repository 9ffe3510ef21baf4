import KakinCore

/// One coin movement: the ledger entry and the balance change it causes, written together.
public struct LedgerMovement: Sendable {
    public var entryId: String
    public var customerId: String
    public var atMs: Int64
    public var kind: LedgerEntryKind
    public var paid: Int64
    public var free: Int64
    public var reference: String
    /// Unique per App Store effect (purchase, refund, reversal): the database refuses a second entry with the
    /// same key. Spends and grants are unique by their idempotency key row instead.
    public var effectKey: String?
    public var item: String?
    public var recipient: String?
    public var priceMilli: Int64?
    public var currency: String?
    public var detail: JSONValue
    /// nil for the App Store's purchases (and anything not a purchase); else the provider that sold the coins.
    public var source: String?

    public init(entryId: String, customerId: String, atMs: Int64, kind: LedgerEntryKind, paid: Int64, free: Int64, reference: String,
                effectKey: String?, item: String? = nil, recipient: String? = nil, priceMilli: Int64? = nil, currency: String? = nil,
                detail: JSONValue = .null, source: String? = nil) {
        self.source = source
        self.entryId = entryId
        self.customerId = customerId
        self.atMs = atMs
        self.kind = kind
        self.paid = paid
        self.free = free
        self.reference = reference
        self.effectKey = effectKey
        self.item = item
        self.recipient = recipient
        self.priceMilli = priceMilli
        self.currency = currency
        self.detail = detail
    }
}

/// A stored answer for an `Idempotency-Key`: replayed byte for byte to a retry with the same request.
public struct IdempotentAnswer: Sendable, Hashable {
    public var status: Int
    public var body: [UInt8]
    /// True when this answer is a replay of an earlier one.
    public var replayed: Bool
}

/// An idempotent request's effect, decided from what the body read before anything is written: the answer to
/// store and replay, and the writes to make when the key is new.
public struct IdempotentEffect {
    public var status: Int
    public var body: [UInt8]
    public var apply: () throws -> Void

    public init(status: Int, body: [UInt8], apply: @escaping () throws -> Void) {
        self.status = status
        self.body = body
        self.apply = apply
    }
}

extension Records {
    /// Runs an effect once per `(customer, scope, key)` and stores its answer with the key, in ONE insert: a later
    /// call with the same key replays that answer (same request) or fails with 422 (another request), and writes
    /// nothing (Stripe's idempotency semantics).
    ///
    /// `decide` only reads; then the key is inserted with the answer (`ON CONFLICT DO NOTHING`), and only if it
    /// was new are the effect's writes made. The key is never looked up through a snapshot first, so on PostgreSQL a
    /// new key takes no SSI read lock on the index page where it goes (which made concurrent writes of other
    /// customers conflict). Two writers claiming the same key still exclude each other: the second waits for the
    /// first, then fails to serialize and runs again, seeing the stored answer.
    ///
    /// The claim goes with `executeLater`: on PostgreSQL it travels with the effect's writes and the write's next round
    /// trip, as if new; a key that was not (the claim changed no row) fails that round trip before anything commits, and
    /// the write runs again with the claim sent at once, which then answers the stored answer.
    public func idempotently(customerId: String, scope: String, key: String, request: String,
                             decide: () throws -> IdempotentEffect) throws -> IdempotentAnswer {
        let effect = try decide()
        var claim = WriteBatch()
        claim.add("""
            INSERT INTO idempotency_keys (customer_id, scope, key, request, status, response, created_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (customer_id, scope, key) DO NOTHING
            """, [.text(customerId), .text(scope), .text(key), .text(request), .integer(Int64(effect.status)), .blob(effect.body),
                  .integer(nowMs)], changes: 1)
        guard try db.executeLater(claim) else {
            return try KakinStore.storedAnswer(db, customerId: customerId, scope: scope, key: key, request: request)
        }
        try effect.apply()
        return IdempotentAnswer(status: effect.status, body: effect.body, replayed: false)
    }

    /// Moves coins decided from `before`, the balance this write read (`statusInputs`' wallet): the writes go into
    /// `batch` (`write` runs it); returns the balance after.
    public func moveCoins(_ movement: LedgerMovement, from before: WalletBalance, in batch: inout WriteBatch) -> WalletBalance {
        KakinStore.moveCoins(movement, from: before, in: &batch)
    }

    /// A customer this write read does not exist (`statusInputs` answered nil): its row, with a fresh `appAccountToken`,
    /// and its empty wallet go into `batch`; returns its status inputs as they will be.
    public func createCustomer(_ customerId: String, in batch: inout WriteBatch) -> CustomerSnapshot {
        let customer = KakinStore.createCustomer(customerId, token: ids.uuid(), nowMs: nowMs, in: &batch)
        return CustomerSnapshot(customer: customer, history: CustomerHistory(), wallet: WalletBalance())
    }

    /// Moves coins for a customer who may not exist yet (a grant to a new customer creates it, with its token);
    /// `createdCustomer` says whether it did.
    public func moveCoinsCreatingCustomer(_ movement: LedgerMovement) throws -> (balance: WalletBalance, createdCustomer: Bool) {
        var created = false
        let balance = try KakinStore.moveCoins(db, movement, creatingCustomerWith: { created = true; return ids.uuid() })
        return (balance, created)
    }
}

public struct LedgerEntry: Sendable, Hashable {
    public var id: String
    public var atMs: Int64
    public var kind: String
    public var paid: Int64
    public var free: Int64
    public var balanceAfter: WalletBalance
    public var reference: String
    public var item: String?
    public var recipient: String?
    /// The provider that sold the coins of a purchase, refund or reversal; nil for the App Store.
    public var source: String? = nil

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "at": .string(Timestamp.rfc3339(atMs)), "kind": .string(kind),
            "paid": .int(paid), "free": .int(free), "balanceAfter": balanceAfter.json, "reference": .string(reference),
        ]
        // A purchase's entries say where the coins were sold (the contract's `source`).
        if source != nil || kind == "purchase" || kind == "refund" || kind == "refundReversed" { o["source"] = .string(source ?? "appStore") }
        if let item { o["item"] = .string(item) }
        if let recipient { o["recipient"] = .string(recipient) }
        return .object(o)
    }
}

public struct LedgerPage: Sendable {
    public var entries: [LedgerEntry]
    public var nextCursor: String?
}

public struct RecipientSupport: Sendable {
    public var recipient: String
    public var paid: Int64
    public var free: Int64
    public var supporters: Int64
    public var topSupporters: [(customerId: String, coins: Int64)]

    public var json: JSONValue {
        ["recipient": .string(recipient), "coins": .int(paid + free), "paid": .int(paid), "free": .int(free),
         "supporters": .int(supporters),
         "topSupporters": .array(topSupporters.map { ["customerId": .string($0.customerId), "coins": .int($0.coins)] })]
    }
}

public struct LedgerCheckReport: Sendable {
    public var customers: Int64
    public var entries: Int64
    /// One line per problem found; empty when every balance equals the sum of its entries.
    public var problems: [String]
    public var ok: Bool { problems.isEmpty }

    public var json: JSONValue {
        ["ok": .bool(ok), "customers": .int(customers), "entries": .int(entries), "problems": .array(problems.map(JSONValue.string))]
    }
}

extension KakinStore {
    public func wallet(_ customerId: String) async throws(KakinError) -> WalletBalance {
        try await shortRead { db in try Self.walletBalance(db, customerId) }
    }

    static func walletBalance(_ db: SQLConnection, _ customerId: String) throws -> WalletBalance {
        guard let row = try db.queryOne("SELECT paid, free FROM wallets WHERE customer_id = ?", [.text(customerId)]) else {
            return WalletBalance()
        }
        return WalletBalance(paid: row.int("paid") ?? 0, free: row.int("free") ?? 0)
    }

    /// Writes the entry and moves the balance; returns the balance after. With `newCustomerToken`, a customer
    /// without a wallet is created first (with a token drawn only then) instead of failing: one statement
    /// fewer than checking for the customer before every movement.
    static func moveCoins(_ db: SQLConnection, _ m: LedgerMovement, creatingCustomerWith newCustomerToken: (() -> String)? = nil) throws
        -> WalletBalance
    {
        checkSigns(m)
        func updateWallet() throws -> SQLRow? {
            try db.queryOne(
                "UPDATE wallets SET paid = paid + ?, free = free + ?, updated_at_ms = ? WHERE customer_id = ? RETURNING paid, free",
                [.integer(m.paid), .integer(m.free), .integer(m.atMs), .text(m.customerId)])
        }
        var updated = try updateWallet()
        if updated == nil, let newCustomerToken {
            _ = try ensureCustomer(db, m.customerId, newToken: newCustomerToken, nowMs: m.atMs)
            updated = try updateWallet()
        }
        guard let row = updated else { throw KakinError(.internalError, detail: "no wallet for customer") }
        let after = WalletBalance(paid: row.int("paid") ?? 0, free: row.int("free") ?? 0)
        // Nothing reads its answer: on PostgreSQL it travels with the write's next round trip.
        var batch = WriteBatch()
        addLedgerEntry(m, after: after, to: &batch)
        try db.write(batch)
        return after
    }

    /// `moveCoins` for a write that read the balance (`before`) itself: the UPDATE, guarded by that balance, and the
    /// ledger entry go into `batch`; returns the balance after.
    static func moveCoins(_ m: LedgerMovement, from before: WalletBalance, in batch: inout WriteBatch) -> WalletBalance {
        checkSigns(m)
        let after = WalletBalance(paid: before.paid + m.paid, free: before.free + m.free)
        batch.add("UPDATE wallets SET paid = ?, free = ?, updated_at_ms = ? WHERE customer_id = ? AND paid = ? AND free = ?",
                  [.integer(after.paid), .integer(after.free), .integer(m.atMs), .text(m.customerId), .integer(before.paid),
                   .integer(before.free)], changes: 1)
        addLedgerEntry(m, after: after, to: &batch)
        return after
    }

    static func checkSigns(_ m: LedgerMovement) {
        switch m.kind {
        case .purchase, .grant, .refundReversed:
            precondition(m.paid >= 0 && m.free >= 0, "a \(m.kind) entry credits")
        case .spend, .refund:
            precondition(m.paid <= 0 && m.free <= 0, "a \(m.kind) entry debits")
        case .adjustment, .import:
            break
        }
    }

    static func addLedgerEntry(_ m: LedgerMovement, after: WalletBalance, to batch: inout WriteBatch) {
        batch.add("""
            INSERT INTO ledger_entries (entry_id, customer_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after,
                reference, effect_key, item, recipient, price_milli, currency, detail, source)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(m.entryId), .text(m.customerId), .integer(m.atMs), .text(m.kind.rawValue), .integer(m.paid),
                  .integer(m.free), .integer(after.paid), .integer(after.free), .text(m.reference), SQLValue(m.effectKey),
                  SQLValue(m.item), SQLValue(m.recipient), SQLValue(m.priceMilli), SQLValue(m.currency),
                  m.detail.isNull ? .null : .text(m.detail.jsonString), SQLValue(m.source)], changes: 1)
    }

    /// The stored answer of a key that exists. Same request → replay; different request → 422.
    static func storedAnswer(_ db: SQLConnection, customerId: String, scope: String, key: String, request: String) throws -> IdempotentAnswer {
        guard let row = try db.queryOne(
            "SELECT request, status, response FROM idempotency_keys WHERE customer_id = ? AND scope = ? AND key = ?",
            [.text(customerId), .text(scope), .text(key)]) else {
            throw KakinError(.internalError, detail: "\(scope) key claimed but not stored")
        }
        guard row.string("request") == request else {
            throw KakinError(.idempotencyKeyReused, detail: "\(scope) key reused with another body")
        }
        return IdempotentAnswer(status: Int(row.int("status") ?? 500), body: row.bytes("response") ?? [], replayed: true)
    }

    // MARK: Reading the ledger

    /// Newest first. The cursor is opaque to callers: `nextCursor` of one page continues after its last entry.
    static func ledgerEntry(_ r: SQLRow) -> LedgerEntry {
        LedgerEntry(id: r.string("entry_id") ?? "", atMs: r.int("at_ms") ?? 0, kind: r.string("kind") ?? "",
                    paid: r.int("paid_delta") ?? 0, free: r.int("free_delta") ?? 0,
                    balanceAfter: WalletBalance(paid: r.int("paid_after") ?? 0, free: r.int("free_after") ?? 0),
                    reference: r.string("reference") ?? "", item: r.string("item"), recipient: r.string("recipient"),
                    source: r.string("source"))
    }

    public func ledger(customerId: String, limit: Int, cursor: String?) async throws(KakinError) -> LedgerPage {
        var beforeSeq = Int64.max
        if let cursor {
            guard let bytes = Base64.decode(cursor), let text = String(validating: bytes, as: UTF8.self),
                  text.hasPrefix("le:"), let seq = Int64(text.dropFirst(3)), seq > 0 else {
                throw KakinError(.invalidCursor)
            }
            beforeSeq = seq
        }
        let before = beforeSeq
        return try await read { db in
            let rows = try db.query("""
                SELECT seq, entry_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after, reference, item, recipient, source
                FROM ledger_entries WHERE customer_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?
                """, [.text(customerId), .integer(before), .integer(Int64(limit + 1))])
            let entries = rows.prefix(limit).map(Self.ledgerEntry)
            var next: String?
            if rows.count > limit, let last = rows.prefix(limit).last?.int("seq") {
                next = Base64.urlEncode(Array("le:\(last)".utf8))
            }
            return LedgerPage(entries: Array(entries), nextCursor: next)
        }
    }

    public func recipientSupport(_ recipient: String, top: Int) async throws(KakinError) -> RecipientSupport {
        try await read { db in
            let totals = try db.queryOne("""
                SELECT COALESCE(SUM(-paid_delta), 0) AS paid, COALESCE(SUM(-free_delta), 0) AS free,
                       COUNT(DISTINCT customer_id) AS supporters
                FROM ledger_entries WHERE recipient = ? AND kind = 'spend'
                """, [.text(recipient)])
            let rows = try db.query("""
                SELECT customer_id, SUM(-(paid_delta + free_delta)) AS coins FROM ledger_entries
                WHERE recipient = ? AND kind = 'spend' GROUP BY customer_id ORDER BY coins DESC, customer_id LIMIT ?
                """, [.text(recipient), .integer(Int64(top))])
            return RecipientSupport(recipient: recipient, paid: totals?.int("paid") ?? 0, free: totals?.int("free") ?? 0,
                                    supporters: totals?.int("supporters") ?? 0,
                                    topSupporters: rows.map { ($0.string("customer_id") ?? "", $0.int("coins") ?? 0) })
        }
    }

    /// Proves, on one consistent snapshot, that every balance equals the sum of its ledger entries and that
    /// each entry's `balanceAfter` follows from the one before it.
    public func checkLedger() async throws(KakinError) -> LedgerCheckReport {
        try await read { db in
            var problems: [String] = []
            let sums = try db.query("""
                SELECT w.customer_id AS customer_id, w.paid AS paid, w.free AS free,
                       COALESCE(SUM(l.paid_delta), 0) AS paid_sum, COALESCE(SUM(l.free_delta), 0) AS free_sum
                FROM wallets w LEFT JOIN ledger_entries l ON l.customer_id = w.customer_id
                GROUP BY w.customer_id, w.paid, w.free
                HAVING w.paid <> COALESCE(SUM(l.paid_delta), 0) OR w.free <> COALESCE(SUM(l.free_delta), 0)
                LIMIT ?
                """, [.integer(Int64(Self.problemsMax))])
            for r in sums {
                problems.append("customer \(r.string("customer_id") ?? "?"): balance paid \(r.int("paid") ?? 0) free \(r.int("free") ?? 0) but entries sum to paid \(r.int("paid_sum") ?? 0) free \(r.int("free_sum") ?? 0)")
            }
            let orphans = try db.query("""
                SELECT DISTINCT l.customer_id AS customer_id FROM ledger_entries l
                LEFT JOIN wallets w ON w.customer_id = l.customer_id WHERE w.customer_id IS NULL LIMIT ?
                """, [.integer(Int64(Self.problemsMax))])
            for r in orphans { problems.append("customer \(r.string("customer_id") ?? "?"): ledger entries without a wallet") }
            let breaks = try db.query("""
                SELECT customer_id, entry_id FROM (
                    SELECT customer_id, entry_id, paid_after - paid_delta AS paid_before, free_after - free_delta AS free_before,
                           LAG(paid_after, 1, 0) OVER (PARTITION BY customer_id ORDER BY seq) AS prev_paid,
                           LAG(free_after, 1, 0) OVER (PARTITION BY customer_id ORDER BY seq) AS prev_free
                    FROM ledger_entries) chain
                WHERE paid_before <> prev_paid OR free_before <> prev_free LIMIT ?
                """, [.integer(Int64(Self.problemsMax))])
            for r in breaks {
                problems.append("customer \(r.string("customer_id") ?? "?"): entry \(r.string("entry_id") ?? "?") does not follow from the entry before it")
            }
            let counts = try db.queryOne("SELECT (SELECT COUNT(*) FROM wallets) AS customers, (SELECT COUNT(*) FROM ledger_entries) AS entries", [])
            return LedgerCheckReport(customers: counts?.int("customers") ?? 0, entries: counts?.int("entries") ?? 0,
                                     problems: Array(problems.prefix(Self.problemsMax)))
        }
    }
}
