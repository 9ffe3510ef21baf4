import KakinStorage
import Synchronization

/// `SQLDatabase` over one SQLite file in WAL mode: one writer thread that group-commits, a few
/// reader threads, each with its own connection, and as many connections lent to short reads (`shortRead`),
/// which run on their caller's thread.
///
/// A write acknowledged to its caller has been committed with `synchronous=FULL` (fsync'd WAL); many
/// concurrent writes share one commit, so durability costs one fsync per batch, not per write.
public final class SQLiteDatabase: SQLDatabase {
    public struct Options: Sendable {
        /// Reader threads (each with its own read-only connection), and as many read-only connections lent to
        /// short reads (`shortRead`). 1...64.
        public var readerCount: Int
        /// Writes group-committed in one transaction at most.
        public var batchSizeMax: Int
        /// Jobs waiting per queue (writes, reads) beyond which calls throw `.overloaded` at once.
        public var queueDepthMax: Int
        /// How long a connection waits for a lock held by another process before `.busy`.
        public var busyTimeoutMs: Int
        /// `true`: `synchronous=FULL`, a returned write survives power loss. `false`: `NORMAL`, which may
        /// lose the last commits on power loss; only for test and benchmark baselines.
        public var durable: Bool
        /// Prepared statements kept per connection (least recently used evicted).
        public var statementsCachedMax: Int
        /// Rows one `query` may return before it throws `.resultTooLarge`; page with LIMIT.
        public var queryRowsMax: Int
        /// WAL frames (pages) after a commit from which the checkpoint thread copies the WAL back into the
        /// database file (SQLite's own automatic checkpoint threshold is 1,000).
        public var checkpointFramesMin: Int
        /// WAL frames after a commit from which the writer checkpoints itself before its next batch, so
        /// that the WAL can restart from its beginning: bounds the WAL at about this many pages.
        public var walFramesMax: Int

        public init(
            readerCount: Int = 2,
            batchSizeMax: Int = 512,
            queueDepthMax: Int = 10_000,
            busyTimeoutMs: Int = 5_000,
            durable: Bool = true,
            statementsCachedMax: Int = 128,
            queryRowsMax: Int = 100_000,
            checkpointFramesMin: Int = 1_000,
            walFramesMax: Int = 8_000
        ) {
            self.readerCount = readerCount
            self.batchSizeMax = batchSizeMax
            self.queueDepthMax = queueDepthMax
            self.busyTimeoutMs = busyTimeoutMs
            self.durable = durable
            self.statementsCachedMax = statementsCachedMax
            self.queryRowsMax = queryRowsMax
            self.checkpointFramesMin = checkpointFramesMin
            self.walFramesMax = walFramesMax
        }

        func validate() throws {
            func require(_ condition: Bool, _ message: String) throws {
                if !condition { throw SQLError(kind: .misuse, message: "invalid SQLiteDatabase.Options: \(message)") }
            }
            try require((1...64).contains(readerCount), "readerCount \(readerCount) not in 1...64")
            try require(batchSizeMax >= 1, "batchSizeMax must be at least 1")
            try require(queueDepthMax >= 1, "queueDepthMax must be at least 1")
            try require((0...Int(Int32.max)).contains(busyTimeoutMs), "busyTimeoutMs \(busyTimeoutMs) out of range")
            try require(statementsCachedMax >= 1, "statementsCachedMax must be at least 1")
            try require(queryRowsMax >= 1, "queryRowsMax must be at least 1")
            try require(checkpointFramesMin >= 1, "checkpointFramesMin must be at least 1")
            try require(walFramesMax >= checkpointFramesMin, "walFramesMax must be at least checkpointFramesMin")
        }
    }

    /// Counters since open; batch sizes show how much group commit is happening.
    public struct Statistics: Sendable, Hashable {
        /// Write transactions attempted (one per batch).
        public var batches = 0
        /// Write transactions committed.
        public var commits = 0
        /// Write bodies whose changes were committed.
        public var writesCommitted = 0
        /// Write bodies that threw or whose batch failed.
        public var writesFailed = 0
        /// Most bodies in one committed transaction.
        public var batchSizeLargest = 0
        /// Read bodies run.
        public var reads = 0
        /// Writes waiting right now.
        public var writeQueueDepth = 0
        /// Reads waiting right now.
        public var readQueueDepth = 0
        /// Statements run and fsyncs made (issue 26's counts).
        public var work = SQLWorkCounts()

        /// Bodies per committed transaction on average (committed and rolled-back-to-savepoint ones).
        public var batchSizeMean: Double {
            commits == 0 ? 0 : Double(bodiesInCommittedBatches) / Double(commits)
        }

        /// Bodies in all committed transactions (the sum behind `batchSizeMean`).
        public var bodiesInCommittedBatches = 0

        /// Upper bounds of the batch-size histogram's buckets (the last one also takes anything larger).
        public static let batchSizeBucketBounds = SQLBatchSizeHistogram.bucketBounds
        /// Committed transactions per batch-size bucket (not cumulative): how much group commit happens.
        public var committedBatchSizeCounts = [Int](repeating: 0, count: batchSizeBucketBounds.count)

        /// Zeros; also how another engine reports its group commit in this shape (`/metrics`).
        public init() {}
    }

    public let path: String
    public let options: Options
    private let writeQueue: JobQueue<WriterJob>
    private let readQueue: JobQueue<ReadJob>
    private let borrowedReaders: SQLiteBorrowedReaders
    private let recorder = SQLiteStatisticsRecorder()
    private let checkpointer = SQLiteCheckpointer()
    private let threads = WorkerThreads()

    /// Opens (or creates) the database at `path`, switches it to WAL and starts the writer, checkpoint
    /// and reader threads. Blocks while opening; call it at startup. `":memory:"` is refused (readers
    /// need a file).
    public init(path: String, options: Options = .init()) throws {
        try options.validate()
        let writerHandle = try SQLiteHandle(path: path, role: .writer(durable: options.durable), options: options)
        let checkpointHandle = try SQLiteHandle(path: path, role: .checkpointer(durable: options.durable), options: options)
        self.path = path
        self.options = options
        borrowedReaders = SQLiteBorrowedReaders(try (0..<options.readerCount).map { _ in
            try SQLiteHandle(path: path, role: .reader, options: options, hasThread: false)
        })
        writeQueue = JobQueue(name: "write", depthMax: options.queueDepthMax)
        readQueue = JobQueue(name: "read", depthMax: options.queueDepthMax)

        let walHook = WALCommitHook(checkpointer: checkpointer, checkpointFramesMin: options.checkpointFramesMin,
                                    walFramesMax: options.walFramesMax)
        walHook.connection = writerHandle
        writerHandle.replaceAutomaticCheckpoint(with: walHook)
        let writer = SQLiteWriter(handle: writerHandle, walHook: walHook, queue: writeQueue, batchSizeMax: options.batchSizeMax,
                                  statistics: recorder)
        threads.start(name: "sql-writer") { writer.run() }
        threads.start(name: "sql-checkpoint") { [checkpointer, recorder] in checkpointer.run(checkpointHandle) { recorder.record($0) } }
        do {
            for index in 0..<options.readerCount {
                let reader = SQLiteReader(handle: try SQLiteHandle(path: path, role: .reader, options: options), queue: readQueue,
                                          batchSizeMax: Self.readBatchSizeMax)
                threads.start(name: "sql-reader-\(index)") { reader.run() }
            }
        } catch {
            writeQueue.close()
            readQueue.close()
            borrowedReaders.close()
            checkpointer.close()
            throw error
        }
    }

    deinit {
        // Without close(): let the threads drain and exit on their own.
        writeQueue.close()
        readQueue.close()
        checkpointer.close()
    }

    public var statistics: Statistics {
        var statistics = recorder.snapshot()
        statistics.writeQueueDepth = writeQueue.depth
        statistics.readQueueDepth = readQueue.depth
        return statistics
    }

    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = WriteJob(
                run: { handle in
                    let connection = ScopedSQLConnection(handle)
                    let result = Result { try body(connection) }
                    connection.invalidate()
                    return WriteOutcome(bodyError: result.failure) { batchError in
                        if let batchError, result.failure == nil {
                            continuation.resume(throwing: batchError)
                        } else {
                            continuation.resume(with: result)
                        }
                    }
                },
                fail: { continuation.resume(throwing: $0) })
            do {
                try writeQueue.enqueue(.write(job))
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = ReadJob(
                run: { [recorder] handle in
                    let result = handle.runRead(body, recorder: recorder)
                    return ReadCompletion { transactionError in
                        if let transactionError, case .success = result {
                            continuation.resume(throwing: transactionError)
                        } else {
                            continuation.resume(with: result)
                        }
                    }
                },
                fail: { continuation.resume(throwing: $0) })
            do {
                try readQueue.enqueue(job)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    /// Runs `body` on an idle lent connection on the calling thread, in its own read transaction; with none idle,
    /// like `read`.
    public func shortRead<T: Sendable>(_ body: @escaping @Sendable (any SQLConnection) throws -> T) async throws -> T {
        guard let reader = borrowedReaders.borrow() else { return try await read(body) }
        defer { borrowedReaders.giveBack(reader) }
        let handle = reader.handle
        try handle.runEngine("BEGIN")
        let result = handle.runRead(body, recorder: recorder)
        do {
            try handle.runEngine("COMMIT")
        } catch {
            handle.rollbackIfInTransaction()
            if case .success = result { throw error }
        }
        return try result.get()
    }

    public func migrate(_ migrations: [SQLMigration]) async throws {
        try SQLMigrationHistory.validate(migrations)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let job = WriterJob.exclusive { handle in
                continuation.resume(with: Result { try SQLiteMigrator(handle: handle).apply(migrations) })
            }
            do {
                try writeQueue.enqueue(job)
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }

    public func close() async {
        writeQueue.close()
        readQueue.close()
        borrowedReaders.close()
        checkpointer.close()
        await threads.waitUntilAllExited()
    }
}

extension SQLiteDatabase {
    /// Baseline for benchmarks: commits per second of a one-row INSERT per transaction, WAL with
    /// `synchronous=FULL`, one connection, no batching. Blocks the calling thread for `seconds`; creates
    /// table `single_row_commits` in the database at `path`.
    /// - Parameters:
    ///   - path: a database file (created if missing) that no `SQLiteDatabase` is writing to.
    ///   - seconds: measuring time, 0.1...600.
    public static func measureSingleRowDurableCommits(path: String, seconds: Double) throws -> Double {
        let handle = try SQLiteHandle(path: path, role: .writer(durable: true), options: Options())
        defer { handle.close() }
        try handle.execute("CREATE TABLE IF NOT EXISTS single_row_commits (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)", [])
        return try SQLMeasure.singleRowCommitsPerSecond(on: handle, seconds: seconds)
    }
}

/// Statistics shared by the writer and reader threads.
final class SQLiteStatisticsRecorder: Sendable {
    private let state = Mutex(SQLiteDatabase.Statistics())

    func snapshot() -> SQLiteDatabase.Statistics { state.withLock { $0 } }

    /// Called before the batch's callers are resumed, so a caller that returned sees its batch counted.
    func recordBatch(size: Int, committed: Bool, bodiesSucceeded: Int, work: SQLWorkCounts) {
        precondition(size >= 1 && (0...size).contains(bodiesSucceeded), "a batch of \(size) with \(bodiesSucceeded) bodies succeeded")
        precondition(committed || bodiesSucceeded == 0, "a body of a rolled-back batch counted as succeeded")
        state.withLock { statistics in
            statistics.work.add(work)
            statistics.batches += 1
            statistics.writesCommitted += bodiesSucceeded
            statistics.writesFailed += size - bodiesSucceeded
            if committed {
                statistics.commits += 1
                statistics.bodiesInCommittedBatches += size
                statistics.batchSizeLargest = max(statistics.batchSizeLargest, size)
                statistics.committedBatchSizeCounts[SQLBatchSizeHistogram.bucketIndex(of: size)] += 1
            }
        }
    }

    func recordRead(work: SQLWorkCounts) {
        state.withLock { s in
            s.reads += 1
            s.work.add(work)
        }
    }

    /// The checkpoint thread's syncs.
    func record(_ work: SQLWorkCounts) { state.withLock { $0.work.add(work) } }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { error } else { nil }
    }
}
