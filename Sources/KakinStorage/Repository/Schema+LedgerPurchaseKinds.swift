extension Schema {
    /// The ledger entries of a purchase (its credit, refunds and reversals): `ledger_by_transaction`'s condition since
    /// migration 32, which a query repeats word for word so SQLite uses that index.
    static let purchaseLedgerKinds = "(kind = 'purchase' OR kind = 'refund' OR kind = 'refundReversed')"

    /// Migration 32, SQLite only: `ledger_by_transaction`'s condition was `kind IN ('purchase', 'refund', 'refundReversed')`,
    /// and SQLite evaluates a list of three or more constants by building a temporary index of it, for every ledger entry
    /// inserted (a quarter of a grant's ledger INSERT). The same condition as comparisons costs nothing. PostgreSQL
    /// tests the list in place and proves either form from the other: it has nothing to run.
    static let ledgerPurchaseKindsMigration = SQLMigration(version: 32, name: "purchase ledger index without an IN list (SQLite)", sql: """
        DROP INDEX ledger_by_transaction;
        CREATE INDEX ledger_by_transaction ON ledger_entries(reference, customer_id) WHERE \(purchaseLedgerKinds);
        """, postgresql: "")
}
