import KakinStorage

/// Applies `SQLMigration`s on the writer's connection, outside any write batch.
struct SQLiteMigrator {
    let handle: SQLiteHandle

    func apply(_ migrations: [SQLMigration]) throws {
        try handle.executeScript("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
            )
            """)
        let applied = try inTransaction {
            try handle.query("SELECT version, name FROM schema_migrations ORDER BY version", [])
        }
        let appliedVersions = try SQLMigrationHistory.check(applied: applied, against: migrations)
        for migration in migrations where !appliedVersions.contains(Int64(migration.version)) {
            try inTransaction {
                // Another process may have applied it since we looked; the write lock is ours now.
                guard try handle.queryOne("SELECT 1 FROM schema_migrations WHERE version = ?", [SQLValue(migration.version)]) == nil else { return }
                do {
                    try handle.executeScript(migration.sql(for: .sqlite))
                } catch let error as SQLError {
                    throw SQLError(
                        kind: .migration, code: error.code, extendedCode: error.extendedCode,
                        message: "migration \(migration.version) '\(migration.name)' failed and was rolled back: \(error.message)",
                        sql: error.sql)
                }
                try handle.execute("INSERT INTO schema_migrations (version, name) VALUES (?, ?)", [SQLValue(migration.version), .text(migration.name)])
            }
        }
    }

    private func inTransaction<T>(_ body: () throws -> T) throws -> T {
        try handle.runEngine("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try handle.runEngine("COMMIT")
            return result
        } catch {
            handle.rollbackIfInTransaction()
            throw error
        }
    }
}
