import KakinCore

public struct PurchaseApplication: Sendable {
    public var customerId: String
    public var transaction: TransactionPayload
    public var jws: String
    public var product: Product
    /// Which path presented it: `client`, `notification`, `restore`.
    public var via: String
    public var purchaseProcessId: String?
    public var transferPolicy: TransferPolicy
    public var walletPolicy: WalletPolicy
    /// The App Store Server API is configured for the transaction's app: linking a purchase that carries no
    /// `appAccountToken` (made outside the app) schedules Set App Account Token with the customer's.
    public var setsAppAccountToken: Bool

    public init(customerId: String, transaction: TransactionPayload, jws: String, product: Product, via: String,
                purchaseProcessId: String? = nil, transferPolicy: TransferPolicy = .keepFirstOwner,
                walletPolicy: WalletPolicy = WalletPolicy(), setsAppAccountToken: Bool = false) {
        self.customerId = customerId
        self.transaction = transaction
        self.jws = jws
        self.product = product
        self.via = via
        self.purchaseProcessId = purchaseProcessId
        self.transferPolicy = transferPolicy
        self.walletPolicy = walletPolicy
        self.setsAppAccountToken = setsAppAccountToken
    }
}

public struct AppliedPurchase: Sendable, Hashable {
    public var transactionId: String
    public var customerId: String
    /// `{"coins": {"paid": N, "free": M}}` for a consumable, `{"entitlement": {…}}` otherwise.
    public var grant: JSONValue
    public var appliedAtMs: Int64
}

public enum PurchaseOutcome: Sendable, Hashable {
    /// First time: 201.
    case applied(AppliedPurchase)
    /// Applied before, by any path: 409 with the same fields.
    case alreadyProcessed(AppliedPurchase)
    /// Refunded or revoked before it was ever applied: nothing is granted (422), but the transaction is
    /// kept and linked to the customer, whose status then shows the revocation whatever order the
    /// purchase and its refund arrive in.
    case revoked(revocationDateMs: Int64)
}

extension KakinStore {
    /// Applies a verified transaction for a customer exactly once. The claim on `transaction_id`, the
    /// coins and the ledger entry commit in one database transaction: a crash or a concurrent duplicate can
    /// never credit twice or acknowledge without crediting.
    public func applyPurchase(_ request: PurchaseApplication) async throws(KakinError) -> PurchaseOutcome {
        let now = clock.nowMs()
        let ids = ids
        return try await write { db in
            try Self.applyPurchase(db, request, nowMs: now, ids: ids)
        }
    }

    static func applyPurchase(_ db: SQLConnection, _ r: PurchaseApplication, nowMs: Int64, ids: any IDGenerator) throws -> PurchaseOutcome {
        let tx = r.transaction
        let customer = try ensureCustomer(db, r.customerId, newToken: ids.uuid, nowMs: nowMs)
        try storeTransaction(db, tx, jws: r.jws, nowMs: nowMs)
        try linkOwnership(db, tx, customerId: r.customerId, policy: r.transferPolicy, nowMs: nowMs)
        // Apple takes the token for the purchaser's own copy only (not a family member's).
        if r.setsAppAccountToken, (tx.appAccountToken ?? "").isEmpty, tx.inAppOwnershipType != .familyShared {
            try scheduleAppAccountToken(db, tx, customer: customer, nowMs: nowMs)
        }

        if let existing = try appliedPurchase(db, tx.transactionId) {
            try reconcileRefunds(db, tx.transactionId, policy: r.walletPolicy, nowMs: nowMs, entryId: ids.id(prefix: "le_"))
            return .alreadyProcessed(existing)
        }
        // The newest stored copy decides (a refund may have arrived before the purchase was presented).
        if let revokedAt = try storedRevocationDate(db, tx.transactionId) {
            return .revoked(revocationDateMs: revokedAt)
        }

        var grant: JSONValue
        switch r.product.kind {
        case .consumable:
            let credit = WalletRules.purchaseCredit(product: r.product, quantity: tx.quantity)
            grant = ["coins": ["paid": .int(credit.paid), "free": .int(credit.free)]]
        case .nonConsumable, .nonRenewing, .autoRenewable:
            var e: [String: JSONValue] = ["productId": .string(tx.productId), "type": .string(r.product.kind.rawValue),
                                          "originalTransactionId": .string(tx.originalTransactionId)]
            if r.product.kind == .autoRenewable { e["expiresAt"] = Timestamp.rfc3339(tx.expiresDate) }
            if r.product.kind == .nonRenewing, let days = r.product.durationDays {
                e["expiresAt"] = .string(Timestamp.rfc3339(tx.purchaseDate + Int64(days) * 86_400_000))
            }
            grant = ["entitlement": .object(e)]
        }
        let claimed = try db.execute("""
            INSERT INTO applied_transactions (transaction_id, customer_id, applied_at_ms, via, purchase_process_id, grant_json)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (transaction_id) DO NOTHING
            """, [.text(tx.transactionId), .text(r.customerId), .integer(nowMs), .text(r.via), SQLValue(r.purchaseProcessId),
                  .text(grant.jsonString)])
        if claimed == 0, let existing = try appliedPurchase(db, tx.transactionId) { return .alreadyProcessed(existing) }

        if r.product.kind == .consumable {
            let credit = WalletRules.purchaseCredit(product: r.product, quantity: tx.quantity)
            var detail: [String: JSONValue] = ["productId": .string(tx.productId), "quantity": .int(Int64(tx.quantity)), "via": .string(r.via)]
            if let p = r.purchaseProcessId { detail["purchaseProcessId"] = .string(p) }
            _ = try moveCoins(db, LedgerMovement(
                entryId: ids.id(prefix: "le_"), customerId: r.customerId, atMs: nowMs, kind: .purchase, paid: credit.paid, free: credit.free,
                reference: tx.transactionId, effectKey: "purchase:\(tx.transactionId)",
                priceMilli: tx.price, currency: tx.currency, detail: .object(detail)))
        }
        try recordEvent(db, customerId: r.customerId, atMs: nowMs, kind: "purchase.applied", reference: tx.transactionId,
                        detail: ["productId": .string(tx.productId), "via": .string(r.via), "grant": grant,
                                 "purchaseProcessId": .string(r.purchaseProcessId)])
        return .applied(AppliedPurchase(transactionId: tx.transactionId, customerId: r.customerId, grant: grant, appliedAtMs: nowMs))
    }

    static func appliedPurchase(_ db: SQLConnection, _ transactionId: String) throws -> AppliedPurchase? {
        guard let row = try db.queryOne(
            "SELECT customer_id, applied_at_ms, grant_json FROM applied_transactions WHERE transaction_id = ?",
            [.text(transactionId)]) else { return nil }
        let grant = (try? JSONParser.parse(row.string("grant_json") ?? "null")) ?? .null
        return AppliedPurchase(transactionId: transactionId, customerId: row.string("customer_id") ?? "", grant: grant,
                               appliedAtMs: row.int("applied_at_ms") ?? 0)
    }

    /// Keeps the newest signed copy of each transaction (by `signedDate`; equal dates by the JWS text), so
    /// arrival order never matters.
    static func storeTransaction(_ db: SQLConnection, _ tx: TransactionPayload, jws: String, nowMs: Int64) throws {
        let previous = tx.type == .consumable ? nil : try storedTransactionRow(db, tx.transactionId)
        let stored = try db.execute("""
            INSERT INTO transactions (transaction_id, original_transaction_id, bundle_id, product_id, product_type, environment,
                purchase_date_ms, expires_date_ms, revocation_date_ms, signed_date_ms, app_account_token, jws, customer_id,
                first_seen_ms, updated_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                    (SELECT customer_id FROM original_links WHERE original_transaction_id = ?), ?, ?)
            ON CONFLICT (transaction_id) DO UPDATE SET
                purchase_date_ms = excluded.purchase_date_ms, expires_date_ms = excluded.expires_date_ms,
                revocation_date_ms = excluded.revocation_date_ms, signed_date_ms = excluded.signed_date_ms,
                app_account_token = excluded.app_account_token, jws = excluded.jws, updated_ms = excluded.updated_ms
            WHERE excluded.signed_date_ms > transactions.signed_date_ms
               OR (excluded.signed_date_ms = transactions.signed_date_ms AND excluded.jws > transactions.jws)
            """, [.text(tx.transactionId), .text(tx.originalTransactionId), .text(tx.bundleId), .text(tx.productId),
                  .text(tx.type.rawValue), .text(tx.environment.rawValue), .integer(tx.purchaseDate), SQLValue(tx.expiresDate),
                  SQLValue(tx.revocationDate), .integer(tx.signedDate), SQLValue(tx.appAccountToken), .text(jws),
                  .text(tx.originalTransactionId), .integer(nowMs), .integer(nowMs)])
        if stored > 0 { try statusInputsAfterStoring(db, tx, previous: previous) }
    }

    /// Links the transaction's subscription/purchase chain (`originalTransactionId`) to the customer, or
    /// refuses per the transfer policy when its app account token or original transaction belongs to another.
    static func linkOwnership(_ db: SQLConnection, _ tx: TransactionPayload, customerId: String, policy: TransferPolicy,
                              nowMs: Int64) throws {
        var otherOwner: String?
        if let token = tx.appAccountToken, let owner = try customerOwningToken(db, token), owner != customerId {
            otherOwner = owner
        }
        let linked = try db.queryOne("SELECT customer_id FROM original_links WHERE original_transaction_id = ?",
                                     [.text(tx.originalTransactionId)])?.string("customer_id")
        if otherOwner == nil, let linked, linked != customerId { otherOwner = linked }

        if let otherOwner {
            guard policy == .transfer else {
                throw KakinError(.belongsToAnotherCustomer,
                                 detail: "original transaction \(tx.originalTransactionId) is linked to another customer")
            }
            let detail: JSONValue = ["originalTransactionId": .string(tx.originalTransactionId), "from": .string(otherOwner),
                                     "to": .string(customerId)]
            try recordEvent(db, customerId: otherOwner, atMs: nowMs, kind: "ownership.transferredOut", reference: tx.originalTransactionId, detail: detail)
            try recordEvent(db, customerId: customerId, atMs: nowMs, kind: "ownership.transferredIn", reference: tx.originalTransactionId, detail: detail)
        }
        try db.execute("""
            INSERT INTO original_links (original_transaction_id, customer_id, linked_at_ms) VALUES (?, ?, ?)
            ON CONFLICT (original_transaction_id) DO UPDATE SET customer_id = excluded.customer_id, linked_at_ms = excluded.linked_at_ms
            WHERE original_links.customer_id <> excluded.customer_id
            """, [.text(tx.originalTransactionId), .text(customerId), .integer(nowMs)])
        let moved = try db.execute("""
            UPDATE transactions SET customer_id = ? WHERE original_transaction_id = ? AND (customer_id IS NULL OR customer_id <> ?)
            """, [.text(customerId), .text(tx.originalTransactionId), .text(customerId)])
        if moved > 0 { try statusInputsAfterLinking(db, originalTransactionId: tx.originalTransactionId, to: customerId, from: linked) }
    }

    static func storedRevocationDate(_ db: SQLConnection, _ transactionId: String) throws -> Int64? {
        try db.queryOne("SELECT revocation_date_ms FROM transactions WHERE transaction_id = ?", [.text(transactionId)])?
            .int("revocation_date_ms")
    }

    /// Brings a credited consumable's coins in line with the newest signed copy of its transaction: revoked
    /// → one outstanding refund entry taking the coins back; not revoked (a refund reversed) → refunds
    /// matched by reversals. Driven by the newest copy, not by which notification came last, so the
    /// final balance never depends on arrival order; each entry's effect key makes it happen once.
    static func reconcileRefunds(_ db: SQLConnection, _ transactionId: String, policy: WalletPolicy, nowMs: Int64, entryId: String) throws {
        guard let purchase = try db.queryOne(
                "SELECT customer_id, paid_delta, free_delta, price_milli, currency FROM ledger_entries WHERE effect_key = ?",
                [.text("purchase:\(transactionId)")]),
              let customerId = purchase.string("customer_id") else { return }
        let counts = try db.queryOne("""
            SELECT SUM(CASE WHEN kind = 'refund' THEN 1 ELSE 0 END) AS refunds,
                   SUM(CASE WHEN kind = 'refundReversed' THEN 1 ELSE 0 END) AS reversals
            FROM ledger_entries WHERE reference = ? AND customer_id = ? AND kind IN ('purchase', 'refund', 'refundReversed')
            """, [.text(transactionId), .text(customerId)])
        let refunds = counts?.int("refunds") ?? 0
        let reversals = counts?.int("reversals") ?? 0
        let revokedAt = try storedRevocationDate(db, transactionId)
        if let revokedAt, refunds == reversals {
            let balance = try walletBalance(db, customerId)
            let debit = WalletRules.refundDebit(paid: purchase.int("paid_delta") ?? 0, free: purchase.int("free_delta") ?? 0,
                                                of: balance, policy: policy)
            var detail: [String: JSONValue] = ["revocationDate": .int(revokedAt)]
            if debit.shortfall > 0 { detail["shortfall"] = .int(debit.shortfall) }
            _ = try moveCoins(db, LedgerMovement(
                entryId: entryId, customerId: customerId, atMs: nowMs, kind: .refund, paid: -debit.paid, free: -debit.free,
                reference: transactionId, effectKey: "refund:\(transactionId):\(refunds + 1)",
                priceMilli: purchase.int("price_milli").map { -$0 }, currency: purchase.string("currency"), detail: .object(detail)))
            try recordEvent(db, customerId: customerId, atMs: nowMs, kind: "purchase.refunded", reference: transactionId, detail: .object(detail))
        } else if revokedAt == nil, refunds > reversals,
                  // `kind IN (…)` repeats the partial index's condition so SQLite uses it.
                  let last = try db.queryOne("""
                      SELECT paid_delta, free_delta FROM ledger_entries
                      WHERE reference = ? AND customer_id = ? AND kind IN ('purchase', 'refund', 'refundReversed') AND kind = 'refund'
                      ORDER BY seq DESC LIMIT 1
                      """, [.text(transactionId), .text(customerId)]) {
            _ = try moveCoins(db, LedgerMovement(
                entryId: entryId, customerId: customerId, atMs: nowMs, kind: .refundReversed,
                paid: -(last.int("paid_delta") ?? 0), free: -(last.int("free_delta") ?? 0),
                reference: transactionId, effectKey: "refundReversed:\(transactionId):\(reversals + 1)",
                priceMilli: purchase.int("price_milli"), currency: purchase.string("currency")))
            try recordEvent(db, customerId: customerId, atMs: nowMs, kind: "purchase.refundReversed", reference: transactionId, detail: .null)
        }
    }
}
