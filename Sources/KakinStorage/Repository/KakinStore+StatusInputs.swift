import KakinCore

/// `transactions.status_input` marks the rows a status read loads: for each customer, at least the ones
/// `StatusInputs.select` picks from all of the customer's transactions (a handful per subscription, however
/// long its history). Kept in the same write as every change to a customer's transactions: a newer copy
/// stored, a purchase chain linked or moved to a customer.
///
/// Consumables are never status inputs (stored with 0, migration 18 cleared the older ones). Otherwise only this
/// file clears the flag. Rows inserted elsewhere get the column's default, 1, and so do the rows of databases
/// migrated from before it existed: a status read over more rows than needed is still right (`StatusInputs`
/// explains why), and the next change for the customer narrows them down.
extension KakinStore {
    /// `StatusInputs.canBeInput` as SQL, the one place storage says it: a row whose type can be a status input.
    static let statusInputTypes = "product_type NOT IN (" + StatusInputs.excludedTypes.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"

    /// A stored transaction as the selection sees it.
    struct StatusInputRow {
        var transaction: TransactionPayload
        var isStatusInput: Bool
    }

    /// The row of `transactionId` before a write replaces it: its customer, its flag and its copy.
    struct StoredTransactionRow {
        var customerId: String?
        var isStatusInput: Bool
        /// The decoded fields (or, for rows stored before them, the JWS): `StoredStatusFields`.
        var stored: String
    }

    /// After `copy` became the stored copy of its transaction (new, or newer than `previous`).
    static func statusInputsAfterStoring(_ db: SQLConnection, _ copy: TransactionPayload, previous: StoredTransactionRow?) throws {
        guard StatusInputs.canBeInput(copy.type) else { return }
        let owner: String?
        if let previous {
            owner = previous.customerId
        } else {
            owner = try db.queryOne("SELECT customer_id FROM transactions WHERE transaction_id = ?", [.text(copy.transactionId)])?
                .string("customer_id")
        }
        // A transaction nobody has claimed keeps the default flag until it is linked (`statusInputsAfterLinking`).
        guard let owner else { return }
        if let previous, previous.isStatusInput,
           !(StoredStatusFields.transaction(previous.stored).map { StatusInputs.canReplace($0, with: copy) } ?? false) {
            // The copy it replaces stood for others of its key, and now may not: look at all of them again.
            try reselectStatusInputs(db, customerId: owner)
            return
        }
        var candidates = try statusInputRows(db, customerId: owner).filter { $0.transaction.transactionId != copy.transactionId }
        candidates.append(StatusInputRow(transaction: copy, isStatusInput: previous?.isStatusInput ?? true))
        try markStatusInputs(db, candidates)
    }

    /// After the rows of `originalTransactionId` were moved to `customerId`, from `previousOwner` if they had one.
    static func statusInputsAfterLinking(_ db: SQLConnection, originalTransactionId: String, to customerId: String,
                                         from previousOwner: String?) throws {
        let moved = try db.query("""
            SELECT transaction_id, COALESCE(status_json, jws) AS payload, status_input FROM transactions WHERE original_transaction_id = ? AND \(KakinStore.statusInputTypes)
            ORDER BY purchase_date_ms DESC LIMIT ?
            """, [.text(originalTransactionId), .integer(Int64(historyRowsMax))])
            .compactMap(statusInputRow)
        guard !moved.isEmpty else { return }
        let movedIds = Set(moved.map(\.transaction.transactionId))
        let kept = try statusInputRows(db, customerId: customerId).filter { !movedIds.contains($0.transaction.transactionId) }
        try markStatusInputs(db, kept + moved)
        if let previousOwner, previousOwner != customerId, moved.contains(where: \.isStatusInput) {
            // What the moved rows stood for in the previous owner's history is gone with them.
            try reselectStatusInputs(db, customerId: previousOwner)
        }
    }

    /// Picks the customer's status inputs from all of its transactions (the newest `historyRowsMax`, as a full read).
    static func reselectStatusInputs(_ db: SQLConnection, customerId: String) throws {
        let rows = try db.query("""
            SELECT transaction_id, COALESCE(status_json, jws) AS payload, status_input FROM transactions WHERE customer_id = ? AND \(KakinStore.statusInputTypes)
            ORDER BY purchase_date_ms DESC LIMIT ?
            """, [.text(customerId), .integer(Int64(historyRowsMax))])
        try markStatusInputs(db, rows.compactMap(statusInputRow))
    }

    /// The rows currently marked for the customer.
    static func statusInputRows(_ db: SQLConnection, customerId: String) throws -> [StatusInputRow] {
        try db.query("""
            SELECT transaction_id, COALESCE(status_json, jws) AS payload, status_input FROM transactions WHERE customer_id = ? AND status_input = 1 AND \(KakinStore.statusInputTypes)
            LIMIT ?
            """, [.text(customerId), .integer(Int64(historyRowsMax))])
            .compactMap(statusInputRow)
    }

    /// Sets the flag of each of `rows` to whether `StatusInputs.select(rows)` picks it; writes only changes.
    private static func markStatusInputs(_ db: SQLConnection, _ rows: [StatusInputRow]) throws {
        let selected = StatusInputs.select(rows.map(\.transaction))
        for row in rows {
            let wanted = selected.contains(row.transaction.transactionId)
            guard wanted != row.isStatusInput else { continue }
            try db.execute("UPDATE transactions SET status_input = ? WHERE transaction_id = ?",
                           [.integer(wanted ? 1 : 0), .text(row.transaction.transactionId)])
        }
    }

    private static func statusInputRow(_ row: SQLRow) -> StatusInputRow? {
        // Every stored JWS was verified and decoded before it was stored; one that no longer decodes stays marked.
        guard let transaction = StoredStatusFields.transaction(row.string("payload") ?? "") else { return nil }
        return StatusInputRow(transaction: transaction, isStatusInput: row.int("status_input") != 0)
    }
}
