import KakinCore

/// Everything the status engine needs about one customer, read on one snapshot.
public struct CustomerSnapshot: Sendable {
    public var customer: KakinStore.Customer
    /// The newest stored copy of each of the customer's entitlement transactions (not consumables, which
    /// never make a customer active; the wallet accounts for them). JWS verified when it was stored.
    public var transactionJWS: [String]
    /// The newest renewal info of each of the customer's subscriptions.
    public var renewalInfoJWS: [String]
    public var wallet: WalletBalance
}

extension KakinStore {
    /// Bounds a status read: a customer with more history than this is answered from the newest part.
    static let historyRowsMax = 10_000

    public func customerSnapshot(_ customerId: String) async throws(KakinError) -> CustomerSnapshot {
        let customer = try await ensureCustomer(customerId)
        return try await read { db in
            let txs = try db.query("""
                SELECT jws FROM transactions WHERE customer_id = ? AND product_type <> ? ORDER BY purchase_date_ms DESC LIMIT ?
                """, [.text(customerId), .text(AppleProductType.consumable.rawValue), .integer(Int64(Self.historyRowsMax))])
            let renewals = try db.query("""
                SELECT r.jws AS jws FROM renewal_infos r JOIN original_links l ON l.original_transaction_id = r.original_transaction_id
                WHERE l.customer_id = ? LIMIT ?
                """, [.text(customerId), .integer(Int64(Self.historyRowsMax))])
            return CustomerSnapshot(customer: customer, transactionJWS: txs.compactMap { $0.string("jws") },
                                    renewalInfoJWS: renewals.compactMap { $0.string("jws") },
                                    wallet: try Self.walletBalance(db, customerId))
        }
    }
}

extension KakinStore {
    /// What a status read needs, in one read: the customer (nil if never seen), its wallet, the transactions
    /// marked as status inputs (a bounded handful, see `StatusInputs`) and the renewal info of their
    /// subscriptions. When `StatusInputs.needsWholeHistory` says so, evaluate `customerSnapshot` instead.
    public func customerStatusInputs(_ customerId: String) async throws(KakinError) -> CustomerSnapshot? {
        try await read { db in
            guard let row = try db.queryOne("""
                SELECT c.app_account_token AS app_account_token, c.created_at_ms AS created_at_ms, w.paid AS paid, w.free AS free
                FROM customers c LEFT JOIN wallets w ON w.customer_id = c.customer_id WHERE c.customer_id = ?
                """, [.text(customerId)]) else { return nil }
            let customer = Customer(customerId: customerId, appAccountToken: row.string("app_account_token") ?? "",
                                    createdAtMs: row.int("created_at_ms") ?? 0)
            let wallet = WalletBalance(paid: row.int("paid") ?? 0, free: row.int("free") ?? 0)
            let txs = try db.query("""
                SELECT jws FROM transactions WHERE customer_id = ? AND status_input = 1 AND product_type <> ? LIMIT ?
                """, [.text(customerId), .text(AppleProductType.consumable.rawValue), .integer(Int64(Self.historyRowsMax))])
            guard !txs.isEmpty else { return CustomerSnapshot(customer: customer, transactionJWS: [], renewalInfoJWS: [], wallet: wallet) }
            // Only the status-input index may answer the subquery (no product_type test, which another index would
            // take and then visit every transaction of the customer); only subscriptions have renewal info anyway.
            let renewals = try db.query("""
                SELECT jws FROM renewal_infos WHERE original_transaction_id IN (
                    SELECT original_transaction_id FROM transactions WHERE customer_id = ? AND status_input = 1)
                LIMIT ?
                """, [.text(customerId), .integer(Int64(Self.historyRowsMax))])
            return CustomerSnapshot(customer: customer, transactionJWS: txs.compactMap { $0.string("jws") },
                                    renewalInfoJWS: renewals.compactMap { $0.string("jws") }, wallet: wallet)
        }
    }

    /// The original transactions linked to a customer (what a restore without an id asks the App Store about).
    public func linkedOriginalTransactions(_ customerId: String, limit: Int) async throws(KakinError) -> [String] {
        try await read { db in
            try db.query("SELECT original_transaction_id FROM original_links WHERE customer_id = ? ORDER BY linked_at_ms LIMIT ?",
                         [.text(customerId), .integer(Int64(limit))]).compactMap { $0.string("original_transaction_id") }
        }
    }
}
