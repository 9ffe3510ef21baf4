/// The rules every engine's migrator applies to `schema_migrations`, so SQLite and PostgreSQL refuse
/// the same things: versions out of order, a database migrated by a newer (or different) build, gaps.
package enum SQLMigrationHistory {
    /// Versions must be positive and strictly increasing.
    package static func validate(_ migrations: [SQLMigration]) throws {
        var previous = 0
        for migration in migrations {
            guard migration.version > previous else {
                throw SQLError(kind: .misuse, message: "migration versions must be positive and strictly increasing; \(migration.version) follows \(previous)")
            }
            previous = migration.version
        }
    }

    /// The database's history (rows with `version` and `name`) must be a prefix of the migrations this
    /// build knows, name for name, with no gap: anything else means a newer (or different) build
    /// migrated it, and we refuse to run.
    /// - Returns: the versions already applied.
    package static func check(applied: [SQLRow], against migrations: [SQLMigration]) throws -> Set<Int64> {
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
        let appliedVersions = Set(applied.compactMap { $0.int("version") })
        if let appliedMax = appliedVersions.max(),
           let gap = migrations.first(where: { Int64($0.version) < appliedMax && !appliedVersions.contains(Int64($0.version)) }) {
            throw SQLError(kind: .migration, message: "migration \(gap.version) '\(gap.name)' was never applied but later version \(appliedMax) was; refusing to apply out of order")
        }
        return appliedVersions
    }
}
