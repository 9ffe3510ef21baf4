import KakinCore

extension Schema {
    /// Migration 13: beside each customer's last event sequence, what those events told (`KakinEvents.StatusView`):
    /// the next change's status is compared with it, so each entitlement and subscription transition is told once.
    static let statusViewsMigration = SQLMigration(version: 13, name: "the status last told in events", sql: """
        ALTER TABLE outbox_heads ADD COLUMN status_view TEXT;
        """)
}

extension Records {
    /// The SQL connection under these records, for the targets of this package that keep their own tables'
    /// statements in `KakinStorage` but compose them (the events outbox). Never for a use case.
    package var connection: SQLConnection { db }
    package var idGenerator: any IDGenerator { ids }

    /// The customer's last event sequence (0 before the first) and the status view stored with it.
    public func eventHead(_ customerId: String) throws -> (lastSequence: Int64, statusView: String?) {
        guard let row = try db.queryOne("SELECT last_sequence, status_view FROM outbox_heads WHERE customer_id = ?", [.text(customerId)]) else {
            return (0, nil)
        }
        return (row.int("last_sequence") ?? 0, row.string("status_view"))
    }
}
