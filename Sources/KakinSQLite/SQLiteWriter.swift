import KakinStorage

/// A job for the writer thread.
enum WriterJob: Sendable {
    /// A `write` body; consecutive writes are group-committed in one transaction.
    case write(WriteJob)
    /// Work that manages its own transactions (migrations); always runs alone, between batches.
    case exclusive(@Sendable (SQLiteHandle) -> Void)

    var isWrite: Bool { if case .write = self { true } else { false } }
}

/// One caller's `write`, type-erased.
struct WriteJob: Sendable {
    /// Runs the body inside the writer's transaction (and savepoint, when isolated); may run more than once.
    let run: @Sendable (SQLiteHandle) -> WriteOutcome
    /// Resumes the caller with `error` without running the body (the batch could not begin).
    let fail: @Sendable (any Error) -> Void
}

/// A body's result, held until its batch commits or fails.
struct WriteOutcome {
    /// The body's own error; `nil` when it returned normally.
    let bodyError: (any Error)?
    /// Resumes the caller: with the body's error if it threw, else with `batchError` if the batch
    /// failed, else with the body's result.
    let finish: (_ batchError: (any Error)?) -> Void
}

/// The single writer: drains the queue in batches, one transaction per batch (`runTransaction`).
///
/// Owns its connection; lives on its own thread (`run()` returns when the queue is closed and empty).
final class SQLiteWriter {
    private let handle: SQLiteHandle
    /// Installed on `handle`, which holds it unretained: kept alive here.
    private let walHook: WALCommitHook
    private let queue: JobQueue<WriterJob>
    private let batchSizeMax: Int
    private let statistics: SQLiteStatisticsRecorder

    init(handle: SQLiteHandle, walHook: WALCommitHook, queue: JobQueue<WriterJob>, batchSizeMax: Int,
         statistics: SQLiteStatisticsRecorder) {
        self.handle = handle
        self.walHook = walHook
        self.queue = queue
        self.batchSizeMax = batchSizeMax
        self.statistics = statistics
    }

    func run() {
        while let jobs = queue.take(countMax: batchSizeMax, joining: { $0.isWrite && $1.isWrite }) {
            precondition((1...batchSizeMax).contains(jobs.count), "a write batch holds 1...batchSizeMax jobs")
            if case .exclusive(let work) = jobs[0] {
                precondition(jobs.count == 1, "an exclusive job runs alone")
                work(handle)
                continue
            }
            var pending = jobs.map { job -> WriteJob in
                guard case .write(let write) = job else { preconditionFailure("exclusive job inside a write batch") }
                return write
            }[...]
            var isolated = false
            while !pending.isEmpty {
                (pending, isolated) = runTransaction(pending, isolated: isolated)
            }
        }
        handle.close()
    }

    /// Runs `jobs` in one BEGIN IMMEDIATE … COMMIT and resumes their callers after the COMMIT.
    ///
    /// Bodies run without a savepoint of their own: inside one, SQLite copies every page a body first changes into a
    /// statement journal (a third of a grant's statement time), and nearly every body succeeds. A body that throws having
    /// changed no row (the connection's total changes are as before it: refused before writing, a replayed or reused
    /// idempotency key) leaves nothing to undo. One that throws after changing rows cannot be undone alone: the
    /// transaction is rolled back, nobody is answered, and the same jobs run again `isolated`, each body inside
    /// `SAVEPOINT w`, rolled back to it when it throws (a body may run more than once, as on PostgreSQL).
    /// - Returns: the jobs left to run (none; those not run because SQLite abandoned the transaction part-way; or all of
    ///   them again), and whether they run isolated.
    private func runTransaction(_ jobs: ArraySlice<WriteJob>, isolated: Bool) -> (rest: ArraySlice<WriteJob>, isolated: Bool) {
        precondition((1...batchSizeMax).contains(jobs.count), "a write transaction runs 1...batchSizeMax bodies")
        do {
            try handle.runEngine("BEGIN IMMEDIATE")
        } catch {
            abandon([], alsoFailing: jobs, error: error)
            return ([], false)
        }
        var outcomes: [WriteOutcome] = []
        outcomes.reserveCapacity(jobs.count)
        for index in jobs.indices {
            if isolated {
                do {
                    try handle.runEngine("SAVEPOINT w")
                } catch {
                    abandon(outcomes, alsoFailing: jobs[index...index], error: error)
                    return (jobs[(index + 1)...], isolated)
                }
            }
            let changesBefore = handle.totalChanges
            let outcome = jobs[index].run(handle)
            do {
                // Some errors (disk full, I/O) make SQLite roll back the whole transaction: the
                // earlier bodies' work is gone too, so none of them may be acknowledged.
                guard handle.isInTransaction else {
                    let cause = outcome.bodyError as? SQLError
                    throw SQLError(
                        kind: cause?.kind == .full ? .full : .database,
                        message: "the batch transaction was rolled back by SQLite after an error; this write was not applied"
                            + (outcome.bodyError.map { " (cause: \($0))" } ?? ""))
                }
                if isolated {
                    if outcome.bodyError != nil { try handle.runEngine("ROLLBACK TO w") }
                    try handle.runEngine("RELEASE w")
                } else if outcome.bodyError != nil, handle.totalChanges != changesBefore {
                    // Its rows can only go with everyone's: the work so far is counted with the next attempt's.
                    try handle.runEngine("ROLLBACK")
                    return (jobs, true)
                }
            } catch {
                abandon(outcomes + [outcome], error: error)
                return (jobs[(index + 1)...], isolated)
            }
            outcomes.append(outcome)
        }
        do {
            try handle.runEngine("COMMIT")
        } catch {
            abandon(outcomes, error: error)
            return ([], false)
        }
        handle.countCommitSync()
        let succeeded = outcomes.count { $0.bodyError == nil }
        statistics.recordBatch(size: outcomes.count, committed: true, bodiesSucceeded: succeeded, work: handle.takeWork())
        for outcome in outcomes { outcome.finish(nil) }
        return ([], false)
    }

    /// Rolls the transaction back and fails every body that ran in it, and `unrun` jobs without running them.
    private func abandon(_ outcomes: [WriteOutcome], alsoFailing unrun: ArraySlice<WriteJob> = [], error: any Error) {
        handle.rollbackIfInTransaction()
        statistics.recordBatch(size: outcomes.count + unrun.count, committed: false, bodiesSucceeded: 0, work: handle.takeWork())
        for outcome in outcomes { outcome.finish(error) }
        for job in unrun { job.fail(error) }
    }
}

/// A reader thread: one read-only connection. Reads queued together share one read transaction (like
/// writes share a commit): each still sees a snapshot taken after it was queued, and the batch pays for
/// one BEGIN/COMMIT and its file locks instead of one per read.
final class SQLiteReader {
    private let handle: SQLiteHandle
    private let queue: JobQueue<ReadJob>
    private let batchSizeMax: Int

    init(handle: SQLiteHandle, queue: JobQueue<ReadJob>, batchSizeMax: Int) {
        self.handle = handle
        self.queue = queue
        self.batchSizeMax = batchSizeMax
    }

    func run() {
        while let jobs = queue.take(countMax: batchSizeMax, joining: { _, _ in true }) {
            do {
                try handle.runEngine("BEGIN")
            } catch {
                for job in jobs { job.fail(error) }
                continue
            }
            let completions = jobs.map { $0.run(handle) }
            var commitError: (any Error)?
            do {
                try handle.runEngine("COMMIT")
            } catch {
                handle.rollbackIfInTransaction()
                commitError = error
            }
            for completion in completions { completion.finish(commitError) }
        }
        handle.close()
    }
}

/// One caller's `read`, type-erased.
struct ReadJob: Sendable {
    /// Runs the body inside the reader's transaction; the result waits for the transaction's end.
    let run: @Sendable (SQLiteHandle) -> ReadCompletion
    /// Resumes the caller with `error` without running the body (the transaction could not begin).
    let fail: @Sendable (any Error) -> Void
}

/// Resumes a reader's caller: with the body's result, or with `transactionError` when the body
/// succeeded but its transaction did not end cleanly.
struct ReadCompletion {
    let finish: (_ transactionError: (any Error)?) -> Void
}
