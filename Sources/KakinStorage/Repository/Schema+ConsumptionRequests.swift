extension Schema {
    /// Migration 7: Apple's refund requests (CONSUMPTION_REQUEST) and Kakin's answers to them, as durable
    /// jobs. One row per notification (`notification_uuid` is the idempotency key: a duplicate delivery
    /// schedules nothing). A worker claims a due row with a lease (`lease_owner`, `lease_until_ms`) in a
    /// conditional UPDATE, so only one process sends it; `request_body` is computed once and re-sent as is.
    /// States: `pending`, `sent`, `notConsented`, `expired` (Apple's 12 hours passed), `failed` (refused).
    static let consumptionRequestsMigration = SQLMigration(version: 7, name: "consumption requests", sql: """
        CREATE TABLE consumption_requests (
            notification_uuid TEXT PRIMARY KEY,
            transaction_id TEXT NOT NULL,
            product_id TEXT NOT NULL,
            bundle_id TEXT NOT NULL,
            environment TEXT NOT NULL,
            customer_id TEXT,
            reason TEXT,
            requested_at_ms BIGINT NOT NULL,
            deadline_ms BIGINT NOT NULL,
            state TEXT NOT NULL,
            attempts BIGINT NOT NULL,
            next_attempt_ms BIGINT NOT NULL,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            request_version BIGINT,
            request_body TEXT,
            last_error TEXT,
            finished_at_ms BIGINT,
            created_at_ms BIGINT NOT NULL
        );
        CREATE INDEX consumption_requests_due ON consumption_requests(state, next_attempt_ms);
        CREATE INDEX consumption_requests_by_transaction ON consumption_requests(transaction_id);
        """)
}
