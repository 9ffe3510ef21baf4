extension Schema {
    /// Migration 26: a webhook delivery no longer carries its chain's claim. What a worker holds is the chain
    /// (`webhook_chains.claimed_by`, `lease_until_ms`); marking its oldest undone delivery as well cost a row write per
    /// delivery, and clearing it another (issue 26). The desk reads the holder from the chain.
    static let webhookDeliveryClaimsMigration = SQLMigration(version: 26, name: "webhook claims on chains only", sql: """
        ALTER TABLE webhook_deliveries DROP COLUMN claimed_by;
        ALTER TABLE webhook_deliveries DROP COLUMN lease_until_ms;
        """)
}
