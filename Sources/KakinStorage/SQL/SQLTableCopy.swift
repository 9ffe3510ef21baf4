/// Copies every table of a SQLite database into another database with the same schema (PostgreSQL, for
/// `kakin migrate-db`): tables in foreign-key order, rows in primary-key order, in bounded pages, each page
/// one write; then identity sequences move past the copied ids. Both databases must be migrated to the same
/// schema already and the target must be empty; nobody may write to the source meanwhile.
public struct SQLTableCopy: Sendable {
    /// Rows read and written per page.
    public var pageRowsMax = 500

    /// Rows copied per table.
    public struct Report: Sendable {
        public var rowsByTable: [(table: String, rows: Int)] = []
    }

    public init() {}

    /// - Parameters:
    ///   - progress: called after each table (its name and row count).
    /// - Throws: `SQLError` `.misuse` if the source is not SQLite, a table is missing from the target, or the
    ///   target already holds rows.
    public func copy(from source: any SQLDatabase, to target: any SQLDatabase,
                     progress: (String, Int) -> Void = { _, _ in }) async throws -> Report {
        let tables = try await source.read { db -> [SourceTable] in
            guard db.dialect == .sqlite else { throw SQLError(kind: .misuse, message: "the source of a copy must be a SQLite database") }
            return try Self.sqliteTables(db)
        }
        let targetTables = try await target.read { db in try Self.tableNames(db) }
        for table in tables {
            guard targetTables.contains(table.name) else {
                throw SQLError(kind: .misuse, message: "table \(table.name) is missing from the target; migrate both with the same build first")
            }
        }
        for table in tables {
            let occupied = try await target.read { db in try db.queryOne("SELECT 1 AS one FROM \(Self.quoted(table.name)) LIMIT 1", []) != nil }
            guard !occupied else { throw SQLError(kind: .misuse, message: "the target's table \(table.name) already holds rows; copy into an empty database") }
        }
        var report = Report()
        for table in tables {
            var copied = 0
            var after: [SQLValue]?
            while true {
                let page = try await source.read { [pageRowsMax, after] db in try table.page(db, after: after, limit: pageRowsMax) }
                if page.isEmpty { break }
                let insert = table.insertSQL
                let rows = page.map { Array($0.values.prefix(table.columns.count)) }
                try await target.write { db in
                    for row in rows { try db.execute(insert, row) }
                }
                copied += page.count
                after = table.key(of: page[page.count - 1])
            }
            report.rowsByTable.append((table.name, copied))
            progress(table.name, copied)
        }
        try await target.write { db in try Self.advanceIdentities(db) }
        return report
    }

    /// One table of the source: its columns, the columns it is paged by, the tables it refers to.
    struct SourceTable: Sendable {
        var name: String
        var columns: [String]
        /// Primary-key columns, or `rowid` for a table without one.
        var keyColumns: [String]
        var references: Set<String>

        var insertSQL: String {
            "INSERT INTO \(SQLTableCopy.quoted(name)) (\(columns.map(SQLTableCopy.quoted).joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        }

        /// The next page after the row with key `after` (nil: the first page). Key columns are selected after
        /// the table's columns, as `k0`, `k1`, ….
        func page(_ db: any SQLConnection, after: [SQLValue]?, limit: Int) throws -> [SQLRow] {
            let keys = keyColumns.map { $0 == "rowid" ? "rowid" : SQLTableCopy.quoted($0) }
            let selected = (columns.map(SQLTableCopy.quoted) + keys.enumerated().map { "\($1) AS k\($0)" }).joined(separator: ", ")
            let tuple = "(" + keys.joined(separator: ", ") + ")"
            let placeholders = "(" + Array(repeating: "?", count: keys.count).joined(separator: ", ") + ")"
            let condition = after == nil ? "" : " WHERE \(tuple) > \(placeholders)"
            return try db.query("SELECT \(selected) FROM \(SQLTableCopy.quoted(name))\(condition) ORDER BY \(keys.joined(separator: ", ")) LIMIT ?",
                                (after ?? []) + [.integer(Int64(limit))])
        }

        func key(of row: SQLRow) -> [SQLValue] { keyColumns.indices.map { row["k\($0)"] } }
    }

    /// The source's tables (without `schema_migrations`, which each database keeps for itself), each after
    /// the tables its foreign keys point to.
    static func sqliteTables(_ db: any SQLConnection) throws -> [SourceTable] {
        let names = try db.query("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'schema_migrations' ORDER BY name", [])
            .compactMap { $0.string("name") }
        var tables: [SourceTable] = []
        for name in names {
            let info = try db.query("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid", [.text(name)])
            let columns = info.compactMap { $0.string("name") }
            let keys = info.filter { ($0.int("pk") ?? 0) > 0 }.sorted { ($0.int("pk") ?? 0) < ($1.int("pk") ?? 0) }.compactMap { $0.string("name") }
            let references = Set(try db.query("SELECT \"table\" AS referenced FROM pragma_foreign_key_list(?)", [.text(name)]).compactMap { $0.string("referenced") })
            tables.append(SourceTable(name: name, columns: columns, keyColumns: keys.isEmpty ? ["rowid"] : keys, references: references.subtracting([name])))
        }
        // Foreign-key order: a table comes after every table it refers to.
        var ordered: [SourceTable] = []
        var remaining = tables
        while !remaining.isEmpty {
            let placed = Set(ordered.map(\.name))
            guard let next = remaining.firstIndex(where: { $0.references.isSubset(of: placed) }) else {
                throw SQLError(kind: .misuse, message: "the tables' foreign keys form a cycle: \(remaining.map(\.name))")
            }
            ordered.append(remaining.remove(at: next))
        }
        return ordered
    }

    static func tableNames(_ db: any SQLConnection) throws -> Set<String> {
        switch db.dialect {
        case .sqlite:
            return Set(try db.query("SELECT name FROM sqlite_master WHERE type = 'table'", []).compactMap { $0.string("name") })
        case .postgresql:
            return Set(try db.query("""
                SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'
                """, []).compactMap { $0.string("name") })
        }
    }

    /// PostgreSQL identity columns (migration 1's `seq`s) continue after the largest copied value.
    static func advanceIdentities(_ db: any SQLConnection) throws {
        guard db.dialect == .postgresql else { return }
        let identities = try db.query("""
            SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'
            """, [])
        for identity in identities {
            guard let table = identity.string("table_name"), let column = identity.string("column_name") else { continue }
            _ = try db.query("""
                SELECT setval(pg_get_serial_sequence(?, ?), COALESCE((SELECT MAX(\(quoted(column))) FROM \(quoted(table))), 0) + 1, false) AS next
                """, [.text(quoted(table)), .text(column)])
        }
    }

    static func quoted(_ identifier: String) -> String { "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
}
