import KakinCore

/// A table of durable jobs: calls Kakin owes the App Store and makes in the background (answers to refund
/// requests, app account tokens). Each row is one call, with the same bookkeeping columns: `state` (`pending`
/// until it ends), `attempts`, `next_attempt_ms`, `lease_owner`, `lease_until_ms`, `last_error`,
/// `finished_at_ms`. Claiming, retrying and ending are the same SQL for every such table: a worker claims a due
/// row with a lease in a conditional UPDATE, so one worker (thread or process) holds it at a time, and a
/// restart resumes from the table.
struct DurableJobTable: Sendable {
    let name: String
    /// The primary key column.
    let key: String
    /// What a claim returns.
    let columns: String
}

extension KakinStore {
    /// How many rows of a job table are in each state.
    func jobCounts(_ table: DurableJobTable) async throws(KakinError) -> [String: Int] {
        try await read { db in
            var counts: [String: Int] = [:]
            for row in try db.query("SELECT state, COUNT(*) AS n FROM \(table.name) GROUP BY state", []) {
                counts[row.string("state") ?? ""] = Int(row.int("n") ?? 0)
            }
            return counts
        }
    }

    /// Claims up to `limit` pending rows due at `nowMs` for `owner` until `nowMs + leaseMs`: a conditional
    /// UPDATE per row, so two workers never hold the same one.
    func claimDueJobs<Job: Sendable>(_ t: DurableJobTable, nowMs: Int64, owner: String, leaseMs: Int64, limit: Int,
                                     _ job: @escaping @Sendable (SQLRow) -> Job) async throws(KakinError) -> [Job] {
        let candidates = try await read { db in
            try db.query("""
                SELECT \(t.key) FROM \(t.name)
                WHERE state = 'pending' AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR lease_until_ms <= ?)
                ORDER BY next_attempt_ms, \(t.key) LIMIT ?
                """, [.integer(nowMs), .integer(nowMs), .integer(Int64(limit))]).compactMap { $0.string(t.key) }
        }
        guard !candidates.isEmpty else { return [] }
        return try await write { db in
            var claimed: [Job] = []
            for key in candidates {
                guard let row = try db.queryOne("""
                    UPDATE \(t.name) SET lease_owner = ?, lease_until_ms = ?
                    WHERE \(t.key) = ? AND state = 'pending' AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR lease_until_ms <= ?)
                    RETURNING \(t.columns)
                    """, [.text(owner), .integer(nowMs + leaseMs), .text(key), .integer(nowMs), .integer(nowMs)]) else { continue }
                claimed.append(job(row))
            }
            return claimed
        }
    }

    /// An attempt failed and may be retried at `nextAttemptMs`; the lease is released. `matching` narrows the row
    /// (a column that may have changed since the claim).
    func retryJob(_ t: DurableJobTable, key: String, matching: [(column: String, value: SQLValue)] = [], error: String,
                  nextAttemptMs: Int64) async throws(KakinError) {
        try await write { db in
            try db.execute("""
                UPDATE \(t.name) SET attempts = attempts + 1, last_error = ?, next_attempt_ms = ?, lease_owner = NULL,
                    lease_until_ms = NULL WHERE \(t.key) = ? AND state = 'pending'\(Self.conditions(matching))
                """, [.text(String(error.prefix(500))), .integer(nextAttemptMs), .text(key)] + matching.map(\.value))
        }
    }

    /// Ends a pending row in `state` (inside the caller's write, which records it in the timeline). Returns false
    /// when it had already ended (or no longer matches), so the caller records nothing twice.
    static func finishJob(_ db: SQLConnection, _ t: DurableJobTable, key: String, matching: [(column: String, value: SQLValue)] = [],
                          state: String, attempted: Bool, error: String?, nowMs: Int64) throws -> Bool {
        try db.execute("""
            UPDATE \(t.name) SET state = ?, attempts = attempts + ?, last_error = ?, finished_at_ms = ?, lease_owner = NULL,
                lease_until_ms = NULL WHERE \(t.key) = ? AND state = 'pending'\(conditions(matching))
            """, [.text(state), .integer(attempted ? 1 : 0), SQLValue(error.map { String($0.prefix(500)) }), .integer(nowMs), .text(key)]
            + matching.map(\.value)) > 0
    }

    static func conditions(_ matching: [(column: String, value: SQLValue)]) -> String {
        matching.map { " AND \($0.column) = ?" }.joined()
    }
}
