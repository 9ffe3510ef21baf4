import KakinCore

/// One coin movement: the ledger entry and the balance change it causes, written together.
struct LedgerMovement {
    var entryId: String
    var customerId: String
    var atMs: Int64
    var kind: LedgerEntryKind
    var paid: Int64
    var free: Int64
    var reference: String
    /// Unique per App Store effect (purchase, refund, reversal): the database refuses a second entry with the
    /// same key. Spends and grants are unique by their idempotency key row instead.
    var effectKey: String?
    var item: String? = nil
    var recipient: String? = nil
    var priceMilli: Int64? = nil
    var currency: String? = nil
    var detail: JSONValue = .null
}

/// A stored answer for an `Idempotency-Key`: replayed byte for byte to a retry with the same request.
public struct IdempotentAnswer: Sendable, Hashable {
    public var status: Int
    public var body: [UInt8]
    /// True when this answer is a replay of an earlier one.
    public var replayed: Bool
}

public enum SpendResult: Sendable {
    case spent(spendId: String, amount: Int64, paidUsed: Int64, freeUsed: Int64, wallet: WalletBalance)
    case insufficient(wallet: WalletBalance)
}

public enum GrantResult: Sendable {
    case granted(entryId: String, amount: Int64, wallet: WalletBalance)
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

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "id": .string(id), "at": .string(Timestamp.rfc3339(atMs)), "kind": .string(kind),
            "paid": .int(paid), "free": .int(free), "balanceAfter": balanceAfter.json, "reference": .string(reference),
        ]
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
    static let problemsMax = 100

    public func wallet(_ customerId: String) async throws(KakinError) -> WalletBalance {
        try await read { db in try Self.walletBalance(db, customerId) }
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
        try db.execute("""
            INSERT INTO ledger_entries (entry_id, customer_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after,
                reference, effect_key, item, recipient, price_milli, currency, detail)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(m.entryId), .text(m.customerId), .integer(m.atMs), .text(m.kind.rawValue), .integer(m.paid),
                  .integer(m.free), .integer(after.paid), .integer(after.free), .text(m.reference), SQLValue(m.effectKey),
                  SQLValue(m.item), SQLValue(m.recipient), SQLValue(m.priceMilli), SQLValue(m.currency),
                  m.detail.isNull ? .null : .text(m.detail.jsonString)])
        return after
    }

    /// Runs `effect` once per key and stores its answer; a later call with the same key replays that answer
    /// (same request) or fails with 422 (another request), and runs no effect.
    ///
    /// The key is claimed first by an insert that does nothing when the key exists, and the answer filled in by
    /// an upsert of the claimed row: neither looks the key up through a snapshot, so on PostgreSQL neither takes
    /// an SSI read lock. A plain lookup of a new key would lock the whole index page where the key would go, and
    /// every concurrent write inserting another customer's key into that page would then count as a conflict
    /// (most of the serialization failures of concurrent grants, before). Two writers claiming the same key
    /// still exclude each other: the second waits for the first, then fails to serialize and runs again,
    /// seeing the stored answer. A body that throws after claiming rolls its claim back with its effect.
    static func idempotently(_ db: SQLConnection, customerId: String, scope: String, key: String, request: String, nowMs: Int64,
                             effect: () throws -> (status: Int, body: [UInt8])) throws -> IdempotentAnswer {
        let claimed = try db.queryOne("""
            INSERT INTO idempotency_keys (customer_id, scope, key, request, status, response, created_at_ms)
            VALUES (?, ?, ?, ?, 0, ?, ?) ON CONFLICT (customer_id, scope, key) DO NOTHING RETURNING status
            """, [.text(customerId), .text(scope), .text(key), .text(request), .blob([]), .integer(nowMs)]) != nil
        guard claimed else { return try storedAnswer(db, customerId: customerId, scope: scope, key: key, request: request) }
        let answer = try effect()
        try db.execute("""
            INSERT INTO idempotency_keys (customer_id, scope, key, request, status, response, created_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (customer_id, scope, key) DO UPDATE SET status = excluded.status, response = excluded.response
            """, [.text(customerId), .text(scope), .text(key), .text(request), .integer(Int64(answer.status)),
                  .blob(answer.body), .integer(nowMs)])
        return IdempotentAnswer(status: answer.status, body: answer.body, replayed: false)
    }

    /// The stored answer of a key that exists. Same request → replay; different request → 422.
    private static func storedAnswer(_ db: SQLConnection, customerId: String, scope: String, key: String, request: String) throws -> IdempotentAnswer {
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

    /// Spends coins under an idempotency key. `request` is the canonical request body (compared on replay);
    /// `render` turns the result into the HTTP answer that is stored and replayed.
    public func spend(customerId: String, idempotencyKey: String, request: String, amount: Int64, item: String,
                      recipient: String?, order: SpendOrder,
                      render: @escaping @Sendable (SpendResult) -> (status: Int, body: [UInt8])) async throws(KakinError) -> IdempotentAnswer {
        let now = clock.nowMs()
        let spendId = ids.id(prefix: "sp_")
        let entryId = ids.id(prefix: "le_")
        return try await write { db in
            try Self.idempotently(db, customerId: customerId, scope: "spend", key: idempotencyKey, request: request, nowMs: now) {
                let balance = try Self.walletBalance(db, customerId)
                guard let split = WalletRules.split(amount: amount, of: balance, order: order) else {
                    return render(.insufficient(wallet: balance))
                }
                let after = try Self.moveCoins(db, LedgerMovement(
                    entryId: entryId, customerId: customerId, atMs: now, kind: .spend, paid: -split.paid, free: -split.free,
                    reference: spendId, effectKey: nil, item: item, recipient: recipient))
                return render(.spent(spendId: spendId, amount: amount, paidUsed: split.paid, freeUsed: split.free, wallet: after))
            }
        }
    }

    /// Grants free coins under an idempotency key (campaigns, support goodwill).
    public func grant(customerId: String, idempotencyKey: String, request: String, amount: Int64, reason: String,
                      render: @escaping @Sendable (GrantResult) -> (status: Int, body: [UInt8])) async throws(KakinError) -> IdempotentAnswer {
        let now = clock.nowMs()
        let ids = ids
        let entryId = ids.id(prefix: "le_")
        return try await write { db in
            try Self.idempotently(db, customerId: customerId, scope: "grant", key: idempotencyKey, request: request, nowMs: now) {
                let after = try Self.moveCoins(db, LedgerMovement(
                    entryId: entryId, customerId: customerId, atMs: now, kind: .grant, paid: 0, free: amount,
                    reference: idempotencyKey, effectKey: nil, item: reason), creatingCustomerWith: ids.uuid)
                return render(.granted(entryId: entryId, amount: amount, wallet: after))
            }
        }
    }

    // MARK: Reading the ledger

    /// Newest first. The cursor is opaque to callers: `nextCursor` of one page continues after its last entry.
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
                SELECT seq, entry_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after, reference, item, recipient
                FROM ledger_entries WHERE customer_id = ? AND seq < ? ORDER BY seq DESC LIMIT ?
                """, [.text(customerId), .integer(before), .integer(Int64(limit + 1))])
            let entries = rows.prefix(limit).map { r in
                LedgerEntry(id: r.string("entry_id") ?? "", atMs: r.int("at_ms") ?? 0, kind: r.string("kind") ?? "",
                            paid: r.int("paid_delta") ?? 0, free: r.int("free_delta") ?? 0,
                            balanceAfter: WalletBalance(paid: r.int("paid_after") ?? 0, free: r.int("free_after") ?? 0),
                            reference: r.string("reference") ?? "", item: r.string("item"), recipient: r.string("recipient"))
            }
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
