import KakinCore

/// An import job as stored (migration 24).
public struct ImportJob: Sendable, Hashable {
    public enum State: String, Sendable, CaseIterable {
        case receiving, queued, running, done, cancelled, failed
        public var isOpen: Bool { self == .receiving || self == .queued || self == .running }
    }

    public var importId: String
    public var kind: String
    public var state: State
    public var dryRun: Bool
    public var events: Bool
    public var rows: Int64
    public var done: Int64
    public var applied: Int64
    public var alreadyPresent: Int64
    public var rejected: Int64
    public var createdBy: String?
    public var createdAtMs: Int64
    /// When the current (or last) run began, on the real-time clock, and how many rows were done then: the rate.
    public var runStartedAtMs: Int64?
    public var doneAtRunStart: Int64
    public var finishedAtMs: Int64?
    public var lastError: String?
}

/// A row's outcome: `applied` (changed something, or would in a dry run), `present` (nothing to change), `rejected`.
public enum ImportRowState: String, Sendable {
    case pending, applied, present, rejected
}

/// A row waiting to be applied.
public struct PendingImportRow: Sendable, Hashable {
    public var rowNumber: Int64
    public var line: Int64
    /// The row's fields as a JSON object.
    public var fields: String
}

/// What applying a row ended in, written once.
public struct ImportRowOutcome: Sendable, Hashable {
    public var rowNumber: Int64
    public var state: ImportRowState
    /// `{"code", "id", "message"}` of a rejected row.
    public var error: JSONValue?

    public init(rowNumber: Int64, state: ImportRowState, error: JSONValue? = nil) {
        precondition(state != .pending && (state == .rejected) == (error != nil), "a final outcome; an error exactly for a reject")
        self.rowNumber = rowNumber
        self.state = state
        self.error = error
    }
}

/// A rejected row: its line, the row as read and its error.
public struct ImportReject: Sendable, Hashable {
    public var rowNumber: Int64
    public var line: Int64
    public var fields: String
    public var error: String
}

/// The import jobs' tables. Only the worker holding a job's lease writes its rows' outcomes, and only rows still
/// pending change (so a worker that lost its lease and a new one never count a row twice).
public struct ImportJobStore: Sendable {
    let store: KakinStore
    /// Rows stored per write while a file is received (an upload never holds the writer long).
    public static let rowsPerWrite = 2_000
    /// A `receiving` job whose upload stopped (its process died) is failed after this.
    public static let receivingTimeoutMs: Int64 = 10 * 60 * 1000

    public init(store: KakinStore) { self.store = store }

    static let jobColumns = """
        import_id, kind, state, dry_run, events, rows_total, done, applied, already_present, rejected, created_by, created_at_ms,
        run_started_at_ms, done_at_run_start, finished_at_ms, last_error
        """

    static func job(_ r: SQLRow) -> ImportJob {
        ImportJob(importId: r.string("import_id") ?? "", kind: r.string("kind") ?? "",
                  state: r.string("state").flatMap(ImportJob.State.init(rawValue:)) ?? .failed, dryRun: r.int("dry_run") == 1,
                  events: r.int("events") == 1, rows: r.int("rows_total") ?? 0, done: r.int("done") ?? 0, applied: r.int("applied") ?? 0,
                  alreadyPresent: r.int("already_present") ?? 0, rejected: r.int("rejected") ?? 0, createdBy: r.string("created_by"),
                  createdAtMs: r.int("created_at_ms") ?? 0, runStartedAtMs: r.int("run_started_at_ms"),
                  doneAtRunStart: r.int("done_at_run_start") ?? 0, finishedAtMs: r.int("finished_at_ms"), lastError: r.string("last_error"))
    }

    // MARK: Receiving a file

    /// Stores a new job and its rows (`receiving` while they are written, in writes of `rowsPerWrite`), then queues it.
    /// Refuses with `too_many_imports` when `jobsAtOnceMax` jobs are open.
    public func create(importId: String, kind: String, dryRun: Bool, events: Bool, rows: [(line: Int, fields: String)],
                       createdBy: String?, nowMs: Int64, jobsAtOnceMax: Int) async throws(KakinError) {
        precondition(!rows.isEmpty && rows.count <= ImportLimits.rowsMax, "the file was checked")
        try await store.write { db in
            let open = try db.queryOne("SELECT COUNT(*) AS n FROM import_jobs WHERE state IN ('receiving', 'queued', 'running')", [])?.int("n") ?? 0
            guard open < Int64(jobsAtOnceMax) else {
                throw KakinError(.importsBusy, "\(open) imports are queued or running (at most \(jobsAtOnceMax)); wait for one to end.")
            }
            try db.execute("""
                INSERT INTO import_jobs (import_id, kind, state, dry_run, events, rows_total, created_by, created_at_ms)
                VALUES (?, ?, 'receiving', ?, ?, ?, ?, ?)
                """, [.text(importId), .text(kind), .integer(dryRun ? 1 : 0), .integer(events ? 1 : 0), .integer(Int64(rows.count)),
                      SQLValue(createdBy), .integer(nowMs)])
        }
        var start = 0
        while start < rows.count {
            let chunk = Array(rows[start..<min(rows.count, start + Self.rowsPerWrite)])
            let first = start
            try await store.write { db in
                for (i, row) in chunk.enumerated() {
                    try db.execute("INSERT INTO import_rows (import_id, row_number, line, fields, state) VALUES (?, ?, ?, ?, 'pending')",
                                   [.text(importId), .integer(Int64(first + i)), .integer(Int64(row.line)), .text(row.fields)])
                }
            }
            start += chunk.count
        }
        try await store.write { db in
            try db.execute("UPDATE import_jobs SET state = 'queued' WHERE import_id = ? AND state = 'receiving'", [.text(importId)])
        }
    }

    // MARK: Reading

    public func job(_ importId: String) async throws(KakinError) -> ImportJob? {
        try await store.read { db in
            try db.queryOne("SELECT \(Self.jobColumns) FROM import_jobs WHERE import_id = ?", [.text(importId)]).map(Self.job)
        }
    }

    /// The newest jobs first.
    public func jobs(limit: Int) async throws(KakinError) -> [ImportJob] {
        try await store.read { db in
            try db.query("SELECT \(Self.jobColumns) FROM import_jobs ORDER BY created_at_ms DESC, import_id LIMIT ?",
                         [.integer(Int64(limit))]).map(Self.job)
        }
    }

    /// Rejected rows in file order, after `afterRow`.
    public func rejects(_ importId: String, afterRow: Int64?, limit: Int) async throws(KakinError) -> [ImportReject] {
        try await store.read { db in
            try db.query("""
                SELECT row_number, line, fields, error FROM import_rows WHERE import_id = ? AND state = 'rejected' AND row_number > ?
                ORDER BY row_number LIMIT ?
                """, [.text(importId), .integer(afterRow ?? -1), .integer(Int64(limit))]).map { r in
                ImportReject(rowNumber: r.int("row_number") ?? 0, line: r.int("line") ?? 0, fields: r.string("fields") ?? "{}",
                             error: r.string("error") ?? "{}")
            }
        }
    }

    // MARK: Running

    /// Takes a job to run until `leaseUntilMs`: the oldest queued one, or a running one whose worker stopped renewing its
    /// lease (a process killed mid-import: the job resumes at its first pending row). Fails uploads that never finished.
    public func claim(owner: String, nowMs: Int64, leaseUntilMs: Int64) async throws(KakinError) -> ImportJob? {
        try await store.write { db in
            try db.execute("""
                UPDATE import_jobs SET state = 'failed', finished_at_ms = ?, last_error = 'the upload did not complete'
                WHERE state = 'receiving' AND created_at_ms < ?
                """, [.integer(nowMs), .integer(nowMs - Self.receivingTimeoutMs)])
            guard let id = try db.queryOne("""
                SELECT import_id FROM import_jobs
                WHERE state = 'queued' OR (state = 'running' AND (lease_until_ms IS NULL OR lease_until_ms <= ?))
                ORDER BY created_at_ms, import_id LIMIT 1
                """, [.integer(nowMs)])?.string("import_id") else { return nil }
            return try db.queryOne("""
                UPDATE import_jobs SET state = 'running', lease_owner = ?, lease_until_ms = ?, run_started_at_ms = ?, done_at_run_start = done
                WHERE import_id = ? AND (state = 'queued' OR (state = 'running' AND (lease_until_ms IS NULL OR lease_until_ms <= ?)))
                RETURNING \(Self.jobColumns)
                """, [.text(owner), .integer(leaseUntilMs), .integer(nowMs), .text(id), .integer(nowMs)]).map(Self.job)
        }
    }

    /// Extends the lease; false when the job is no longer this worker's to run (cancelled, or taken over).
    public func renew(_ importId: String, owner: String, leaseUntilMs: Int64) async throws(KakinError) -> Bool {
        try await store.write { db in
            try db.execute("UPDATE import_jobs SET lease_until_ms = ? WHERE import_id = ? AND state = 'running' AND lease_owner = ?",
                           [.integer(leaseUntilMs), .text(importId), .text(owner)]) > 0
        }
    }

    /// The first pending rows in file order.
    public func pendingRows(_ importId: String, limit: Int) async throws(KakinError) -> [PendingImportRow] {
        try await store.read { db in
            try db.query("SELECT row_number, line, fields FROM import_rows WHERE import_id = ? AND state = 'pending' ORDER BY row_number LIMIT ?",
                         [.text(importId), .integer(Int64(limit))]).map { r in
                PendingImportRow(rowNumber: r.int("row_number") ?? 0, line: r.int("line") ?? 0, fields: r.string("fields") ?? "{}")
            }
        }
    }

    /// Records outcomes in a write of their own (rows whose effects were written before, or that had none).
    public func record(_ importId: String, _ outcomes: [ImportRowOutcome]) async throws(KakinError) {
        guard !outcomes.isEmpty else { return }
        try await store.transaction { r in try r.recordImportOutcomes(importId, outcomes) }
    }

    /// Ends a running job (`done`, `failed`) held by `owner`; a cancelled one stays cancelled.
    public func finish(_ importId: String, owner: String, state: ImportJob.State, error: String?, nowMs: Int64) async throws(KakinError) {
        precondition(!state.isOpen, "a final state")
        try await store.write { db in
            try db.execute("""
                UPDATE import_jobs SET state = ?, finished_at_ms = ?, last_error = ?, lease_owner = NULL, lease_until_ms = NULL
                WHERE import_id = ? AND state = 'running' AND lease_owner = ?
                """, [.text(state.rawValue), .integer(nowMs), SQLValue(error.map { String($0.prefix(500)) }), .text(importId), .text(owner)])
        }
    }

    /// Cancels an open job: its worker stops before its next rows; rows done stay done. `import_ended` for an ended job.
    public func cancel(_ importId: String, nowMs: Int64) async throws(KakinError) -> ImportJob {
        try await store.write { db in
            guard let row = try db.queryOne("""
                UPDATE import_jobs SET state = 'cancelled', finished_at_ms = ?, lease_owner = NULL, lease_until_ms = NULL
                WHERE import_id = ? AND state IN ('receiving', 'queued', 'running') RETURNING \(Self.jobColumns)
                """, [.integer(nowMs), .text(importId)]) else {
                let exists = try db.queryOne("SELECT 1 AS one FROM import_jobs WHERE import_id = ?", [.text(importId)]) != nil
                throw KakinError(exists ? .importEnded : .importNotFound)
            }
            return Self.job(row)
        }
    }
}

extension Records {
    /// Writes rows' outcomes and moves their job's counters, inside the caller's write (the same one as a balance's ledger
    /// entry): only rows still pending change, so a row is counted once however often it is applied.
    public func recordImportOutcomes(_ importId: String, _ outcomes: [ImportRowOutcome]) throws {
        var applied: Int64 = 0, present: Int64 = 0, rejected: Int64 = 0
        for o in outcomes {
            let changed = try db.execute("UPDATE import_rows SET state = ?, error = ? WHERE import_id = ? AND row_number = ? AND state = 'pending'",
                                         [.text(o.state.rawValue), SQLValue(o.error?.jsonString), .text(importId), .integer(o.rowNumber)]) > 0
            guard changed else { continue }
            switch o.state {
            case .applied: applied += 1
            case .present: present += 1
            case .rejected: rejected += 1
            case .pending: preconditionFailure("a final outcome")
            }
        }
        let moved = applied + present + rejected
        guard moved > 0 else { return }
        try db.execute("""
            UPDATE import_jobs SET done = done + ?, applied = applied + ?, already_present = already_present + ?, rejected = rejected + ?
            WHERE import_id = ?
            """, [.integer(moved), .integer(applied), .integer(present), .integer(rejected), .text(importId)])
    }

    /// The import ledger entry of a reference, if one was written: its customer and amounts.
    public func importedBalance(effectKey: String) throws -> (customerId: String, paid: Int64, free: Int64)? {
        try db.queryOne("SELECT customer_id, paid_delta, free_delta FROM ledger_entries WHERE effect_key = ?", [.text(effectKey)]).map {
            ($0.string("customer_id") ?? "", $0.int("paid_delta") ?? 0, $0.int("free_delta") ?? 0)
        }
    }
}
