/// Executes statements inside the current unit of work (a write's savepoint or a read's snapshot).
///
/// Not `Sendable`: a connection is only valid inside the closure it was handed to; using it after that
/// closure returned throws `SQLError` of kind `.misuse`. SQL uses `?` placeholders. Transaction control
/// (`BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT`, `RELEASE`) belongs to the database and is refused.
public protocol SQLConnection: AnyObject {
    /// Which SQL the engine speaks, for the rare statement that cannot be written once for both
    /// (e.g. PostgreSQL's `FOR UPDATE SKIP LOCKED`). Everything else is portable SQL.
    var dialect: SQLDialect { get }

    /// Runs one statement to completion.
    /// - Returns: rows inserted, updated or deleted by this statement itself (not by triggers);
    ///   0 for statements that change nothing, so `INSERT … ON CONFLICT DO NOTHING` returns 0 or 1.
    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int

    /// Runs one statement and returns all its rows (at most the implementation's row limit).
    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow]

    /// Runs one statement and returns its first row, or `nil`. A data-changing statement
    /// (`INSERT … RETURNING`) still runs to completion.
    func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow?

    /// Runs `statements` in order, as many `execute` calls would, for a body that reads none of their answers before
    /// the last one ran: PostgreSQL sends them all in one round trip (pipeline mode) instead of one each; SQLite runs
    /// them one after another (it has no round trips). The first statement that fails throws its error and the ones
    /// after it change nothing (on PostgreSQL the server skips them).
    /// - Returns: each statement's count, as `execute` returns it.
    @discardableResult
    func executeBatch(_ statements: [SQLStatement]) throws -> [Int]

    /// Runs `batch`'s statements in order and checks that each changed the rows it says, for a write body that reads
    /// none of their answers and lets their errors end it (it would not catch them). PostgreSQL (a writer's attempt) sends
    /// them with the write's next round trip — the body's next statement, or the next body's first one, or `COMMIT` —
    /// each wrapped so that a count other than its own is an error on the server, which skips what follows (`COMMIT`
    /// included); the write then runs again with them sent at once, so the body sees the counts (or its error) where it
    /// queued them. Elsewhere (SQLite, a re-run, a read) they run at once, as `executeBatch`.
    /// - Returns: whether every statement changed the rows it says: `true` when they wait (their counts are checked on
    ///   the server), `false` when they ran at once and a count differed (every statement ran).
    func executeLater(_ batch: WriteBatch) throws -> Bool
}

/// One statement and its parameters, for `SQLConnection.executeBatch`.
public struct SQLStatement: Sendable, Hashable {
    public var sql: String
    public var parameters: [SQLValue]

    public init(_ sql: String, _ parameters: [SQLValue]) {
        self.sql = sql
        self.parameters = parameters
    }
}

extension SQLConnection {
    /// At once, as `executeBatch`: the engines without round trips to save.
    public func executeLater(_ batch: WriteBatch) throws -> Bool {
        try executeAtOnce(batch)
    }

    /// `executeLater` without waiting: runs `batch` with `executeBatch` and compares the counts.
    public func executeAtOnce(_ batch: WriteBatch) throws -> Bool {
        try batch.isEmpty || executeBatch(batch.statements) == batch.changes
    }

    /// Variadic form: `try db.execute("INSERT INTO t (k, v) VALUES (?, ?)", "key", 42)`.
    @discardableResult
    public func execute(_ sql: String, _ parameters: SQLValue...) throws -> Int {
        try execute(sql, parameters)
    }

    public func query(_ sql: String, _ parameters: SQLValue...) throws -> [SQLRow] {
        try query(sql, parameters)
    }

    public func queryOne(_ sql: String, _ parameters: SQLValue...) throws -> SQLRow? {
        try queryOne(sql, parameters)
    }
}

/// The SQL engines Kakin runs on.
public enum SQLDialect: String, Sendable {
    case sqlite
    case postgresql
}

/// A SQL database with durable, group-committed writes and snapshot reads.
///
/// Implemented by `SQLiteDatabase` (`KakinSQLite`, one process) and `PostgresDatabase` (`KakinPostgreSQL`, any number of
/// processes). On PostgreSQL a body may run more than once (a serialization failure re-runs its whole
/// transaction) and beside bodies of other processes: bodies do nothing but SQL and compute their result
/// from what they read, so a re-run is harmless and the committed run is the one the caller sees.
public protocol SQLDatabase: Sendable {
    /// Runs `body` inside a durable write and returns its result once it is on disk.
    ///
    /// Concurrent writes are group-committed: their bodies run one after another inside one transaction,
    /// each in its own savepoint. A body that throws rolls back only its own changes and its error is
    /// rethrown here unchanged; the other bodies commit. The call returns only after the commit (and its
    /// fsync) succeeded; if the commit fails, every body of that batch gets the error and none of them
    /// is applied. Bodies must be short and synchronous, do no I/O besides SQL, and must not wait for
    /// other database calls (that would deadlock the single writer). A queued write is not cancellable.
    /// - Parameter body: the unit of work; may run on another thread.
    /// - Throws: the body's error, a `SQLError` from the commit, or `SQLError` of kind `.overloaded` /
    ///   `.closed` when the write was not queued at all.
    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Runs `body` in a read-only transaction: every query in it sees one consistent snapshot of the
    /// last committed state. Reads run beside writes.
    /// - Parameter body: the unit of work; may run on another thread.
    func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// `read` for a short read (a few statements on indexed keys, no scan): an engine may run it on the calling
    /// thread, sparing the hop to a reader thread and back, which costs more than such a read itself. Never for a
    /// read that may take long (a listing, an export, a report): it would hold a thread of Swift's cooperative pool.
    func shortRead<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T

    /// Applies the migrations this database has not seen yet, in order, each in its own transaction,
    /// recording each version in `schema_migrations`. Running it again is a no-op. Processes that call it
    /// at the same moment take turns: one migrates, the others wait and then find nothing left to do.
    /// - Parameter migrations: every migration this build knows, versions strictly increasing.
    /// - Throws: `SQLError` of kind `.migration` if a migration fails (it is rolled back) or if the
    ///   database holds a version this build does not know (a newer build migrated it): refuse to start.
    func migrate(_ migrations: [SQLMigration]) async throws

    /// Finishes all queued work, then closes the connections and stops the threads.
    /// Later calls throw `SQLError` of kind `.closed`.
    func close() async
}

/// One schema change. `sql` may hold several statements but no transaction control.
///
/// Write `sql` once in portable SQL (`BIGINT`/`TEXT` columns, `ON CONFLICT`, no engine functions): every
/// engine runs it. Only a migration that cannot be portable (migration 1 predates PostgreSQL support:
/// `AUTOINCREMENT`, `WITHOUT ROWID`, `BLOB`) carries a `postgresql` form, which PostgreSQL runs instead.
public struct SQLMigration: Sendable, Hashable {
    public var version: Int
    public var name: String
    public var sql: String
    /// PostgreSQL's form of this migration, when `sql` is not portable; nil = PostgreSQL runs `sql`.
    public var postgresql: String?

    public init(version: Int, name: String, sql: String, postgresql: String? = nil) {
        self.version = version
        self.name = name
        self.sql = sql
        self.postgresql = postgresql
    }

    /// The script `dialect` runs.
    public func sql(for dialect: SQLDialect) -> String {
        switch dialect {
        case .sqlite: sql
        case .postgresql: postgresql ?? sql
        }
    }
}

/// What a write or read body sees: forwards to the engine's connection while the body runs and refuses
/// afterwards, so a body that kept its connection cannot touch another unit of work.
public final class ScopedSQLConnection<Base: SQLConnection>: SQLConnection {
    private var base: Base?
    public let dialect: SQLDialect

    public init(_ base: Base) {
        self.base = base
        dialect = base.dialect
    }

    /// Called when the body returned; later use throws.
    public func invalidate() { base = nil }

    public func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        try live(sql).execute(sql, parameters)
    }

    public func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        try live(sql).query(sql, parameters)
    }

    public func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? {
        try live(sql).queryOne(sql, parameters)
    }

    public func executeBatch(_ statements: [SQLStatement]) throws -> [Int] {
        try live(statements.first?.sql ?? "").executeBatch(statements)
    }

    public func executeLater(_ batch: WriteBatch) throws -> Bool {
        try live(batch.statements.first?.sql ?? "").executeLater(batch)
    }

    private func live(_ sql: String) throws -> Base {
        guard let base else {
            throw SQLError(kind: .misuse, message: "SQLConnection used after the closure it was handed to returned", sql: sql)
        }
        return base
    }
}

/// The buckets every engine sorts its committed batch sizes into, so `/metrics` shows one histogram
/// (`kakin_db_commit_batch_size`) whichever engine runs.
public enum SQLBatchSizeHistogram {
    /// Upper bounds of the buckets (the last one also takes anything larger).
    public static let bucketBounds = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]

    /// The index of the bucket `size` is counted in.
    public static func bucketIndex(of size: Int) -> Int {
        precondition(size >= 1, "a committed batch holds at least one body")
        return bucketBounds.firstIndex { size <= $0 } ?? bucketBounds.count - 1
    }
}

/// The benchmarks' baseline, the same on both engines.
public enum SQLMeasure {
    /// Commits per second of one-row INSERTs into `single_row_commits (payload)`, each its own transaction,
    /// back to back on `connection` for `seconds` (0.1...600). Blocks the calling thread.
    public static func singleRowCommitsPerSecond(on connection: some SQLConnection, seconds: Double) throws -> Double {
        precondition((0.1...600).contains(seconds), "seconds must be in 0.1...600")
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start.advanced(by: .seconds(seconds))
        var commits = 0
        while clock.now < deadline {
            try connection.execute("INSERT INTO single_row_commits (payload) VALUES (?)", [.text("coin")])
            commits += 1
        }
        return Double(commits) / (start.duration(to: clock.now) / .seconds(1))
    }
}

extension SQLDatabase {
    /// An engine without a faster way runs a short read like any other.
    public func shortRead<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await read(body)
    }
}
