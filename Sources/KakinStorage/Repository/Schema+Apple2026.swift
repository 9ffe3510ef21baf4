extension Schema {
    /// Migration 15: Apple's 2026 additions.
    /// - `customers.consent_rescinded_at_ms`: when a parent or guardian withdrew consent (RESCIND_CONSENT's
    ///   `signedDate`, the first one kept); the status shows it as `consentRescinded`.
    /// - `consent_rescissions`: every RESCIND_CONSENT, by notification, with the app transaction it names and the
    ///   customer once known (a rescission that names an app transaction Kakin can't place yet waits for it).
    /// - `app_transaction_links`: which customer an `appTransactionId` belongs to (the customer of the signed
    ///   transactions that carried it), how a RESCIND_CONSENT's app transaction finds its customer.
    /// - `server_finish_requests`: Finish Transaction calls Kakin owes the App Store (`serverFinish`), as durable
    ///   jobs: a consumable credited from a notification or a restore, due `afterSeconds` later in business time
    ///   (`due_ms`); `appSent` when the app sent the transaction itself meanwhile. States: `pending`, `sent`,
    ///   `appSent`, `failed`.
    static let apple2026Migration = SQLMigration(version: 15, name: "consent rescinded, app transactions, server finish", sql: """
        ALTER TABLE customers ADD COLUMN consent_rescinded_at_ms BIGINT;
        CREATE TABLE consent_rescissions (
            notification_uuid TEXT PRIMARY KEY,
            app_transaction_id TEXT,
            bundle_id TEXT NOT NULL,
            environment TEXT NOT NULL,
            rescinded_at_ms BIGINT NOT NULL,
            customer_id TEXT,
            received_at_ms BIGINT NOT NULL
        );
        CREATE INDEX consent_rescissions_unplaced ON consent_rescissions(app_transaction_id) WHERE customer_id IS NULL;
        CREATE INDEX consent_rescissions_by_customer ON consent_rescissions(customer_id) WHERE customer_id IS NOT NULL;
        CREATE TABLE app_transaction_links (
            app_transaction_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL,
            linked_at_ms BIGINT NOT NULL
        );
        CREATE TABLE server_finish_requests (
            transaction_id TEXT PRIMARY KEY,
            customer_id TEXT NOT NULL,
            bundle_id TEXT NOT NULL,
            environment TEXT NOT NULL,
            product_id TEXT NOT NULL,
            due_ms BIGINT NOT NULL,
            state TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_ms BIGINT NOT NULL,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            last_error TEXT,
            finished_at_ms BIGINT,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX server_finish_requests_due ON server_finish_requests(due_ms) WHERE state = 'pending';
        """)
}
