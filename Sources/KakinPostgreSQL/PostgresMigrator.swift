import KakinStorage

/// Applies `SQLMigration`s (their PostgreSQL form) on a connection of its own.
///
/// Processes starting at the same moment take turns through a session-level advisory lock (keyed by the
/// schema, so several Kakin schemas in one database don't wait for each other): the first migrates,
/// the others then find the history complete. The history rules are the SQLite engine's
/// (`SQLMigrationHistory`): a database migrated by a newer build refuses to run.
struct PostgresMigrator {
    /// The advisory lock's first key: "kaki" in ASCII; the second is the schema's hash.
    static let advisoryLockKey: Int32 = 0x6B61_6B69

    let settings: PostgresConnectionSettings
    let options: PostgresDatabase.Options

    func apply(_ migrations: [SQLMigration]) throws {
        let connection = try PGConnection(settings, statementsCachedMax: 16, queryRowsMax: options.queryRowsMax)
        defer { connection.close() }
        // Migrations may rebuild big tables and the lock may be held for as long: no statement timeout here.
        try connection.run("SET statement_timeout = 0; SET lock_timeout = 0")
        try connection.run("SELECT pg_advisory_lock(\(Self.advisoryLockKey), hashtext(current_schema()))")
        defer { _ = try? connection.run("SELECT pg_advisory_unlock(\(Self.advisoryLockKey), hashtext(current_schema()))") }
        try connection.run("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version BIGINT PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
            )
            """)
        let applied = try connection.query("SELECT version, name FROM schema_migrations ORDER BY version", [])
        let appliedVersions = try SQLMigrationHistory.check(applied: applied, against: migrations)
        for migration in migrations where !appliedVersions.contains(Int64(migration.version)) {
            try connection.run("BEGIN")
            do {
                try connection.run(migration.sql(for: .postgresql))
                try connection.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [.integer(Int64(migration.version)), .text(migration.name)])
                try connection.run("COMMIT")
            } catch let error as SQLError {
                connection.rollbackIfInTransaction()
                throw SQLError(kind: .migration, sqlState: error.sqlState,
                               message: "migration \(migration.version) '\(migration.name)' failed and was rolled back: \(error.message)", sql: error.sql)
            }
        }
    }
}
