internal import CLibPQ
import KakinCore
import KakinStorage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One libpq connection with its prepared-statement cache. Every call blocks, so it is used only on
/// the database's own threads, by one thread at a time; never `Sendable`.
///
/// Statements from bodies are prepared once per connection (named `k1`, `k2`, …, least recently used
/// evicted beyond `statementsCachedMax`) and run with text parameters; results come back as text and
/// are read by their column type into `SQLValue`s.
///
/// Round trips are what a statement costs most (the server wakes up, answers, Kakin's thread wakes up), so
/// the engine's own statements can wait (`later`) and travel with the next body statement in one round
/// trip (libpq's pipeline mode): `BEGIN` with a read's first query, `RELEASE SAVEPOINT w; SAVEPOINT w`
/// with the next write's first statement; a statement new to the connection goes with its `PREPARE`;
/// `executeBatch` sends a body's statements whose answers it does not need in between all at once; and a write
/// body's `executeLater` statements wait like the engine's, so a body's last writes travel with the savepoint
/// turnover and the next body's first statement, or with `COMMIT`.
final class PGConnection: SQLConnection {
    var dialect: SQLDialect { .postgresql }

    private var conn: OpaquePointer?
    private let statementsCachedMax: Int
    private let queryRowsMax: Int
    private var statements: [String: CachedStatement] = [:]
    private var translations: [String: PostgresSQLText] = [:]
    private var useTick: UInt64 = 0
    private var nextStatementNumber = 0
    /// Set when any statement failed with a serialization failure or a deadlock (SQLSTATE 40001/40P01),
    /// even if a body caught the error: the transaction must then be re-run as a whole.
    private(set) var sawSerializationFailure = false
    /// Statements waiting to go out ahead of the next statement, in order.
    private var waiting: [Waiting] = []
    /// Set when one of the waiting engine statements failed (the error a body then saw is not its own).
    private(set) var engineStatementFailed = false
    /// Set when a body's `executeLater` statement failed after it was queued (the writer runs the write again
    /// with `defersLater` off, so the body that queued it sees its error).
    private(set) var laterStatementFailed = false
    /// Whether `executeLater` statements wait for the next round trip (a writer's attempt) or run at once.
    var defersLater = false
    /// Which body of the writer's batch queues `executeLater` statements now (`dropLater(ofBody:)`).
    var currentBody = 0

    /// A statement waiting for the next round trip: the engine's own, or a body's `executeLater`.
    private enum Waiting {
        case engine(String)
        case later(BoundStatement, body: Int)
    }
    /// Statements and round trips since the owning thread last took them (`takeWork`).
    private var work = SQLWorkCounts()
    /// A reader's connection: its body statements are counted as reads.
    var readsOnly = false

    /// Opens a connection. Blocks for at most the settings' connect timeout.
    /// - Throws: `SQLError` `.unavailable` with libpq's message (which never contains the password).
    init(_ settings: PostgresConnectionSettings, statementsCachedMax: Int, queryRowsMax: Int) throws {
        self.statementsCachedMax = statementsCachedMax
        self.queryRowsMax = queryRowsMax
        let pairs = settings.keywordValues
        let pointer: OpaquePointer? = withCStrings(pairs.map(\.0)) { keywords in
            withCStrings(pairs.map(\.1)) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let pointer, PQstatus(pointer) == CONNECTION_OK else {
            let message = pointer.map { Self.text(PQerrorMessage($0)) } ?? "out of memory"
            PQfinish(pointer)
            throw SQLError(kind: .unavailable, message: "cannot connect to PostgreSQL at \(settings.redactedURL): \(message)")
        }
        conn = pointer
        // The server's notices would go to standard error around Kakin's JSON log lines; errors come back
        // as results, and nothing in a notice needs acting on.
        PQsetNoticeProcessor(pointer, { _, _ in }, nil)
        do {
            try run(settings.sessionSetup)
        } catch {
            close()
            throw error
        }
        work = SQLWorkCounts()  // opening is not the work counted
    }

    deinit { close() }

    /// Ends the session. Idempotent.
    func close() {
        guard let conn else { return }
        PQfinish(conn)
        self.conn = nil
        statements = [:]
    }

    /// The server went away (restart, failover, network): the connection is useless and must be replaced.
    var isBroken: Bool { conn == nil || PQstatus(conn) != CONNECTION_OK }

    /// A statement failed inside the open transaction and it was not rolled back yet.
    var transactionFailed: Bool { conn != nil && PQtransactionStatus(conn) == PQTRANS_INERROR }

    var inTransaction: Bool {
        guard let conn else { return false }
        let status = PQtransactionStatus(conn)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    func resetFailureFlags() {
        sawSerializationFailure = false
        engineStatementFailed = false
        laterStatementFailed = false
    }

    /// The statements and round trips counted since the last call, for the statistics.
    func takeWork() -> SQLWorkCounts { work.take() }

    /// Queues engine statements (no parameters) to go out with the next statement, in its round trip.
    func later(_ statements: String...) { waiting += statements.map(Waiting.engine) }

    /// Whether engine statements are still waiting (nothing has been sent since `later`).
    var hasWaiting: Bool {
        waiting.contains { if case .engine = $0 { true } else { false } }
    }

    /// Forgets the waiting statements (the transaction they belonged to is given up).
    func dropWaiting() {
        unregister(waiting)
        waiting.removeAll()
    }

    /// Forgets the `executeLater` statements `body` queued and that are still waiting (the body threw: they never go out).
    func dropLater(ofBody body: Int) {
        let ofBody: (Waiting) -> Bool = { if case .later(_, body: body) = $0 { true } else { false } }
        unregister(waiting.filter(ofBody))
        waiting.removeAll(where: ofBody)
    }

    /// A statement dropped before it was sent was not prepared on the server either: prepare it when next used.
    private func unregister(_ dropped: [Waiting]) {
        for case .later(let statement, _) in dropped where statement.prepared.unprepared != nil {
            statements.removeValue(forKey: statement.prepared.key)
        }
    }

    // MARK: Engine statements

    /// Runs the database's own statements (BEGIN, SAVEPOINT, COMMIT, DDL scripts) with the simple query
    /// protocol: several statements separated by `;` are allowed, parameters are not.
    /// - Returns: the last statement's command tag (`COMMIT`, `ROLLBACK`, …).
    /// Waiting engine statements go out first, in the same round trip.
    /// - Returns: the last statement's command tag (`COMMIT`, `ROLLBACK`, …).
    @discardableResult
    func run(_ sql: String) throws -> String {
        guard let conn else { throw SQLError(kind: .unavailable, message: "connection is closed", sql: sql) }
        if !waiting.isEmpty {
            let statements = waiting + [.engine(sql)]
            waiting.removeAll()
            return try pipeline(statements, then: []).lastTag
        }
        work.transactionControlStatements += 1
        work.roundTrips += 1
        let result = PQexec(conn, sql)
        defer { PQclear(result) }
        try check(result, sql: sql)
        return Self.text(PQcmdStatus(result))
    }

    /// Rolls back whatever transaction is open; used after an error left one behind.
    func rollbackIfInTransaction() {
        dropWaiting()
        guard inTransaction else { return }
        _ = try? run("ROLLBACK")
    }

    // MARK: Body statements

    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        try withResult(sql, parameters) { Self.changedRows($0) }
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        try withResult(sql, parameters) { result in
            let count = Int(PQntuples(result))
            guard count <= queryRowsMax else {
                throw SQLError(kind: .resultTooLarge, message: "query returned more than \(queryRowsMax) rows; page with LIMIT", sql: sql)
            }
            return Self.rows(result, range: 0..<count)
        }
    }

    func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? {
        try withResult(sql, parameters) { result in
            PQntuples(result) == 0 ? nil : Self.rows(result, range: 0..<1)[0]
        }
    }

    // MARK: Internals

    private struct CachedStatement {
        let name: String
        let placeholderCount: Int
        var lastUseTick: UInt64
    }

    private func withResult<R>(_ sql: String, _ parameters: [SQLValue], _ body: (OpaquePointer) throws -> R) throws -> R {
        guard let conn else { throw SQLError(kind: .unavailable, message: "connection is closed", sql: sql) }
        let statement = try boundStatement(sql, parameters)
        if !waiting.isEmpty || statement.prepared.unprepared != nil {
            // With the waiting engine statements, or its PREPARE: one round trip all the same.
            let statements = waiting
            waiting.removeAll()
            let result = try pipeline(statements, then: [statement]).results[0]!
            defer { PQclear(result) }
            return try body(result)
        }
        countBodyStatement()
        work.roundTrips += 1
        let result = withOptionalCStrings(statement.texts) { values in
            PQexecPrepared(conn, statement.prepared.name, Int32(statement.texts.count), values, nil, nil, 0)
        }
        defer { PQclear(result) }
        try check(result, sql: sql)
        return try body(result!)
    }

    /// A body statement ready to send: prepared (or to prepare), its parameters as text.
    private struct BoundStatement {
        var prepared: PreparedStatement
        var texts: [String?]
        var sql: String
    }

    private func boundStatement(_ sql: String, _ parameters: [SQLValue]) throws -> BoundStatement {
        // Parameter types are fixed when a statement is prepared: one prepared form per combination.
        var key = ""
        key.reserveCapacity(parameters.count + sql.utf8.count + 1)
        for value in parameters { key.append(Self.typeLetter(value)) }
        key.append("\u{0}")
        key.append(sql)
        let prepared = try preparedStatement(key: key, sql: sql, parameters: parameters)
        return BoundStatement(prepared: prepared, texts: try parameters.map { try Self.parameterText($0, sql: sql) }, sql: sql)
    }

    private func countBodyStatement() {
        if readsOnly { work.readStatements += 1 } else { work.writeStatements += 1 }
    }

    /// In a writer's attempt (`defersLater`): bound now (a misuse throws here), sent with the next round trip, each
    /// statement wrapped by `checkingChanges`. Otherwise at once, with the counts compared here.
    func executeLater(_ batch: WriteBatch) throws -> Bool {
        guard defersLater else { return try executeAtOnce(batch) }
        for (statement, changes) in zip(batch.statements, batch.changes) {
            let checked = try boundStatement(Self.checkingChanges(statement.sql, changes), statement.parameters)
            waiting.append(.later(checked, body: currentBody))
        }
        return true
    }

    /// `sql` (an INSERT, UPDATE or DELETE without RETURNING) as one statement that fails — division by zero, SQLSTATE
    /// 22012 — unless it changed `changes` rows, so that nothing sent after it in the same round trip (`COMMIT`) runs.
    static func checkingChanges(_ sql: String, _ changes: Int) -> String {
        "WITH changed AS (\(sql) RETURNING 1) SELECT 1 / (CASE WHEN COUNT(*) = \(changes) THEN 1 ELSE 0 END) FROM changed"
    }

    /// All of `statements` (and the waiting statements ahead of them) in one round trip.
    @discardableResult
    func executeBatch(_ statements: [SQLStatement]) throws -> [Int] {
        if statements.isEmpty { return [] }
        var bound: [BoundStatement] = []
        bound.reserveCapacity(statements.count)
        for statement in statements { bound.append(try boundStatement(statement.sql, statement.parameters)) }
        let engine = waiting
        waiting.removeAll()
        let results = try pipeline(engine, then: bound).results
        defer { for result in results { PQclear(result) } }
        return results.map { Self.changedRows($0!) }
    }

    /// What `execute` answers for a result: rows changed by an INSERT, UPDATE, DELETE or MERGE, else 0.
    private static func changedRows(_ result: OpaquePointer) -> Int {
        let tag = text(PQcmdStatus(result))
        guard ["INSERT", "UPDATE", "DELETE", "MERGE"].contains(where: tag.hasPrefix) else { return 0 }
        return Int(text(PQcmdTuples(result))) ?? 0
    }

    /// A statement ready to run: its prepared name, and what to prepare first if the server does not know it yet.
    private struct PreparedStatement {
        var key: String
        var name: String
        var unprepared: (text: String, types: [Oid])?
    }

    /// Sends the `queued` statements (engine statements and `executeLater` ones, in order), then the body statements
    /// (each prepared first when new to this connection), and one sync, in one round trip; then reads every answer in order.
    /// - Returns: each body statement's result (the caller clears them) and the last engine statement's tag.
    /// - Throws: the first waiting statement's error (with `engineStatementFailed` or `laterStatementFailed` set), else
    ///   the first body statement's (the server skipped the ones after it).
    private func pipeline(_ queued: [Waiting], then bodyStatements: [BoundStatement]) throws -> (results: [OpaquePointer?], lastTag: String) {
        guard let conn else { throw SQLError(kind: .unavailable, message: "connection is closed") }
        guard PQenterPipelineMode(conn) == 1 else { throw SQLError(kind: .database, message: "cannot enter pipeline mode: \(Self.text(PQerrorMessage(conn)))") }
        work.roundTrips += 1
        var sent = true
        func send(_ statement: BoundStatement) {
            countBodyStatement()
            let prepared = statement.prepared
            if let unprepared = prepared.unprepared {
                sent = sent && unprepared.types.withUnsafeBufferPointer {
                    PQsendPrepare(conn, prepared.name, unprepared.text, Int32(unprepared.types.count), $0.baseAddress)
                } == 1
            }
            sent = sent && withOptionalCStrings(statement.texts) { PQsendQueryPrepared(conn, prepared.name, Int32(statement.texts.count), $0, nil, nil, 0) } == 1
        }
        for item in queued {
            switch item {
            case .engine(let sql):
                work.transactionControlStatements += 1
                sent = sent && PQsendQueryParams(conn, sql, 0, nil, nil, nil, nil, 0) == 1
            case .later(let statement, _):
                send(statement)
            }
        }
        for statement in bodyStatements { send(statement) }
        sent = sent && PQpipelineSync(conn) == 1
        // Every answer is read even after a failure, so the connection leaves pipeline mode clean.
        var engineError: (any Error)?
        var lastTag = ""
        func next() -> OpaquePointer? {
            let result = PQgetResult(conn)
            if result != nil { while let extra = PQgetResult(conn) { PQclear(extra) } }  // each query's answer ends with NULL
            return result
        }
        func aborted(_ result: OpaquePointer?) -> Bool { result.map(PQresultStatus) == PGRES_PIPELINE_ABORTED }
        /// A body statement's answer, or nil after its own error (or its PREPARE's) or a skipped one; the first error goes to `error`.
        func answer(_ statement: BoundStatement, failure: inout (any Error)?) -> OpaquePointer? {
            if statement.prepared.unprepared != nil {
                let result = next()
                defer { PQclear(result) }
                if result.map(PQresultStatus) != PGRES_COMMAND_OK {
                    // Not prepared on the server (refused, or skipped after an earlier error): prepare it again next time.
                    statements.removeValue(forKey: statement.prepared.key)
                    if !aborted(result) {
                        do { try check(result, sql: statement.sql) } catch { failure = failure ?? error }
                    }
                }
            }
            let result = next()
            if failure == nil, !aborted(result) {
                do {
                    try check(result, sql: statement.sql)
                    return result
                } catch {
                    failure = error
                }
            }
            PQclear(result)
            return nil
        }
        var laterError: (any Error)?
        for item in queued where sent {
            switch item {
            case .engine(let sql):
                let result = next()
                defer { PQclear(result) }
                if aborted(result) { continue }
                do {
                    try check(result, sql: sql)
                    lastTag = Self.text(PQcmdStatus(result))
                } catch {
                    engineError = engineError ?? error
                }
            case .later(let statement, _):
                var error: (any Error)?
                PQclear(answer(statement, failure: &error))
                laterError = laterError ?? error
            }
        }
        var results: [OpaquePointer?] = []
        // After a waiting statement's error the body statements' answers are only read (the server skipped them).
        var firstError = engineError ?? laterError
        for statement in bodyStatements where sent { results.append(answer(statement, failure: &firstError)) }
        let bodyError = engineError == nil && laterError == nil ? firstError : nil
        if sent {
            // The sync's own answer (PGRES_PIPELINE_SYNC), unless the connection died.
            if let sync = PQgetResult(conn) { PQclear(sync) }
        }
        let exited = PQexitPipelineMode(conn) == 1
        let failure: (any Error)?
        if !sent || !exited || isBroken {
            let message = Self.text(PQerrorMessage(conn))
            // Answers left unread, or no connection: this one cannot be used any more.
            close()
            failure = SQLError(kind: .unavailable, message: "the connection to PostgreSQL broke: \(message)")
        } else if let engineError {
            engineStatementFailed = true
            failure = engineError
        } else if let laterError {
            laterStatementFailed = true
            failure = laterError
        } else {
            failure = bodyError
        }
        if let failure {
            for result in results { PQclear(result) }
            throw failure
        }
        return (results, lastTag)
    }

    private func preparedStatement(key: String, sql: String, parameters: [SQLValue]) throws -> PreparedStatement {
        useTick &+= 1
        if let cached = statements[key] {
            statements[key]!.lastUseTick = useTick
            guard cached.placeholderCount == parameters.count else { throw placeholderMismatch(cached.placeholderCount, parameters.count, sql) }
            return PreparedStatement(key: key, name: cached.name, unprepared: nil)
        }
        let translated: PostgresSQLText
        if let known = translations[sql] {
            translated = known
        } else {
            translated = try PostgresSQLText(sql)
            if translations.count >= statementsCachedMax * 2 { translations.removeAll(keepingCapacity: true) }
            translations[sql] = translated
        }
        guard translated.placeholderCount == parameters.count else { throw placeholderMismatch(translated.placeholderCount, parameters.count, sql) }
        if statements.count >= statementsCachedMax, let leastRecent = statements.min(by: { $0.value.lastUseTick < $1.value.lastUseTick }) {
            statements.removeValue(forKey: leastRecent.key)
            // Outside a failed transaction only: there DEALLOCATE itself would fail (the name is then
            // simply never reused).
            if !transactionFailed { _ = try? run("DEALLOCATE \(leastRecent.value.name)") }
        }
        nextStatementNumber += 1
        let name = "k\(nextStatementNumber)"
        // Counted as known now; taken out again if preparing fails.
        statements[key] = CachedStatement(name: name, placeholderCount: parameters.count, lastUseTick: useTick)
        return PreparedStatement(key: key, name: name, unprepared: (translated.text, parameters.map(Self.typeOID)))
    }

    private func placeholderMismatch(_ placeholders: Int, _ given: Int, _ sql: String) -> SQLError {
        SQLError(kind: .misuse, message: "statement has \(placeholders) placeholders but \(given) parameters were given", sql: sql)
    }

    /// Throws the result's error, if any; notes serialization failures for the writer.
    private func check(_ result: OpaquePointer?, sql: String) throws {
        let status = result.map(PQresultStatus) ?? PGRES_FATAL_ERROR
        if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY { return }
        let sqlState = result.flatMap { PQresultErrorField($0, kakin_pg_diag_sqlstate) }.map { String(cString: $0) }
        var message = result.flatMap { PQresultErrorField($0, kakin_pg_diag_message_primary) }.map { String(cString: $0) }
            ?? conn.map { Self.text(PQerrorMessage($0)) } ?? "no connection"
        // Data exceptions quote the offending input ("invalid input syntax for type bigint: \"…\""):
        // errors never carry parameter values, so the quote goes.
        if sqlState?.hasPrefix("22") == true, let colon = message.firstIndex(of: ":") { message = String(message[..<colon]) }
        if sqlState == "40001" || sqlState == "40P01" { sawSerializationFailure = true }
        throw SQLError(kind: isBroken ? .unavailable : Self.kind(sqlState: sqlState), sqlState: sqlState,
                       message: message.trimmingCharacters(in: .whitespacesAndNewlines), sql: sql)
    }

    static func kind(sqlState: String?) -> SQLError.Kind {
        guard let sqlState else { return .database }
        switch sqlState {
        case "40001", "40P01": return .conflict
        case "55P03", "57014": return .busy  // lock_timeout, statement_timeout
        case "53100": return .full  // disk_full: 503 like SQLite's full disk, resumes when space returns
        case "53200", "53300": return .overloaded  // out_of_memory, too_many_connections
        // The server is shutting down, restarting or starting up: reconnecting may reach it (or the new primary).
        case "57P01", "57P02", "57P03": return .unavailable
        default: break
        }
        if sqlState.hasPrefix("23") { return .constraintViolation }
        if sqlState.hasPrefix("08") { return .unavailable }
        return .database
    }

    /// The letter of a value's prepared parameter type (see `typeOID`).
    private static func typeLetter(_ value: SQLValue) -> Character {
        switch value {
        case .integer: "i"
        case .real: "r"
        case .blob: "b"
        case .null, .text: "u"
        }
    }

    /// Integers are `bigint` and reals `double precision` (so `SELECT ? AS n` reads back a number),
    /// blobs `bytea`; text and NULL are left for PostgreSQL to infer from where they are used.
    private static func typeOID(_ value: SQLValue) -> Oid {
        switch value {
        case .integer: 20
        case .real: 701
        case .blob: 17
        case .null, .text: 0
        }
    }

    private static func parameterText(_ value: SQLValue, sql: String) throws -> String? {
        switch value {
        case .null: return nil
        case .integer(let n): return String(n)
        case .real(let d):
            if d.isNaN { return "NaN" }
            if d.isInfinite { return d > 0 ? "Infinity" : "-Infinity" }
            return "\(d)"
        case .text(let s):
            guard !s.utf8.contains(0) else { throw SQLError(kind: .misuse, message: "PostgreSQL text cannot hold a NUL character", sql: sql) }
            return s
        case .blob(let bytes):
            return "\\x" + Hex.encode(bytes)
        }
    }

    private static func rows(_ result: OpaquePointer, range: Range<Int>) -> [SQLRow] {
        let fieldCount = PQnfields(result)
        let columns = SQLColumns(names: (0..<fieldCount).map { String(cString: PQfname(result, $0)) })
        let types = (0..<fieldCount).map { PQftype(result, $0) }
        var rows: [SQLRow] = []
        rows.reserveCapacity(range.count)
        for row in range {
            var values: [SQLValue] = []
            values.reserveCapacity(Int(fieldCount))
            for field in 0..<fieldCount {
                let r = Int32(row)
                if PQgetisnull(result, r, field) != 0 {
                    values.append(.null)
                    continue
                }
                let length = Int(PQgetlength(result, r, field))
                let bytes = UnsafeRawBufferPointer(start: PQgetvalue(result, r, field), count: length)
                values.append(value(bytes, type: types[Int(field)]))
            }
            rows.append(SQLRow(columns: columns, values: values))
        }
        return rows
    }

    /// A text-format value by its column type: integers (and booleans, as 1/0) to `.integer`, floats to
    /// `.real`, `numeric` to `.integer` when whole (`SUM(bigint)` is numeric) else `.real`, `bytea`
    /// to `.blob`, everything else to `.text`.
    private static func value(_ bytes: UnsafeRawBufferPointer, type: Oid) -> SQLValue {
        let text = { String(decoding: bytes, as: UTF8.self) }
        switch type {
        case 20, 21, 23, 26: return Int64(text()).map(SQLValue.integer) ?? .text(text())
        case 16: return .integer(bytes.first == UInt8(ascii: "t") ? 1 : 0)
        case 700, 701:
            let t = text()
            switch t {
            case "NaN": return .real(.nan)
            case "Infinity": return .real(.infinity)
            case "-Infinity": return .real(-.infinity)
            default: return Double(t).map(SQLValue.real) ?? .text(t)
            }
        case 1700:
            let t = text()
            if let n = Int64(t) { return .integer(n) }
            if let dot = t.firstIndex(of: "."), t[t.index(after: dot)...].allSatisfy({ $0 == "0" }), let n = Int64(t[..<dot]) { return .integer(n) }
            return Double(t).map(SQLValue.real) ?? .text(t)
        case 17: return .blob(decodeBytea(bytes))
        default: return .text(text())
        }
    }

    /// `\x48656c6c6f` (PostgreSQL's hex output) to bytes.
    private static func decodeBytea(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x") else { return Array(bytes) }
        func nibble(_ c: UInt8) -> UInt8 { Hex.nibble(c) ?? 0 }
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count - 2) / 2)
        var i = 2
        while i + 1 < bytes.count {
            out.append(nibble(bytes[i]) << 4 | nibble(bytes[i + 1]))
            i += 2
        }
        return out
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    private static func text(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }
}

/// Calls `body` with a C array of NUL-terminated copies of `strings` (valid only during the call).
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    withOptionalCStrings(strings.map { Optional($0) } + [nil], body)
}

/// The same for optional strings: nil becomes a NULL pointer (a SQL NULL parameter, or the array's end).
func withOptionalCStrings<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    // An empty list still gets a real array (libpq reads nothing from it).
    let copies: [UnsafeMutablePointer<CChar>?] = strings.isEmpty ? [nil] : strings.map { $0.map { strdup($0)! } }
    defer { for copy in copies { free(copy) } }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}
