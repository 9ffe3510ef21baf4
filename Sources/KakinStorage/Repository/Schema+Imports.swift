extension Schema {
    /// Migration 24: imports (`kakin import`, `POST /v1/admin/imports`). A job and each of its rows, so progress is
    /// durable and a restart (any process: the job is leased like the durable jobs) resumes at the first row not yet
    /// committed. A row's outcome is written in the same write as its effect where the effect is one write (balances);
    /// the job's counters move only with rows that change state, so a row is never counted twice.
    /// Job states: `receiving` (rows being stored; a crashed upload is failed later), `queued`, `running`, `done`,
    /// `cancelled`, `failed`. Row states: `pending`, `applied`, `present` (already there), `rejected` (with its error).
    static let importsMigration = SQLMigration(version: 24, name: "imports", sql: """
        CREATE TABLE import_jobs (
            import_id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            state TEXT NOT NULL,
            dry_run BIGINT NOT NULL,
            events BIGINT NOT NULL,
            rows_total BIGINT NOT NULL,
            done BIGINT NOT NULL DEFAULT 0,
            applied BIGINT NOT NULL DEFAULT 0,
            already_present BIGINT NOT NULL DEFAULT 0,
            rejected BIGINT NOT NULL DEFAULT 0,
            created_by TEXT,
            created_at_ms BIGINT NOT NULL,
            run_started_at_ms BIGINT,
            done_at_run_start BIGINT NOT NULL DEFAULT 0,
            finished_at_ms BIGINT,
            lease_owner TEXT,
            lease_until_ms BIGINT,
            last_error TEXT
        );
        CREATE INDEX import_jobs_open ON import_jobs(state) WHERE state IN ('receiving', 'queued', 'running');
        CREATE TABLE import_rows (
            import_id TEXT NOT NULL REFERENCES import_jobs(import_id),
            row_number BIGINT NOT NULL,
            line BIGINT NOT NULL,
            fields TEXT NOT NULL,
            state TEXT NOT NULL,
            error TEXT,
            PRIMARY KEY (import_id, row_number)
        );
        CREATE INDEX import_rows_pending ON import_rows(import_id, row_number) WHERE state = 'pending';
        CREATE INDEX import_rows_rejected ON import_rows(import_id, row_number) WHERE state = 'rejected';
        """)
}
