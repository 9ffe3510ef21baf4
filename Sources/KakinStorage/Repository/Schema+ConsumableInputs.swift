import KakinCore

extension Schema {
    /// Migration 18: consumables are never status inputs (the wallet accounts for them). They were stored with the
    /// column's default (1), so the status-input index held every coin purchase and each status read (and each
    /// purchase's events) visited all of a customer's consumables to skip them.
    static let consumableInputsMigration = SQLMigration(version: 18, name: "consumables are not status inputs", sql: """
        UPDATE transactions SET status_input = 0 WHERE product_type = '\(AppleProductType.consumable.rawValue)' AND status_input <> 0;
        """)
}
