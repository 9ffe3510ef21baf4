/// What a database has done since it opened, counted where it happens: the counts behind a path's budget
/// (statements × a statement's cost, round trips × a round trip's, fsyncs × an fsync's; `Benchmarks/README.md`).
/// Each engine counts on its own threads in plain integers and adds them to its statistics under the lock it takes
/// anyway once per batch or read, so counting costs an addition per statement.
public struct SQLWorkCounts: Sendable, Hashable {
    /// Statements write bodies ran (every run: a PostgreSQL re-run counts again), `executeBatch`'s one by one.
    public var writeStatements = 0
    /// Statements read bodies ran.
    public var readStatements = 0
    /// The engine's own statements: BEGIN, SAVEPOINT, RELEASE, ROLLBACK, COMMIT.
    public var transactionControlStatements = 0
    /// PostgreSQL: answers waited for, one per exchange with the server however many statements it carried
    /// (pipeline mode); preparing a statement first seen on a connection is one more. SQLite: 0.
    public var roundTrips = 0
    /// SQLite: fsyncs Kakin made the disk do: one per COMMIT of a write (`synchronous=FULL` in WAL mode syncs the WAL),
    /// two per checkpoint that copied frames (the WAL before copying, the database file after). PostgreSQL: 0 (the
    /// server's WAL flushes: `pg_stat_wal.wal_sync`).
    public var syncs = 0

    public init() {}

    /// Adds `other`'s counts (another thread's, folded into the statistics).
    public mutating func add(_ other: SQLWorkCounts) {
        writeStatements += other.writeStatements
        readStatements += other.readStatements
        transactionControlStatements += other.transactionControlStatements
        roundTrips += other.roundTrips
        syncs += other.syncs
    }

    /// Answers the counts so far and starts again from zero (a connection's thread, at the end of its batch or read).
    public mutating func take() -> SQLWorkCounts {
        defer { self = SQLWorkCounts() }
        return self
    }
}
