import KakinPostgreSQL
import KakinStorage

extension KakinApp {
    /// The database engine's own counters for `GET /metrics` (Prometheus text): commits and group-commit
    /// sizes on both engines; on PostgreSQL also serialization re-runs, reconnects and commits whose
    /// outcome was unknown — what an operator watches during load and failovers.
    func databaseMetricsText() -> String {
        var counters: [(name: String, help: String, value: Int)] = []
        var gauges: [(name: String, help: String, value: Double)] = []
        if let sqlite = store.database as? SQLiteDatabase {
            let s = sqlite.statistics
            counters = [("kakin_db_commits_total", "Write transactions committed.", s.commits),
                        ("kakin_db_writes_committed_total", "Write bodies committed.", s.writesCommitted),
                        ("kakin_db_writes_failed_total", "Write bodies that failed or were rolled back.", s.writesFailed),
                        ("kakin_db_reads_total", "Read bodies run.", s.reads)]
            gauges = [("kakin_db_batch_size_mean", "Write bodies per committed transaction, on average.", s.batchSizeMean)]
        } else if let postgres = store.database as? PostgresDatabase {
            let s = postgres.statistics
            counters = [("kakin_db_commits_total", "Write transactions committed.", s.commits),
                        ("kakin_db_writes_committed_total", "Write bodies committed.", s.writesCommitted),
                        ("kakin_db_writes_failed_total", "Write bodies that failed or were rolled back.", s.writesFailed),
                        ("kakin_db_reads_total", "Read bodies run.", s.reads),
                        ("kakin_db_serialization_retries_total", "Write transactions run again after a serialization failure or deadlock.", s.serializationRetries),
                        ("kakin_db_reconnects_total", "Database connections opened again after one broke.", s.reconnects),
                        ("kakin_db_write_outcome_unknown_total", "Writes whose COMMIT got no answer (answered 503 retryable_failure).", s.outcomesUnknown)]
            gauges = [("kakin_db_batch_size_mean", "Write bodies per committed transaction, on average.", s.batchSizeMean)]
        }
        var out = ""
        for c in counters { out += "# HELP \(c.name) \(c.help)\n# TYPE \(c.name) counter\n\(c.name) \(c.value)\n" }
        for g in gauges { out += "# HELP \(g.name) \(g.help)\n# TYPE \(g.name) gauge\n\(g.name) \(g.value)\n" }
        return out
    }
}
