extension Schema {
    /// Migration 8: Set App Account Token calls Kakin owes the App Store, as durable jobs (`DurableJobTable`).
    /// When Kakin links a purchase made outside the app (no `appAccountToken`: an offer code, a purchase in the
    /// App Store) to a customer, it asks Apple to put the customer's token on the purchase, so every later signed
    /// transaction of it carries the token. One row per original transaction, holding the token Apple should
    /// have: a transfer to another customer puts it back to `pending` with the new token. States: `pending`,
    /// `sent`, `failed` (refused by the App Store, or still failing after `attemptsMax` tries).
    static let appAccountTokenRequestsMigration = SQLMigration(version: 8, name: "app account token requests", sql: """
        CREATE TABLE app_account_token_requests (
            original_transaction_id TEXT PRIMARY KEY,
            app_account_token TEXT NOT NULL,
            customer_id TEXT NOT NULL,
            bundle_id TEXT NOT NULL,
            environment TEXT NOT NULL,
            state TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_ms BIGINT NOT NULL,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            last_error TEXT,
            finished_at_ms BIGINT,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX app_account_token_requests_due ON app_account_token_requests(state, next_attempt_ms);
        """)
}
