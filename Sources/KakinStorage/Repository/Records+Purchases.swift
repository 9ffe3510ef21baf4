import KakinCore

/// A transaction applied to a customer: the 201/409 fact (`applied_transactions`, unique by transaction id).
public struct AppliedPurchase: Sendable, Hashable {
    public var transactionId: String
    public var customerId: String
    /// The contract's `grant` as it was answered the first time.
    public var grant: JSONValue
    public var appliedAtMs: Int64

    public init(transactionId: String, customerId: String, grant: JSONValue, appliedAtMs: Int64) {
        self.transactionId = transactionId
        self.customerId = customerId
        self.grant = grant
        self.appliedAtMs = appliedAtMs
    }
}

/// The stored copy of a transaction before a write (`Records.storedCopy`): what the plan decides from, and the row
/// whose status-input flag a replacement carries on.
public struct StoredTransactionCopy: Sendable {
    public var plan: IngestPlan.StoredCopy
    var row: KakinStore.StoredTransactionRow
    /// The customer the stored row belongs to (nil: nobody yet).
    public var customerId: String? { row.customerId }
}

/// An App Store transaction's chain as the one apply reads it before deciding (`Records.storedChain`).
public struct StoredChain: Sendable {
    /// The transaction's stored copy; nil if never stored.
    public var copy: StoredTransactionCopy?
    /// The customer the chain is linked to.
    public var linkOwner: String?
    /// The chain holds stored transactions besides this one.
    public var hasOtherTransactions: Bool
}

/// A credited consumable as its ledger tells it: who got the coins, what the purchase and its refunds moved.
public struct PurchaseLedger: Sendable, Hashable {
    public var customerId: String
    public var ledger: RefundReconciliation.Ledger
    public var priceMilli: Int64?
    public var currency: String?
}

extension Records {
    // MARK: Signed copies

    /// What the one apply reads of an App Store transaction's chain before deciding, in one statement: the transaction's
    /// stored copy as the plan needs it (`IngestPlan.StoredCopy`: its date, its JSON only when `signedAtMs` ties, its
    /// revocation) with the row a replacement keeps the status inputs from (nil if never stored), the customer the chain
    /// is linked to, and whether the chain holds stored transactions besides this one (what a new link has to move).
    public func storedChain(of tx: TransactionPayload) throws -> StoredChain {
        guard let row = try db.queryOne("""
            SELECT (SELECT customer_id FROM original_links WHERE original_transaction_id = ?) AS link_owner,
                   CASE WHEN EXISTS (SELECT 1 FROM transactions o WHERE o.original_transaction_id = ? AND o.transaction_id <> ?)
                       THEN 1 ELSE 0 END AS chain_others,
                   t.transaction_id AS transaction_id, t.customer_id AS customer_id, t.status_input AS status_input,
                   t.signed_date_ms AS signed_date_ms, t.revocation_date_ms AS revocation_date_ms,
                   CASE WHEN t.status_json IS NOT NULL THEN t.status_json WHEN t.revocation_date_ms IS NOT NULL THEN t.jws END AS payload,
                   CASE WHEN t.signed_date_ms = ? THEN t.jws END AS tied_jws
            FROM (SELECT 1 AS one) AS one LEFT JOIN transactions t ON t.transaction_id = ?
            """, [.text(tx.originalTransactionId), .text(tx.originalTransactionId), .text(tx.transactionId), .integer(tx.signedDate),
                  .text(tx.transactionId)]) else { preconditionFailure("a query over one row answers it") }
        var chain = StoredChain(copy: nil, linkOwner: row.string("link_owner"), hasOtherTransactions: row.int("chain_others") == 1)
        guard row.string("transaction_id") != nil else { return chain }
        let payload = row.string("payload")
        var revocation: PurchaseFact.Revocation?
        if row.int("revocation_date_ms") != nil, let stored = payload.flatMap(StoredStatusFields.transaction) {
            revocation = PurchaseFact.Revocation(appStore: stored)
        }
        chain.copy = StoredTransactionCopy(
            plan: IngestPlan.StoredCopy(signedAtMs: row.int("signed_date_ms") ?? 0, raw: row.string("tied_jws").flatMap(StoredJWS.payload),
                                        revocation: revocation),
            row: KakinStore.StoredTransactionRow(customerId: row.string("customer_id"), isStatusInput: row.int("status_input") != 0,
                                                 stored: payload ?? ""))
        return chain
    }

    /// Keeps `tx` as the stored copy of its transaction (the ingest's plan decided it is the newest: `NewestCopy`), with
    /// its decoded fields beside it (`StoredStatusFields`: what a status read and the business numbers' rollup read
    /// instead of the JWS; consumables too, which are never status inputs but which the rollup reads on every change of
    /// their customer), and keeps its customer's status inputs current. A new row belongs to `owner` when the caller decided it
    /// (the chain is being linked to them in the same write), else to its chain's link.
    public func keepTransaction(_ tx: TransactionPayload, jws: String, owner: String?, replacing previous: StoredTransactionCopy?) throws {
        try db.execute("""
            INSERT INTO transactions (transaction_id, original_transaction_id, bundle_id, product_id, product_type, environment,
                purchase_date_ms, expires_date_ms, revocation_date_ms, signed_date_ms, app_account_token, jws, status_json, customer_id,
                first_seen_ms, updated_ms, status_input)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                    COALESCE(?, (SELECT customer_id FROM original_links WHERE original_transaction_id = ?)), ?, ?, ?)
            ON CONFLICT (transaction_id) DO UPDATE SET
                purchase_date_ms = excluded.purchase_date_ms, expires_date_ms = excluded.expires_date_ms,
                revocation_date_ms = excluded.revocation_date_ms, signed_date_ms = excluded.signed_date_ms,
                app_account_token = excluded.app_account_token, jws = excluded.jws, status_json = excluded.status_json,
                updated_ms = excluded.updated_ms
            """, [.text(tx.transactionId), .text(tx.originalTransactionId), .text(tx.bundleId), .text(tx.productId),
                  .text(tx.type.rawValue), .text(tx.environment.rawValue), .integer(tx.purchaseDate), SQLValue(tx.expiresDate),
                  SQLValue(tx.revocationDate), .integer(tx.signedDate), SQLValue(tx.appAccountToken), .text(jws),
                  .text(StoredStatusFields.json(of: tx)), SQLValue(owner), .text(tx.originalTransactionId),
                  .integer(nowMs), .integer(nowMs), .integer(StatusInputs.canBeInput(tx.type) ? 1 : 0)])
        try KakinStore.statusInputsAfterStoring(db, tx, previous: previous?.row)
    }

    /// The stored renewal info of a subscription as the newest-copy rule needs it (its JSON only when `signedAtMs` ties).
    public func storedRenewalCopy(of info: RenewalInfoPayload) throws -> IngestPlan.StoredCopy? {
        guard let row = try db.queryOne("SELECT signed_date_ms FROM renewal_infos WHERE original_transaction_id = ?",
                                        [.text(info.originalTransactionId)]) else { return nil }
        let signedAtMs = row.int("signed_date_ms") ?? 0
        var raw: JSONValue?
        if signedAtMs == info.signedDate {
            raw = try db.queryOne("SELECT jws FROM renewal_infos WHERE original_transaction_id = ?", [.text(info.originalTransactionId)])?
                .string("jws").flatMap(StoredJWS.payload)
        }
        return IngestPlan.StoredCopy(signedAtMs: signedAtMs, raw: raw, revocation: nil)
    }

    /// Keeps `info` as its subscription's renewal info (the caller decided it is the newest: `NewestCopy`).
    public func keepRenewalInfo(_ info: RenewalInfoPayload, jws: String) throws {
        try db.execute("""
            INSERT INTO renewal_infos (original_transaction_id, signed_date_ms, environment, jws, status_json, updated_ms)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (original_transaction_id) DO UPDATE SET signed_date_ms = excluded.signed_date_ms,
                environment = excluded.environment, jws = excluded.jws, status_json = excluded.status_json, updated_ms = excluded.updated_ms
            """, [.text(info.originalTransactionId), .integer(info.signedDate), .text(info.environment.rawValue), .text(jws),
                  .text(StoredStatusFields.json(of: info)), .integer(nowMs)])
    }

    /// The stored (newest) copy of a transaction, decoded from its status fields; nil if never stored.
    public func storedTransaction(_ transactionId: String) throws -> TransactionPayload? {
        try db.queryOne("SELECT COALESCE(status_json, jws) AS payload FROM transactions WHERE transaction_id = ?", [.text(transactionId)])?
            .string("payload").flatMap(StoredStatusFields.transaction)
    }

    // MARK: Ownership

    /// The account token a chain's stored copies carry (the first one stored with one), if any: what `Ownership` asks
    /// of a chain that is not linked yet.
    public func chainAccountToken(originalTransactionId: String) throws -> String? {
        try db.queryOne("""
            SELECT app_account_token FROM transactions WHERE original_transaction_id = ? AND app_account_token IS NOT NULL
            ORDER BY purchase_date_ms, transaction_id LIMIT 1
            """, [.text(originalTransactionId)])?.string("app_account_token")
    }

    /// The customer a purchase chain is linked to, if any.
    public func linkOwner(originalTransactionId: String) throws -> String? {
        try db.queryOne("SELECT customer_id FROM original_links WHERE original_transaction_id = ?",
                        [.text(originalTransactionId)])?.string("customer_id")
    }

    /// Carries out an ownership decision for the chain of `tx`: links it (or moves it, recording the transfer in
    /// both timelines) and moves its stored transactions with it. `refuse` and `unclaimed` store nothing here.
    /// Returns whether the chain's link changed (new, or moved).
    /// - Parameters:
    ///   - linkedBefore: the chain's link as the caller read it in this write (`linkOwner`).
    ///   - rowsOwner: the customer every stored transaction of the chain belongs to, when the caller knows it (the chain's
    ///     one transaction, stored in this write for the customer it is linked to now): then there is nothing to move.
    @discardableResult
    public func apply(_ decision: Ownership.Decision, for tx: TransactionPayload, linkedBefore linked: String?, rowsOwner: String? = nil) throws -> Bool {
        guard let customerId = try link(decision, chainId: tx.originalTransactionId, linkedBefore: linked) else { return false }
        if rowsOwner == customerId { return true }
        let moved = try db.execute("""
            UPDATE transactions SET customer_id = ? WHERE original_transaction_id = ? AND (customer_id IS NULL OR customer_id <> ?)
            """, [.text(customerId), .text(tx.originalTransactionId), .text(customerId)])
        if moved > 0, StatusInputs.canBeInput(tx.type) {
            try KakinStore.statusInputsAfterLinking(db, originalTransactionId: tx.originalTransactionId, to: customerId, from: linked)
        }
        return true
    }

    /// Carries out an ownership decision for any store's chain (`original_links`, keyed by the chain's id): links it, or
    /// moves it (recording the transfer in both timelines). Returns the customer when the link changed (new, or moved);
    /// the caller moves the store's own rows with it.
    func link(_ decision: Ownership.Decision, chainId: String, linkedBefore linked: String?) throws -> String? {
        let customerId: String
        switch decision {
        case .refuse, .unclaimed:
            return nil
        case .link(let c):
            customerId = c
        case .transfer(let from, let to):
            precondition(from != to, "a transfer moves a chain between two customers")
            customerId = to
            let detail: JSONValue = ["originalTransactionId": .string(chainId), "from": .string(from), "to": .string(to)]
            try recordTimeline(customerId: from, kind: "ownership.transferredOut", reference: chainId, detail: detail)
            try recordTimeline(customerId: to, kind: "ownership.transferredIn", reference: chainId, detail: detail)
        }
        // A chain linked to this customer before has every row already theirs (rows stored since took the link).
        if linked == customerId { return nil }
        let changed = try db.execute("""
            INSERT INTO original_links (original_transaction_id, customer_id, linked_at_ms) VALUES (?, ?, ?)
            ON CONFLICT (original_transaction_id) DO UPDATE SET customer_id = excluded.customer_id, linked_at_ms = excluded.linked_at_ms
            WHERE original_links.customer_id <> excluded.customer_id
            """, [.text(chainId), .text(customerId), .integer(nowMs)])
        return changed > 0 ? customerId : nil
    }

    /// Schedules Set App Account Token for a purchase made outside the app (it carries no token) now linked to
    /// `customer` (see `KakinStore+AppAccountTokens.swift`).
    public func scheduleAppAccountToken(for tx: TransactionPayload, customer: KakinStore.Customer) throws {
        try KakinStore.scheduleAppAccountToken(db, tx, customer: customer, nowMs: nowMs)
    }

    // MARK: The 201/409 fact

    public func appliedPurchase(_ transactionId: String) throws -> AppliedPurchase? {
        guard let row = try db.queryOne(
            "SELECT customer_id, applied_at_ms, grant_json FROM applied_transactions WHERE transaction_id = ?",
            [.text(transactionId)]) else { return nil }
        let grant = (try? JSONParser.parse(row.string("grant_json") ?? "null")) ?? .null
        return AppliedPurchase(transactionId: transactionId, customerId: row.string("customer_id") ?? "", grant: grant,
                               appliedAtMs: row.int("applied_at_ms") ?? 0)
    }

    /// Claims the transaction id for `applied` (the unique key that makes a purchase apply once). False: it was
    /// claimed before (by any path, process or thread), and nothing was written.
    public func claimPurchase(_ applied: AppliedPurchase, via: String, purchaseProcessId: String?) throws -> Bool {
        try db.execute("""
            INSERT INTO applied_transactions (transaction_id, customer_id, applied_at_ms, via, purchase_process_id, grant_json)
            VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (transaction_id) DO NOTHING
            """, [.text(applied.transactionId), .text(applied.customerId), .integer(applied.appliedAtMs), .text(via),
                  SQLValue(purchaseProcessId), .text(applied.grant.jsonString)]) > 0
    }

    // MARK: Coins of a purchase

    /// `purchaseLedger`'s count of a purchase's refunds and reversals.
    static let purchaseEntryCountsSQL = """
        SELECT SUM(CASE WHEN kind = 'refund' THEN 1 ELSE 0 END) AS refunds,
               SUM(CASE WHEN kind = 'refundReversed' THEN 1 ELSE 0 END) AS reversals
        FROM ledger_entries WHERE reference = ? AND customer_id = ? AND \(Schema.purchaseLedgerKinds)
        """
    /// `purchaseLedger`'s last refund of a purchase.
    static let lastRefundSQL = """
        SELECT paid_delta, free_delta FROM ledger_entries
        WHERE reference = ? AND customer_id = ? AND \(Schema.purchaseLedgerKinds) AND kind = 'refund'
        ORDER BY seq DESC LIMIT 1
        """

    /// The coins a consumable credited and its refunds and reversals so far; nil if it credited nothing.
    public func purchaseLedger(_ transactionId: String) throws -> PurchaseLedger? {
        guard let purchase = try db.queryOne(
                "SELECT customer_id, paid_delta, free_delta, price_milli, currency FROM ledger_entries WHERE effect_key = ?",
                [.text("purchase:\(transactionId)")]),
              let customerId = purchase.string("customer_id") else { return nil }
        // `Schema.purchaseLedgerKinds` repeats the partial index's condition so SQLite uses it.
        let counts = try db.queryOne(Self.purchaseEntryCountsSQL, [.text(transactionId), .text(customerId)])
        let refunds = Int(counts?.int("refunds") ?? 0)
        let reversals = Int(counts?.int("reversals") ?? 0)
        var lastRefund: WalletBalance?
        if refunds > 0, let last = try db.queryOne(Self.lastRefundSQL, [.text(transactionId), .text(customerId)]) {
            lastRefund = WalletBalance(paid: last.int("paid_delta") ?? 0, free: last.int("free_delta") ?? 0)
        }
        return PurchaseLedger(
            customerId: customerId,
            ledger: RefundReconciliation.Ledger(creditedPaid: purchase.int("paid_delta") ?? 0, creditedFree: purchase.int("free_delta") ?? 0,
                                                refunds: refunds, reversals: reversals, lastRefund: lastRefund),
            priceMilli: purchase.int("price_milli"), currency: purchase.string("currency"))
    }
}
