extension Schema {
    /// Migration 16: business numbers (`KakinStore+Metrics.swift`, definitions in `docs/metrics.md`).
    ///
    /// - `metric_days`: the daily rollups, one row per metric, app, product, currency and local date (`day`, days since
    ///   1970-01-01 of the app's `reportingTimeZone`). Levels (active subscriptions, MRR, paid coins) are kept as
    ///   deltas; the value at a day is the sum up to it. Always the sum of `metric_contributions`.
    /// - `metric_contributions`: each customer's share of the rollups, as last computed from its facts. The worker
    ///   recomputes a customer, applies the difference to `metric_days` and stores the new share in the same
    ///   transaction, so recomputing a customer any number of times never counts anything twice.
    /// - `metric_cursors`: how far the worker has read the events outbox (the customers whose facts changed), moved
    ///   in that same transaction.
    static let metricsMigration = SQLMigration(version: 16, name: "business numbers: daily rollups, shares, cursor",
                                               sql: metricsSQL(dialect: .sqlite), postgresql: metricsSQL(dialect: .postgresql))

    private static func metricsSQL(dialect: SQLDialect) -> String {
        let text = dialect == .postgresql ? "TEXT COLLATE \"C\"" : "TEXT"
        return """
            CREATE TABLE metric_days (
                metric \(text) NOT NULL,
                bundle_id \(text) NOT NULL,
                product_id \(text) NOT NULL,
                currency \(text) NOT NULL,
                day BIGINT NOT NULL,
                value BIGINT NOT NULL,
                PRIMARY KEY (metric, bundle_id, product_id, currency, day)
            );
            CREATE INDEX metric_days_by_day ON metric_days(day);
            CREATE TABLE metric_contributions (
                customer_id \(text) PRIMARY KEY,
                cells \(text) NOT NULL,
                updated_at_ms BIGINT NOT NULL
            );
            CREATE TABLE metric_cursors (
                name \(text) PRIMARY KEY,
                txid BIGINT NOT NULL,
                feed_pos BIGINT NOT NULL,
                updated_at_ms BIGINT NOT NULL
            );
            """
    }
}
