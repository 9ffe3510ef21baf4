import KakinPostgreSQL
import KakinSQLite
import KakinService
import KakinStorage

extension KakinApp {
    /// Either engine's group-commit figures and counts in the shape `Metrics` renders for both
    /// (`kakin_db_commit_batch_size`, `kakin_db_write_queue_depth`, `kakin_db_statements_total`, …).
    func databaseFigures() -> Metrics.DatabaseFigures? {
        if let sqlite = store.database as? SQLiteDatabase {
            let s = sqlite.statistics
            return Metrics.DatabaseFigures(commits: s.commits, bodiesInCommittedBatches: s.bodiesInCommittedBatches,
                                           committedBatchSizeCounts: s.committedBatchSizeCounts, writeQueueDepth: s.writeQueueDepth, work: s.work,
                                           dialect: .sqlite)
        }
        if let postgres = store.database as? PostgresDatabase {
            let s = postgres.statistics
            return Metrics.DatabaseFigures(commits: s.commits, bodiesInCommittedBatches: s.bodiesInCommittedBatches,
                                           committedBatchSizeCounts: s.committedBatchSizeCounts, writeQueueDepth: s.writeQueueDepth, work: s.work,
                                           dialect: .postgresql)
        }
        return nil
    }

    /// What only PostgreSQL has, for `GET /metrics`: serialization re-runs, reconnects, and commits whose
    /// outcome was unknown — what an operator watches under contention and during failovers.
    func postgresMetricsText() -> String {
        guard let postgres = store.database as? PostgresDatabase else { return "" }
        let s = postgres.statistics
        return [
            ("kakin_db_serialization_retries_total", "Write transactions run again after a serialization failure or deadlock (PostgreSQL).", s.serializationRetries),
            ("kakin_db_reconnects_total", "Database connections opened again after one broke (PostgreSQL).", s.reconnects),
            ("kakin_db_write_outcome_unknown_total", "Writes whose COMMIT got no answer, answered 503 retryable_failure (PostgreSQL).", s.outcomesUnknown),
        ].map { "# HELP \($0.0) \($0.1)\n# TYPE \($0.0) counter\n\($0.0) \($0.2)\n" }.joined()
    }
}
