import KakinPostgreSQL
import KakinSQLite
import KakinStorage

extension KakinApp {
    /// PostgreSQL's group-commit figures in the shape `Metrics` renders for both engines
    /// (`kakin_db_commit_batch_size`, `kakin_db_write_queue_depth`); nil on SQLite.
    func postgresGroupCommitStatistics() -> SQLiteDatabase.Statistics? {
        guard let postgres = store.database as? PostgresDatabase else { return nil }
        let s = postgres.statistics
        var shared = SQLiteDatabase.Statistics()
        shared.commits = s.commits
        shared.writesCommitted = s.writesCommitted
        shared.writesFailed = s.writesFailed
        shared.batchSizeLargest = s.batchSizeLargest
        shared.reads = s.reads
        shared.writeQueueDepth = s.writeQueueDepth
        shared.bodiesInCommittedBatches = s.bodiesInCommittedBatches
        shared.committedBatchSizeCounts = s.committedBatchSizeCounts
        return shared
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
