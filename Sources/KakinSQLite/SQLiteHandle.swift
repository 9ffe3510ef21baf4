internal import CSQLite
internal import Glibc
import KakinStorage

/// One SQLite connection with its prepared-statement cache.
///
/// Used by exactly one thread at a time (opened with `SQLITE_OPEN_NOMUTEX`); never `Sendable`.
/// Statements are cached by SQL text, least recently used evicted beyond `statementsCachedMax`.
final class SQLiteHandle: SQLConnection {
    var dialect: SQLDialect { .sqlite }

    enum Role {
        /// Read-write, creates the file, switches it to WAL.
        case writer(durable: Bool)
        /// Read-only; relies on the writer having set WAL up.
        case reader
        /// Read-write, only copies the WAL back into the database file (`checkpoint()`); opened after the writer.
        case checkpointer(durable: Bool)
    }

    private var db: OpaquePointer?
    private let statementsCachedMax: Int
    private let queryRowsMax: Int
    private var statements: [StatementKey: CachedStatement] = [:]
    /// Result column names per prepared statement, read from SQLite once instead of once per query.
    private var columnsByStatement: [OpaquePointer: SQLColumns] = [:]
    /// BEGIN/COMMIT/SAVEPOINT… kept apart from user statements, which may never contain them.
    private var engineStatements: [String: OpaquePointer] = [:]
    private var useTick: UInt64 = 0
    /// Statements and syncs since the owning thread last took them (`takeWork`).
    private var work = SQLWorkCounts()
    private let isReader: Bool
    /// Read by the authorizer: only the engine's own statements may control transactions.
    fileprivate var allowsTransactionControl = false
    fileprivate var deniedTransactionControl = false
    /// Benchmarks only (`KAKIN_SQLITE_STATEMENT_PROFILE`); nil, and nothing installed, otherwise.
    private var profile: SQLiteStatementProfile?

    /// Process-wide settings, applied before the first connection opens.
    private static let processSettings: Void = {
        _ = kakin_sqlite_disable_memory_statistics()
    }()

    /// - Parameter hasThread: false for a connection lent to short reads (it runs on its borrowers' threads).
    init(path: String, role: Role, options: SQLiteDatabase.Options, hasThread: Bool = true,
         profileFile: String? = SQLiteStatementProfile.environmentFile) throws {
        Self.processSettings
        statementsCachedMax = options.statementsCachedMax
        queryRowsMax = options.queryRowsMax
        if case .reader = role { isReader = true } else { isReader = false }

        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if case .reader = role { flags |= SQLITE_OPEN_READONLY } else { flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE }
        var pointer: OpaquePointer?
        let rc = sqlite3_open_v2(path, &pointer, flags, nil)
        guard rc == SQLITE_OK, let pointer else {
            let message = pointer.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(pointer)
            throw SQLError(kind: .database, code: rc & 0xff, extendedCode: rc, message: "cannot open database: \(message)")
        }
        db = pointer
        sqlite3_extended_result_codes(pointer, 1)
        sqlite3_busy_timeout(pointer, Int32(options.busyTimeoutMs))
        sqlite3_set_authorizer(pointer, sqliteAuthorizer, Unmanaged.passUnretained(self).toOpaque())

        switch role {
        case .writer(let durable):
            let mode = try queryOne("PRAGMA journal_mode = WAL", [])?[0].string
            guard mode?.lowercased() == "wal" else {
                throw SQLError(kind: .misuse, message: "database cannot use WAL (journal_mode is \(mode ?? "unknown")); use a file path, not :memory:")
            }
            try execute("PRAGMA synchronous = \(durable ? "FULL" : "NORMAL")", [])
            try execute("PRAGMA foreign_keys = ON", [])
        case .checkpointer(let durable):
            // A checkpoint fsyncs the database file before the WAL may be reused, unless synchronous is OFF.
            try execute("PRAGMA synchronous = \(durable ? "FULL" : "NORMAL")", [])
        case .reader:
            break
        }
        // Statement journals of savepoints stay in memory: each write body runs in a savepoint, and a
        // temporary file per spill costs syscalls on the hot path.
        try execute("PRAGMA temp_store = MEMORY", [])
        // 64 MiB of page cache per connection (SQLite's default is 2 MiB): re-reading pages is a syscall each.
        try execute("PRAGMA cache_size = -65536", [])
        work = SQLWorkCounts()  // opening is not the work counted
        // After the settings, so that the first statement profiled runs on the connection's own thread.
        profile = profileFile.map { SQLiteStatementProfile(file: $0, db: pointer, connection: role.name, hasThread: hasThread) }
    }

    deinit { close() }

    /// Finalizes every statement and closes the connection. Idempotent.
    func close() {
        guard let db else { return }
        profile?.close()
        profile = nil
        for statement in statements.values { sqlite3_finalize(statement.pointer) }
        for statement in engineStatements.values { sqlite3_finalize(statement) }
        statements = [:]
        columnsByStatement = [:]
        engineStatements = [:]
        sqlite3_close_v2(db)
        self.db = nil
    }

    var isInTransaction: Bool { sqlite3_get_autocommit(db) == 0 }

    /// Rows inserted, updated or deleted on this connection since it opened (triggers' included): unchanged across a
    /// body that wrote nothing.
    var totalChanges: Int64 { sqlite3_total_changes64(db) }

    /// The statements (and syncs) counted since the last call, for the statistics.
    func takeWork() -> SQLWorkCounts { work.take() }

    /// A COMMIT of a write: with `synchronous=FULL` in WAL mode, one fsync of the WAL.
    func countCommitSync() { work.syncs += 1 }

    // MARK: WAL checkpoints

    /// Replaces SQLite's automatic checkpoint, which would run on the committing thread, with `hook`:
    /// called on this connection's thread after every commit, with the number of frames in the WAL.
    /// `hook` must stay alive as long as this connection.
    func replaceAutomaticCheckpoint(with hook: WALCommitHook) {
        sqlite3_wal_hook(db, { context, _, _, frames in
            guard let context else { return SQLITE_OK }
            Unmanaged<WALCommitHook>.fromOpaque(context).takeUnretainedValue().committed(walFrames: Int(frames))
            return SQLITE_OK
        }, Unmanaged.passUnretained(hook).toOpaque())
    }

    /// A PASSIVE checkpoint: copies every WAL frame no reader still needs into the database file, without
    /// waiting for readers or the writer. Returns the WAL's frames and how many of them are now copied.
    @discardableResult
    func checkpoint() throws -> (walFrames: Int, copiedFrames: Int) {
        var walFrames: Int32 = 0
        var copiedFrames: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &walFrames, &copiedFrames)
        guard rc == SQLITE_OK else { throw error(rc, sql: nil) }
        // With frames to copy, SQLite syncs the WAL before copying and the database file after.
        if walFrames > 0 { work.syncs += 2 }
        return (Int(walFrames), Int(copiedFrames))
    }

    // MARK: User statements

    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        try withStatement(sql, parameters) { statement in
            let totalChangesBefore = sqlite3_total_changes64(db)
            while try step(statement, sql) {}
            // sqlite3_changes64 keeps the count of the last INSERT/UPDATE/DELETE, even after a DDL
            // statement or a SELECT; the total tells whether this statement changed anything at all.
            return sqlite3_total_changes64(db) == totalChangesBefore ? 0 : Int(sqlite3_changes64(db))
        }
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        try withStatement(sql, parameters) { statement in
            var rows: [SQLRow] = []
            var columns: SQLColumns?
            while try step(statement, sql) {
                guard rows.count < queryRowsMax else {
                    throw SQLError(kind: .resultTooLarge, message: "query returned more than \(queryRowsMax) rows; page with LIMIT", sql: sql)
                }
                let resultColumns = columns ?? self.columns(of: statement)
                columns = resultColumns
                rows.append(Self.row(of: statement, columns: resultColumns))
            }
            return rows
        }
    }

    func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? {
        try withStatement(sql, parameters) { statement in
            guard try step(statement, sql) else { return nil }
            let row = Self.row(of: statement, columns: columns(of: statement))
            if sqlite3_stmt_readonly(statement) == 0 {
                while try step(statement, sql) {}
            }
            return row
        }
    }

    /// One after another: SQLite has no round trips to save.
    func executeBatch(_ statements: [SQLStatement]) throws -> [Int] {
        try statements.map { try execute($0.sql, $0.parameters) }
    }

    /// Runs a script of several statements (migrations). Not cached; no parameters.
    func executeScript(_ sql: String) throws {
        columnsByStatement = [:]
        try sql.withCString { start in
            var cursor = start
            while cursor.pointee != 0 {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                deniedTransactionControl = false
                let rc = sqlite3_prepare_v2(db, cursor, -1, &statement, &tail)
                guard rc == SQLITE_OK else {
                    // The failing statement and whatever follows it in the script.
                    throw prepareError(rc, sql: String(String(cString: cursor).drop(while: \.isWhitespace)))
                }
                guard let statement else { break }  // only whitespace or comments were left
                defer { sqlite3_finalize(statement) }
                let text = String(String(cString: sqlite3_sql(statement)).drop(while: \.isWhitespace))
                while try step(statement, text) {}
                guard let tail, tail != cursor else { break }
                cursor = tail
            }
        }
    }

    // MARK: Engine statements (transaction control)

    /// Runs one of the engine's own statements (BEGIN IMMEDIATE, SAVEPOINT w, COMMIT, …), cached.
    func runEngine(_ sql: String) throws {
        work.transactionControlStatements += 1
        allowsTransactionControl = true
        defer { allowsTransactionControl = false }
        let statement: OpaquePointer
        if let cached = engineStatements[sql] {
            statement = cached
        } else {
            statement = try prepare(sql, persistent: true)
            engineStatements[sql] = statement
        }
        defer { sqlite3_reset(statement) }
        while try step(statement, sql) {}
    }

    /// Rolls back whatever transaction is open; used after an error left one behind.
    func rollbackIfInTransaction() {
        guard isInTransaction else { return }
        try? runEngine("ROLLBACK")
    }

    // MARK: Internals

    /// A statement's text as the cache's key: hashed by its length and its first and last bytes, not all of them (a
    /// status read's statement is 1.2 KB, hashed at every use); equal only when the whole text is.
    private struct StatementKey: Hashable {
        let sql: String

        static let sampledBytes = 64

        func hash(into hasher: inout Hasher) {
            let utf8 = sql.utf8
            hasher.combine(utf8.count)
            let sampled: Void? = utf8.withContiguousStorageIfAvailable { bytes in
                let raw = UnsafeRawBufferPointer(bytes)
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw.prefix(Self.sampledBytes)))
                hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: raw.suffix(Self.sampledBytes)))
            }
            if sampled == nil { hasher.combine(sql) }
        }

        /// Byte for byte, as the hash reads it (`String`'s `==` is canonical equivalence: two spellings of one
        /// non-ASCII text would be equal with different hashes).
        static func == (a: Self, b: Self) -> Bool {
            let (x, y) = (a.sql.utf8, b.sql.utf8)
            guard x.count == y.count else { return false }
            let same = x.withContiguousStorageIfAvailable { l in
                y.withContiguousStorageIfAvailable { r in l.count == 0 || memcmp(l.baseAddress!, r.baseAddress!, l.count) == 0 }
            }
            return (same ?? nil) ?? x.elementsEqual(y)
        }
    }

    private final class CachedStatement {
        let pointer: OpaquePointer
        var lastUseTick: UInt64

        init(pointer: OpaquePointer, lastUseTick: UInt64) {
            self.pointer = pointer
            self.lastUseTick = lastUseTick
        }
    }

    private func withStatement<R>(_ sql: String, _ parameters: [SQLValue], _ body: (OpaquePointer) throws -> R) throws -> R {
        if isReader { work.readStatements += 1 } else { work.writeStatements += 1 }
        let statement = try cachedStatement(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(parameters, to: statement, sql: sql)
        return try body(statement)
    }

    private func cachedStatement(_ sql: String) throws -> OpaquePointer {
        guard db != nil else { throw SQLError(kind: .closed, message: "connection is closed", sql: sql) }
        useTick &+= 1
        let key = StatementKey(sql: sql)
        if let cached = statements[key] {
            cached.lastUseTick = useTick
            return cached.pointer
        }
        let pointer = try prepare(sql, persistent: true)
        if statements.count >= statementsCachedMax,
           let leastRecent = statements.min(by: { $0.value.lastUseTick < $1.value.lastUseTick }) {
            columnsByStatement.removeValue(forKey: leastRecent.value.pointer)
            sqlite3_finalize(leastRecent.value.pointer)
            statements.removeValue(forKey: leastRecent.key)
        }
        statements[key] = CachedStatement(pointer: pointer, lastUseTick: useTick)
        return pointer
    }

    /// Prepares exactly one statement; text after it (other than whitespace and comments) is refused.
    private func prepare(_ sql: String, persistent: Bool) throws -> OpaquePointer {
        deniedTransactionControl = false
        return try sql.withCString { start in
            var statement: OpaquePointer?
            var tail: UnsafePointer<CChar>?
            let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
            let rc = sqlite3_prepare_v3(db, start, -1, flags, &statement, &tail)
            guard rc == SQLITE_OK else { throw prepareError(rc, sql: sql) }
            guard let statement else { throw SQLError(kind: .misuse, message: "no SQL statement", sql: sql) }
            if let tail, tail.pointee != 0 {
                var next: OpaquePointer?
                let tailRC = sqlite3_prepare_v2(db, tail, -1, &next, nil)
                sqlite3_finalize(next)
                if tailRC != SQLITE_OK || next != nil {
                    sqlite3_finalize(statement)
                    throw SQLError(kind: .misuse, message: "one statement per call; use a migration for scripts", sql: sql)
                }
            }
            return statement
        }
    }

    private func prepareError(_ rc: Int32, sql: String) -> SQLError {
        if deniedTransactionControl {
            return SQLError(
                kind: .misuse, code: rc & 0xff, extendedCode: rc,
                message: "transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) is managed by the database, not by bodies",
                sql: sql)
        }
        return error(rc, sql: sql)
    }

    private func bind(_ parameters: [SQLValue], to statement: OpaquePointer, sql: String) throws {
        let placeholderCount = Int(sqlite3_bind_parameter_count(statement))
        guard placeholderCount == parameters.count else {
            throw SQLError(kind: .misuse, message: "statement has \(placeholderCount) placeholders but \(parameters.count) parameters were given", sql: sql)
        }
        for (offset, value) in parameters.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .null:
                rc = sqlite3_bind_null(statement, index)
            case .integer(let integer):
                rc = sqlite3_bind_int64(statement, index, integer)
            case .real(let real):
                rc = sqlite3_bind_double(statement, index, real)
            case .text(var text):
                rc = text.withUTF8 { utf8 in
                    // A nil pointer would bind NULL, so the empty string gets a real one.
                    guard let base = utf8.baseAddress else { return sqlite3_bind_text(statement, index, "", 0, kakin_sqlite_transient()) }
                    return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                        sqlite3_bind_text64(statement, index, $0, UInt64(utf8.count), kakin_sqlite_transient(), UInt8(SQLITE_UTF8))
                    }
                }
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { buffer in
                    // Same for the empty blob: bind a zero-length blob, not NULL.
                    guard let base = buffer.baseAddress else { return sqlite3_bind_zeroblob(statement, index, 0) }
                    return sqlite3_bind_blob64(statement, index, base, UInt64(buffer.count), kakin_sqlite_transient())
                }
            }
            guard rc == SQLITE_OK else { throw error(rc, sql: sql) }
        }
    }

    /// - Returns: `true` when a row is available, `false` when the statement is done.
    private func step(_ statement: OpaquePointer, _ sql: String) throws -> Bool {
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let rc: throw error(rc, sql: sql)
        }
    }

    private func error(_ rc: Int32, sql: String?) -> SQLError {
        let primary = rc & 0xff
        let kind: SQLError.Kind = switch primary {
        case SQLITE_CONSTRAINT: .constraintViolation
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        case SQLITE_FULL: .full
        default: .database
        }
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        return SQLError(kind: kind, code: primary, extendedCode: rc, message: message, sql: sql)
    }

    /// The statement's result columns, read from SQLite on first use. A schema change can change what
    /// `SELECT *` returns: scripts (migrations) forget them all, and a changed count is read again.
    private func columns(of statement: OpaquePointer) -> SQLColumns {
        let count = sqlite3_column_count(statement)
        if let known = columnsByStatement[statement], known.names.count == Int(count) { return known }
        let columns = SQLColumns(names: (0..<count).map { String(cString: sqlite3_column_name(statement, $0)) })
        columnsByStatement[statement] = columns
        return columns
    }

    private static func row(of statement: OpaquePointer, columns: SQLColumns) -> SQLRow {
        var values: [SQLValue] = []
        values.reserveCapacity(columns.names.count)
        for index in 0..<Int32(columns.names.count) {
            switch sqlite3_column_type(statement, index) {
            case SQLITE_INTEGER:
                values.append(.integer(sqlite3_column_int64(statement, index)))
            case SQLITE_FLOAT:
                values.append(.real(sqlite3_column_double(statement, index)))
            case SQLITE3_TEXT:
                let text = sqlite3_column_text(statement, index)
                let count = Int(sqlite3_column_bytes(statement, index))
                values.append(.text(text.map { String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self) } ?? ""))
            case SQLITE_BLOB:
                let blob = sqlite3_column_blob(statement, index)
                let count = Int(sqlite3_column_bytes(statement, index))
                values.append(.blob(blob.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? []))
            default:
                values.append(.null)
            }
        }
        return SQLRow(columns: columns, values: values)
    }
}

/// Refuses transaction control in statements the engine did not write itself, so a body can never
/// commit or roll back a batch that holds other callers' writes.
private func sqliteAuthorizer(
    _ context: UnsafeMutableRawPointer?, _ action: Int32,
    _: UnsafePointer<CChar>?, _: UnsafePointer<CChar>?, _: UnsafePointer<CChar>?, _: UnsafePointer<CChar>?
) -> Int32 {
    guard action == SQLITE_TRANSACTION || action == SQLITE_SAVEPOINT, let context else { return SQLITE_OK }
    let handle = Unmanaged<SQLiteHandle>.fromOpaque(context).takeUnretainedValue()
    if handle.allowsTransactionControl { return SQLITE_OK }
    handle.deniedTransactionControl = true
    return SQLITE_DENY
}

