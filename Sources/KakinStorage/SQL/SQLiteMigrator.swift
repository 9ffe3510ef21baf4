/// Applies `SQLMigration`s on the writer's connection, outside any write batch.
struct SQLiteMigrator {
    let handle: SQLiteHandle

    static func validate(_ migrations: [SQLMigration]) throws {
        var previous = 0
        for migration in migrations {
            guard migration.version > previous else {
                throw SQLError(kind: .misuse, message: "migration versions must be positive and strictly increasing; \(migration.version) follows \(previous)")
            }
            previous = migration.version
        }
    }

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
        try check(applied: applied, against: migrations)
        let appliedVersions = Set(applied.compactMap { $0.int("version") })
        if let appliedMax = appliedVersions.max(),
           let gap = migrations.first(where: { Int64($0.version) < appliedMax && !appliedVersions.contains(Int64($0.version)) }) {
            throw SQLError(kind: .migration, message: "migration \(gap.version) '\(gap.name)' was never applied but later version \(appliedMax) was; refusing to apply out of order")
        }
        for migration in migrations where !appliedVersions.contains(Int64(migration.version)) {
            try inTransaction {
                // Another process may have applied it since we looked; the write lock is ours now.
                guard try handle.queryOne("SELECT 1 FROM schema_migrations WHERE version = ?", [SQLValue(migration.version)]) == nil else { return }
                do {
                    try handle.executeScript(migration.sql)
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

    /// The database's history must be a prefix of the migrations this build knows, name for name:
    /// anything else means a newer (or different) build migrated it, and we refuse to run.
    private func check(applied: [SQLRow], against migrations: [SQLMigration]) throws {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { (Int64($0.version), $0) })
        let knownMax = migrations.last?.version ?? 0
        for row in applied {
            let version = row.int("version") ?? 0
            let name = row.string("name") ?? ""
            guard let migration = known[version] else {
                throw SQLError(kind: .migration, message: "database has schema version \(version) ('\(name)') which this build does not know (it knows up to \(knownMax)); refusing to run against a newer schema")
            }
            guard migration.name == name else {
                throw SQLError(kind: .migration, message: "schema version \(version) was applied as '\(name)' but this build calls it '\(migration.name)'")
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
