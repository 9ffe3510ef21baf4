import KakinCore

/// Everything the status engine needs about one customer, read on one snapshot.
public struct CustomerSnapshot: Sendable {
    public var customer: KakinStore.Customer
    /// The newest stored copy of each of the customer's entitlement transactions (not consumables, which
    /// never make a customer active; the wallet accounts for them) and the newest renewal info of each of its
    /// subscriptions, decoded from their stored status fields (`StoredStatusFields`; verified when stored).
    public var history: CustomerHistory
    public var wallet: WalletBalance
    /// The customer's last event sequence (0 before the first): the status's `version`.
    public var version: Int64 = 0
    /// What the customer's events last told of its status (`outbox_heads.status_view`), read in the same row.
    public var statusView: String?
}

extension Records {
    /// Everything the status engine needs about one customer (nil if never seen), from its status inputs: a bounded
    /// handful of rows however long its history. When `StatusInputs.needsWholeHistory` says the handful can't
    /// stand for the whole, read `wholeHistory` instead.
    public func statusInputs(_ customerId: String) throws -> CustomerSnapshot? {
        guard let row = try db.queryOne("""
            SELECT c.app_account_token AS app_account_token, c.created_at_ms AS created_at_ms,
                   c.consent_rescinded_at_ms AS consent_rescinded_at_ms, w.paid AS paid, w.free AS free,
                   h.last_sequence AS version, h.status_view AS status_view, c.has_external AS has_external
            FROM customers c LEFT JOIN wallets w ON w.customer_id = c.customer_id
                LEFT JOIN outbox_heads h ON h.customer_id = c.customer_id
            WHERE c.customer_id = ?
            """, [.text(customerId)]) else { return nil }
        let customer = KakinStore.Customer(customerId: customerId, appAccountToken: row.string("app_account_token") ?? "",
                                           createdAtMs: row.int("created_at_ms") ?? 0,
                                           consentRescindedAtMs: row.int("consent_rescinded_at_ms"))
        let wallet = WalletBalance(paid: row.int("paid") ?? 0, free: row.int("free") ?? 0)
        let version = row.int("version") ?? 0
        let statusView = row.string("status_view")
        let txs = try db.query("""
            SELECT COALESCE(status_json, jws) AS payload FROM transactions WHERE customer_id = ? AND status_input = 1 AND \(KakinStore.statusInputTypes)
            LIMIT ?
            """, [.text(customerId), .integer(Int64(KakinStore.historyRowsMax))])
        // Entitlements bought outside the App Store (migration 14): read only for a customer who has any.
        let external = (row.int("has_external") ?? 0) != 0 ? try KakinStore.externalEntitlements(db, customerId) : []
        guard !txs.isEmpty else {
            return CustomerSnapshot(customer: customer, history: CustomerHistory(external: external), wallet: wallet, version: version,
                                    statusView: statusView)
        }
        // Only the status-input index may answer the subquery (no product_type test, which another index would
        // take and then visit every transaction of the customer); only subscriptions have renewal info anyway.
        let renewals = try db.query("""
            SELECT COALESCE(status_json, jws) AS payload FROM renewal_infos WHERE original_transaction_id IN (
                SELECT original_transaction_id FROM transactions WHERE customer_id = ? AND status_input = 1)
            LIMIT ?
            """, [.text(customerId), .integer(Int64(KakinStore.historyRowsMax))])
        var history = Self.history(txs, renewals)
        history.external = external
        return CustomerSnapshot(customer: customer, history: history, wallet: wallet, version: version, statusView: statusView)
    }

    /// The customer's whole history (the newest `historyRowsMax` transactions).
    public func wholeHistory(_ customer: KakinStore.Customer) throws -> CustomerSnapshot {
        let txs = try db.query("""
            SELECT COALESCE(status_json, jws) AS payload FROM transactions WHERE customer_id = ? AND \(KakinStore.statusInputTypes)
            ORDER BY purchase_date_ms DESC LIMIT ?
            """, [.text(customer.customerId), .integer(Int64(KakinStore.historyRowsMax))])
        let renewals = try db.query("""
            SELECT COALESCE(r.status_json, r.jws) AS payload FROM renewal_infos r
            JOIN original_links l ON l.original_transaction_id = r.original_transaction_id
            WHERE l.customer_id = ? LIMIT ?
            """, [.text(customer.customerId), .integer(Int64(KakinStore.historyRowsMax))])
        var history = Self.history(txs, renewals)
        history.external = try KakinStore.externalEntitlements(db, customer.customerId)
        let head = try eventHead(customer.customerId)
        return CustomerSnapshot(customer: customer, history: history, wallet: try wallet(customer.customerId),
                                version: head.lastSequence, statusView: head.statusView)
    }

    static func history(_ transactions: [SQLRow], _ renewals: [SQLRow]) -> CustomerHistory {
        CustomerHistory(transactions: transactions.compactMap { $0.string("payload").flatMap(StoredStatusFields.transaction) },
                        renewalInfos: renewals.compactMap { $0.string("payload").flatMap(StoredStatusFields.renewalInfo) })
    }
}

extension KakinStore {
    /// The customer's whole history; nil for a customer never seen.
    public func customerSnapshot(_ customerId: String) async throws(KakinError) -> CustomerSnapshot? {
        try await snapshot { r in try r.customer(customerId).map(r.wholeHistory) }
    }

    /// What a status read needs, in one read (`Records.statusInputs`); nil for a customer never seen.
    public func customerStatusInputs(_ customerId: String) async throws(KakinError) -> CustomerSnapshot? {
        try await snapshot { r in try r.statusInputs(customerId) }
    }
    /// The original transactions linked to a customer (what a restore without an id asks the App Store about).
    public func linkedOriginalTransactions(_ customerId: String, limit: Int) async throws(KakinError) -> [String] {
        try await read { db in
            try db.query("SELECT original_transaction_id FROM original_links WHERE customer_id = ? ORDER BY linked_at_ms LIMIT ?",
                         [.text(customerId), .integer(Int64(limit))]).compactMap { $0.string("original_transaction_id") }
        }
    }
}
