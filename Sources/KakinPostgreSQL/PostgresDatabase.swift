import Foundation
import KakinCore
import KakinStorage
import Synchronization

/// `SQLDatabase` over PostgreSQL (libpq), for any number of Kakin processes on one database.
///
/// - Writes run at SERIALIZABLE. Several queued bodies share one transaction (group commit), each in its
///   own savepoint, on one of `writerConnections` connections (each on its own thread). When PostgreSQL
///   reports a serialization failure or deadlock, the whole transaction is rolled back and its bodies
///   run again (smaller batches each time) — so a body needs no locks of its own to stay correct beside
///   other processes: PostgreSQL guarantees the committed result equals some serial order.
/// - A write returns after `COMMIT` returned; with `synchronous_commit` on (the server's default) that is
///   after the WAL reached disk (and the synchronous standbys, if configured).
/// - Reads run at REPEATABLE READ READ ONLY on `readerConnections` connections: one snapshot per body.
/// - A connection that broke (server restart, failover) is replaced on its next use. A write whose
///   transaction broke before `COMMIT` was sent runs again on the new connection; one whose `COMMIT` got
///   no answer fails with `.outcomeUnknown` (it may have committed: never reported as done).
public final class PostgresDatabase: SQLDatabase {
    public struct Options: Sendable {
        /// Connections (and threads) running write transactions. 1...64. A writer runs its batch's statements
        /// one round trip after another, so a second one overlaps them (and the commits); more add little and
        /// conflict more: parallel batches touch the same index pages, which SERIALIZABLE reports as conflicts.
        public var writerConnections: Int
        /// Connections (and threads) running reads. 1...64.
        public var readerConnections: Int
        /// Write bodies group-committed in one transaction at most.
        public var batchSizeMax: Int
        /// Jobs waiting per queue (writes, reads) beyond which calls throw `.overloaded` at once.
        public var queueDepthMax: Int
        /// libpq's `connect_timeout`.
        public var connectTimeoutSeconds: Int
        /// Server-side limit per statement (`statement_timeout`); a body's statement running longer fails.
        public var statementTimeoutMs: Int
        /// Longest wait for a row lock (`lock_timeout`).
        public var lockTimeoutMs: Int
        /// The server ends a session that sits in a transaction this long (a stuck process can't hold locks).
        public var idleInTransactionTimeoutMs: Int
        /// Times a transaction is run again after serialization failures before its bodies fail with `.conflict`.
        public var serializationRetriesMax: Int
        /// After a failed connect, calls fail at once for this long instead of each waiting for a connect timeout.
        public var reconnectBackoffMs: Int
        /// Prepared statements kept per connection (least recently used evicted).
        public var statementsCachedMax: Int
        /// Rows one `query` may return before it throws `.resultTooLarge`.
        public var queryRowsMax: Int

        public init(
            writerConnections: Int = 2,
            readerConnections: Int = 4,
            batchSizeMax: Int = 128,
            queueDepthMax: Int = 10_000,
            connectTimeoutSeconds: Int = 5,
            statementTimeoutMs: Int = 10_000,
            lockTimeoutMs: Int = 5_000,
            idleInTransactionTimeoutMs: Int = 60_000,
            serializationRetriesMax: Int = 30,
            reconnectBackoffMs: Int = 250,
            statementsCachedMax: Int = 256,
            queryRowsMax: Int = 100_000
        ) {
            self.writerConnections = writerConnections
            self.readerConnections = readerConnections
            self.batchSizeMax = batchSizeMax
            self.queueDepthMax = queueDepthMax
            self.connectTimeoutSeconds = connectTimeoutSeconds
            self.statementTimeoutMs = statementTimeoutMs
            self.lockTimeoutMs = lockTimeoutMs
            self.idleInTransactionTimeoutMs = idleInTransactionTimeoutMs
            self.serializationRetriesMax = serializationRetriesMax
            self.reconnectBackoffMs = reconnectBackoffMs
            self.statementsCachedMax = statementsCachedMax
            self.queryRowsMax = queryRowsMax
        }

        func validate() throws {
            func require(_ condition: Bool, _ message: String) throws {
                if !condition { throw SQLError(kind: .misuse, message: "invalid PostgresDatabase.Options: \(message)") }
            }
            try require((1...64).contains(writerConnections), "writerConnections \(writerConnections) not in 1...64")
            try require((1...64).contains(readerConnections), "readerConnections \(readerConnections) not in 1...64")
            try require((1...10_000).contains(batchSizeMax), "batchSizeMax \(batchSizeMax) not in 1...10000")
            try require(queueDepthMax >= 1, "queueDepthMax must be at least 1")
            try require((1...600).contains(connectTimeoutSeconds), "connectTimeoutSeconds \(connectTimeoutSeconds) not in 1...600")
            try require((1...3_600_000).contains(statementTimeoutMs), "statementTimeoutMs \(statementTimeoutMs) not in 1...3600000")
            try require((1...3_600_000).contains(lockTimeoutMs), "lockTimeoutMs \(lockTimeoutMs) not in 1...3600000")
            try require((1_000...3_600_000).contains(idleInTransactionTimeoutMs), "idleInTransactionTimeoutMs not in 1000...3600000")
            try require((0...1_000).contains(serializationRetriesMax), "serializationRetriesMax not in 0...1000")
            try require((0...60_000).contains(reconnectBackoffMs), "reconnectBackoffMs not in 0...60000")
            try require(statementsCachedMax >= 1, "statementsCachedMax must be at least 1")
            try require(queryRowsMax >= 1, "queryRowsMax must be at least 1")
        }
    }

    /// Counters since open.
    public struct Statistics: Sendable, Hashable {
        /// Write transactions committed.
        public var commits = 0
        /// Write bodies whose changes were committed.
        public var writesCommitted = 0
        /// Write bodies that threw or whose writes failed.
        public var writesFailed = 0
        /// Most bodies in one committed transaction.
        public var batchSizeLargest = 0
        /// Transactions run again after a serialization failure or deadlock.
        public var serializationRetries = 0
        /// Connections opened again after one broke.
        public var reconnects = 0
        /// Writes whose COMMIT got no answer (reported as `.outcomeUnknown`).
        public var outcomesUnknown = 0
        /// Read bodies run.
        public var reads = 0
        /// Writes waiting right now.
        public var writeQueueDepth = 0
        /// Statements run and round trips made (issue 26's counts).
        public var work = SQLWorkCounts()

        /// Bodies per committed transaction on average.
        public var batchSizeMean: Double { commits == 0 ? 0 : Double(bodiesInCommittedBatches) / Double(commits) }

        /// Bodies in all committed transactions (the sum behind `batchSizeMean`).
        public var bodiesInCommittedBatches = 0
        /// Committed transactions per batch-size bucket (not cumulative), the buckets of
        /// `SQLBatchSizeHistogram.bucketBounds`, so both engines report one histogram.
        public var committedBatchSizeCounts = [Int](repeating: 0, count: SQLBatchSizeHistogram.bucketBounds.count)
    }

    public let options: Options
    /// The URL without its password, for logs.
    public let redactedURL: String
    let settings: PostgresConnectionSettings
    private let writeQueue: JobQueue<PGWriteJob>
    private let readQueue: JobQueue<PGReadJob>
    let recorder = PostgresStatisticsRecorder()
    private let threads = WorkerThreads()

    /// Starts the writer and reader threads; each opens its connection right away and again whenever it
    /// broke. Does not wait for them: `migrate` (which every start runs) reports an unreachable server.
    /// - Parameters:
    ///   - url: `postgresql://user[:password]@host[:port]/database[?sslmode=…&…]`, any URL libpq accepts.
    ///   - password: overrides the URL's password (Kakin reads it from the environment variable the config names).
    public init(url: String, password: String? = nil, options: Options = .init()) throws {
        try options.validate()
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            throw SQLError(kind: .misuse, message: "not a postgresql:// URL")
        }
        self.options = options
        settings = PostgresConnectionSettings(
            url: url, password: password, connectTimeoutSeconds: options.connectTimeoutSeconds, statementTimeoutMs: options.statementTimeoutMs,
            lockTimeoutMs: options.lockTimeoutMs, idleInTransactionTimeoutMs: options.idleInTransactionTimeoutMs)
        redactedURL = settings.redactedURL
        writeQueue = JobQueue(name: "write", depthMax: options.queueDepthMax)
        readQueue = JobQueue(name: "read", depthMax: options.queueDepthMax)
        let gate = WriterGate()
        for index in 0..<options.writerConnections {
            var system = SystemRandomNumberGenerator()
            let writer = PostgresWriter(session: makeSession(), queue: writeQueue, options: options, statistics: recorder, gate: gate,
                                        random: SeededRandom(seed: system.next()))
            threads.start(name: "pg-writer-\(index)") { writer.run() }
        }
        for index in 0..<options.readerConnections {
            let reader = PostgresReader(session: makeSession(), queue: readQueue, statistics: recorder)
            threads.start(name: "pg-reader-\(index)") { reader.run() }
        }
    }

    deinit {
        writeQueue.close()
        readQueue.close()
    }

    func makeSession() -> PGSession {
        PGSession(settings: settings, options: options, statistics: recorder)
    }

    /// `url` with any password replaced by `***`.
    public static func redacted(_ url: String) -> String { PostgresConnectionSettings.redact(url) }

    public var statistics: Statistics {
        var statistics = recorder.snapshot()
        statistics.writeQueueDepth = writeQueue.depth
        return statistics
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = PGWriteJob(
                run: { connection in
                    let scoped = ScopedSQLConnection(connection)
                    let result = Result { try body(scoped) }
                    scoped.invalidate()
                    return PGWriteOutcome(bodyError: result.failure) { continuation.resume(with: result) }
                },
                fail: { continuation.resume(throwing: $0) })
            do {
                try writeQueue.enqueue(job)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = PGReadJob { connection in
                let scoped = ScopedSQLConnection(connection)
                let result = Result { try body(scoped) }
                scoped.invalidate()
                return PGReadOutcome { continuation.resume(with: result) }
            } fail: {
                continuation.resume(throwing: $0)
            }
            do {
                try readQueue.enqueue(job)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    public func migrate(_ migrations: [SQLMigration]) async throws {
        try SQLMigrationHistory.validate(migrations)
        let settings = settings, options = options
        // On a thread of its own: it may wait a long time for another process's migration.
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let thread = Thread {
                continuation.resume(with: Result { try PostgresMigrator(settings: settings, options: options).apply(migrations) })
            }
            thread.name = "pg-migrate"
            thread.start()
        }
    }

    public func close() async {
        writeQueue.close()
        readQueue.close()
        await threads.waitUntilAllExited()
    }
}

extension PostgresDatabase {
    /// Baseline for benchmarks: commits per second of a one-row INSERT per transaction on one connection
    /// with `synchronous_commit = on` (each commit waits for its WAL flush), no batching. Blocks the
    /// calling thread for `seconds`; creates table `single_row_commits`.
    /// - Parameters:
    ///   - url: the server to measure (the one Kakin runs on).
    ///   - seconds: measuring time, 0.1...600.
    public static func measureSingleRowDurableCommits(url: String, password: String? = nil, seconds: Double) throws -> Double {
        let options = Options()
        let settings = PostgresConnectionSettings(
            url: url, password: password, connectTimeoutSeconds: options.connectTimeoutSeconds, statementTimeoutMs: options.statementTimeoutMs,
            lockTimeoutMs: options.lockTimeoutMs, idleInTransactionTimeoutMs: options.idleInTransactionTimeoutMs)
        let connection = try PGConnection(settings, statementsCachedMax: 4, queryRowsMax: 1)
        defer { connection.close() }
        try connection.run("SET synchronous_commit = on; CREATE TABLE IF NOT EXISTS single_row_commits (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL)")
        return try SQLMeasure.singleRowCommitsPerSecond(on: connection, seconds: seconds)
    }
}

/// Statistics shared by the database's threads.
final class PostgresStatisticsRecorder: Sendable {
    private let state = Mutex(PostgresDatabase.Statistics())

    func snapshot() -> PostgresDatabase.Statistics { state.withLock { $0 } }

    func recordCommit(size: Int, bodiesSucceeded: Int) {
        precondition(size >= 1 && (0...size).contains(bodiesSucceeded), "a batch of \(size) with \(bodiesSucceeded) bodies succeeded")
        state.withLock { s in
            s.commits += 1
            s.writesCommitted += bodiesSucceeded
            s.writesFailed += size - bodiesSucceeded
            s.bodiesInCommittedBatches += size
            s.batchSizeLargest = max(s.batchSizeLargest, size)
            s.committedBatchSizeCounts[SQLBatchSizeHistogram.bucketIndex(of: size)] += 1
        }
    }

    func recordFailedWrites(_ count: Int, outcomeUnknown: Bool) {
        state.withLock { s in
            s.writesFailed += count
            if outcomeUnknown { s.outcomesUnknown += count }
        }
    }

    func recordRetry() { state.withLock { $0.serializationRetries += 1 } }
    func recordReconnect() { state.withLock { $0.reconnects += 1 } }
    func record(_ work: SQLWorkCounts) { state.withLock { $0.work.add(work) } }

    func recordRead(work: SQLWorkCounts) {
        state.withLock { s in
            s.reads += 1
            s.work.add(work)
        }
    }
}

extension Result {
    var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
