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
    /// handful of rows however long its history, in one statement (`statusInputsSQL`). When
    /// `StatusInputs.needsWholeHistory` says the handful can't stand for the whole, read `wholeHistory` instead.
    public func statusInputs(_ customerId: String) throws -> CustomerSnapshot? {
        let id = SQLValue.text(customerId)
        let rowsMax = SQLValue.integer(Int64(KakinStore.historyRowsMax))
        let rows = try db.query(Self.statusInputsSQL, [id, id, rowsMax, id, rowsMax, id, id, .integer(Int64(Self.externalRowsMax))])
        var snapshot: CustomerSnapshot?
        var transactions: [TransactionPayload] = [], renewalInfos: [RenewalInfoPayload] = [], external: [ExternalEntitlement] = []
        var renewalInfoRows = Set<String>()
        for row in rows {
            let payload = row.string("payload") ?? ""
            switch row.int("part") {
            case 0:
                let customer = KakinStore.Customer(customerId: customerId, appAccountToken: row.string("app_account_token") ?? "",
                                                   createdAtMs: row.int("created_at_ms") ?? 0,
                                                   consentRescindedAtMs: row.int("consent_rescinded_at_ms"))
                snapshot = CustomerSnapshot(customer: customer, history: CustomerHistory(),
                                            wallet: WalletBalance(paid: row.int("paid") ?? 0, free: row.int("free") ?? 0),
                                            version: row.int("version") ?? 0, statusView: row.string("status_view"))
            case 1: StoredStatusFields.transaction(payload).map { transactions.append($0) }
            case 2:
                guard renewalInfoRows.insert(payload).inserted else { continue }
                StoredStatusFields.renewalInfo(payload).map { renewalInfos.append($0) }
            default: (try? JSONParser.parse(payload)).flatMap(ExternalEntitlement.init(json:)).map { external.append($0) }
            }
        }
        snapshot?.history = CustomerHistory(transactions: transactions, renewalInfos: renewalInfos, external: external)
        return snapshot
    }

    /// `statusInputs`' one statement: the customer's row (part 0: customer, wallet and event head), its status-input
    /// transactions (1), their renewal infos (2) and, for a customer who has any (migration 14), its entitlements bought
    /// outside the App Store (3). Each part's rows are bounded by its own LIMIT; the parts come in any order. Part 2 walks
    /// the status-input index and looks each renewal info up by its key (`CROSS JOIN`: SQLite keeps that order), with no
    /// product_type test (which another index would take and then visit every transaction of the customer; only
    /// subscriptions have renewal info anyway): an instance with several status inputs repeats its renewal info, which
    /// `statusInputs` skips. (`IN (subquery)` built a temporary b-tree on every read: some 5 % of a status read's CPU.)
    static let statusInputsSQL = """
        SELECT 0 AS part, c.app_account_token AS app_account_token, c.created_at_ms AS created_at_ms,
               c.consent_rescinded_at_ms AS consent_rescinded_at_ms, w.paid AS paid, w.free AS free,
               h.last_sequence AS version, h.status_view AS status_view, NULL AS payload
        FROM customers c LEFT JOIN wallets w ON w.customer_id = c.customer_id
            LEFT JOIN outbox_heads h ON h.customer_id = c.customer_id
        WHERE c.customer_id = ?
        UNION ALL
        SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, payload FROM (
            SELECT COALESCE(status_json, jws) AS payload FROM transactions
            WHERE customer_id = ? AND status_input = 1 AND \(KakinStore.statusInputTypes) LIMIT ?) t
        UNION ALL
        SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, payload FROM (
            SELECT COALESCE(r.status_json, r.jws) AS payload FROM transactions t CROSS JOIN renewal_infos r
            WHERE t.customer_id = ? AND t.status_input = 1 AND r.original_transaction_id = t.original_transaction_id
            LIMIT ?) r
        UNION ALL
        SELECT 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, payload FROM (
            SELECT entitlement AS payload FROM external_entitlements
            WHERE customer_id = ? AND EXISTS (SELECT 1 FROM customers WHERE customer_id = ? AND has_external <> 0) LIMIT ?) e
        """

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
