import KakinCore

extension Schema {
    /// Migration 20: the business numbers count every source (`docs/metrics.md`). `metric_days` gains `source` (where
    /// it was sold: `appStore`, `googlePlay`, a provider; `''` for coin figures) in its key; the table is made again
    /// (a key can't be altered on SQLite), its rows kept as the App Store's, as they were. Shares
    /// (`metric_contributions`) read alike: a cell without a source is the App Store's. Purchases outside the App
    /// Store made before are counted by the next `kakin report rebuild`.
    static let metricSourcesMigration = SQLMigration(version: 20, name: "business numbers by source",
                                                     sql: metricSourcesSQL(dialect: .sqlite), postgresql: metricSourcesSQL(dialect: .postgresql))

    private static func metricSourcesSQL(dialect: SQLDialect) -> String {
        let text = dialect == .postgresql ? "TEXT COLLATE \"C\"" : "TEXT"
        let coins = ["paidCoins", "coinsSold", "coinsSpent", "coinsGrantedFree"].map { "'\($0)'" }.joined(separator: ", ")
        return """
            CREATE TABLE metric_days_by_source (
                metric \(text) NOT NULL,
                bundle_id \(text) NOT NULL,
                product_id \(text) NOT NULL,
                source \(text) NOT NULL,
                currency \(text) NOT NULL,
                day BIGINT NOT NULL,
                value BIGINT NOT NULL,
                PRIMARY KEY (metric, bundle_id, product_id, source, currency, day)
            );
            INSERT INTO metric_days_by_source (metric, bundle_id, product_id, source, currency, day, value)
                SELECT metric, bundle_id, product_id, CASE WHEN metric IN (\(coins)) THEN '' ELSE '\(PurchaseSource.appStore)' END, currency, day, value
                FROM metric_days;
            DROP TABLE metric_days;
            ALTER TABLE metric_days_by_source RENAME TO metric_days;
            CREATE INDEX metric_days_by_day ON metric_days(day);
            """
    }
}
