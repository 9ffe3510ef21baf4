import Foundation
import KakinCore
import KakinStorage

/// One caller's `write`, type-erased. Its body may run several times (each failed attempt's result is
/// dropped); the caller is resumed exactly once: by the committed attempt's `deliver`, or by `fail`.
struct PGWriteJob: Sendable {
    /// Runs the body inside the transaction (or savepoint) the writer opened.
    let run: @Sendable (PGConnection) -> PGWriteOutcome
    /// Resumes the caller with an error without delivering any run's result.
    let fail: @Sendable (any Error) -> Void
}

/// One run of a body, held until its transaction commits (then `deliver`) or is given up.
struct PGWriteOutcome {
    /// The body's own error; `nil` when it returned normally.
    let bodyError: (any Error)?
    /// Resumes the caller with this run's result (its value or its own error).
    let deliver: () -> Void
}

/// A writer thread: takes batches of queued writes and commits each batch in one SERIALIZABLE transaction,
/// one savepoint per body, on its own connection. Several writers (threads, and other processes) commit
/// at once; PostgreSQL's serializable isolation makes their combined effect equal to some serial order,
/// and when it cannot it fails a transaction, which is then run again here — at once and with no other
/// writer of this process beside it (`WriterGate`), then in halves down to body by body, with a short
/// jittered pause — until it commits or `serializationRetriesMax` is spent (`WriteRerunPlan`, KakinCore).
final class PostgresWriter {
    private let session: PGSession
    private let queue: JobQueue<PGWriteJob>
    private let options: PostgresDatabase.Options
    private let statistics: PostgresStatisticsRecorder
    private let gate: WriterGate
    /// The re-run pauses' jitter: need not be unpredictable, only differ between writers.
    private var random: SeededRandom

    init(session: PGSession, queue: JobQueue<PGWriteJob>, options: PostgresDatabase.Options, statistics: PostgresStatisticsRecorder,
         gate: WriterGate, random: SeededRandom) {
        self.session = session
        self.queue = queue
        self.options = options
        self.statistics = statistics
        self.gate = gate
        self.random = random
    }

    func run() {
        session.warmUp(.writer)
        while let jobs = queue.take(countMax: options.batchSizeMax, joining: { _, _ in true }) {
            commit(jobs[...])
            statistics.record(session.takeWork())
        }
        session.discard()
    }

    /// How one attempt at a transaction ended.
    private enum Attempt {
        case committed
        /// Nothing was committed and running the same bodies again may succeed.
        case again(serialization: Bool, error: any Error)
        /// Every job was resumed already (failed, or the outcome is unknown).
        case settled
        /// A body's `executeLater` statement failed after the body returned: nothing was committed; the same bodies
        /// run again with those statements sent at once, so the body that queued it sees its error.
        case laterStatementFailed
    }

    /// Commits `jobs`, running them again after serialization failures (halving the batch each time, so
    /// one conflicting body does not keep failing the others) and after a connection that broke before
    /// `COMMIT` was sent (nothing was committed, so running them again is safe). What runs again, alone or
    /// beside the other writers, and after what pause is `WriteRerunPlan`'s decision (KakinCore).
    private func commit(_ jobs: ArraySlice<PGWriteJob>) {
        precondition((1...options.batchSizeMax).contains(jobs.count), "a write batch holds 1...batchSizeMax bodies")
        var plan = WriteRerunPlan(batchSize: jobs.count, retriesMax: options.serializationRetriesMax)
        while let run = plan.next() {
            if run.pauseMicroseconds > 0 {
                // On this (dedicated) thread; short: every queued write behind this thread waits too.
                Thread.sleep(forTimeInterval: Double(run.pauseMicroseconds) / 1_000_000)
            }
            let bodies = jobs[(jobs.startIndex + run.bodies.lowerBound)..<(jobs.startIndex + run.bodies.upperBound)]
            let attempt = {
                let first = self.runTransaction(bodies, defersLater: true)
                guard case .laterStatementFailed = first else { return first }
                let second = self.runTransaction(bodies, defersLater: false)
                if case .laterStatementFailed = second { preconditionFailure("executeLater statements run at once when not deferred") }
                return second
            }
            let attempted = run.runsAlone ? gate.runAlone(attempt) : gate.runTogether(attempt)
            guard case .again(let serialization, let error) = attempted else { continue }
            switch plan.failed(run, serialization ? .serialization : .connection, using: &random) {
            case .rerun:
                if serialization { statistics.recordRetry() }
            case .giveUp:
                let kind: SQLError.Kind = serialization ? .conflict : .unavailable
                let given = SQLError(kind: kind, sqlState: (error as? SQLError)?.sqlState,
                                     message: serialization
                                        ? "gave up after \(run.attempt + 1) attempts that conflicted with concurrent writes; nothing was applied"
                                        : "the database connection kept failing; nothing was applied (\((error as? SQLError)?.message ?? "\(error)"))")
                fail(bodies, given, outcomeUnknown: false)
            }
        }
    }

    private func fail(_ jobs: ArraySlice<PGWriteJob>, _ error: any Error, outcomeUnknown: Bool) {
        statistics.recordFailedWrites(jobs.count, outcomeUnknown: outcomeUnknown)
        for job in jobs { job.fail(error) }
    }

    /// One attempt: BEGIN, each body in its own savepoint (a batch of one needs none), COMMIT. The engine's
    /// statements travel with the next body statement (`PGConnection.later`): BEGIN with the first body's
    /// first statement, the savepoint turnover with the next body's, so they cost no round trip of their own;
    /// with `defersLater`, so do a body's `executeLater` statements (ahead of the turnover, or of COMMIT).
    private func runTransaction(_ jobs: ArraySlice<PGWriteJob>, defersLater: Bool) -> Attempt {
        let connection: PGConnection
        do {
            connection = try session.live(.writer)
        } catch {
            // Unreachable: fail fast (the caller answers 503) rather than holding requests for seconds.
            fail(jobs, error, outcomeUnknown: false)
            return .settled
        }
        let savepoints = jobs.count > 1
        connection.resetFailureFlags()
        connection.dropWaiting()
        connection.defersLater = defersLater
        defer { connection.defersLater = false }
        if savepoints {
            connection.later("BEGIN ISOLATION LEVEL SERIALIZABLE", "SAVEPOINT w")
        } else {
            connection.later("BEGIN ISOLATION LEVEL SERIALIZABLE")
        }
        var outcomes: [PGWriteOutcome] = []
        outcomes.reserveCapacity(jobs.count)
        for (offset, job) in jobs.enumerated() {
            connection.currentBody = offset
            var outcome = job.run(connection)
            if connection.isBroken || connection.sawSerializationFailure || connection.engineStatementFailed || connection.laterStatementFailed
                || Self.isStandbyRefusal(outcome.bodyError) {
                return abandon(connection, error: outcome.bodyError ?? SQLError(kind: .conflict, message: "serialization failure"), jobs: jobs)
            }
            // A body that caught a failed statement's error and returned normally: its transaction (or
            // savepoint) is aborted, so what it returned was never written. Report that instead.
            if outcome.bodyError == nil, connection.transactionFailed {
                let error = SQLError(kind: .misuse, message: "a statement failed inside the body, which did not throw; nothing it wrote was applied")
                outcome = PGWriteOutcome(bodyError: error) { job.fail(error) }
            }
            let isLast = offset == jobs.count - 1
            // A body that threw: what it queued with `executeLater` never goes out.
            if outcome.bodyError != nil { connection.dropLater(ofBody: offset) }
            if outcome.bodyError != nil, !savepoints {
                // Alone in its transaction: roll it back (or never begin it, if the body ran no statement).
                if connection.hasWaiting {
                    connection.dropWaiting()
                } else {
                    do {
                        try connection.run("ROLLBACK")
                    } catch {
                        return abandon(connection, error: error, jobs: jobs)
                    }
                }
            } else if outcome.bodyError != nil {
                connection.later("ROLLBACK TO SAVEPOINT w")
                if !isLast { connection.later("RELEASE SAVEPOINT w", "SAVEPOINT w") }
            } else if savepoints, !isLast {
                connection.later("RELEASE SAVEPOINT w", "SAVEPOINT w")
            }
            outcomes.append(outcome)
        }
        if !savepoints, outcomes[0].bodyError != nil {
            // A batch of one whose body threw was rolled back; its error was computed on one consistent
            // snapshot, like a read's answer.
            statistics.recordFailedWrites(1, outcomeUnknown: false)
            outcomes[0].deliver()
            return .settled
        }
        let tag: String
        do {
            // With whatever engine statements still wait (a last rollback to the savepoint), in one round trip.
            tag = try connection.run("COMMIT")
        } catch {
            if connection.isBroken {
                // COMMIT went out and no answer came back: it may have committed. Never report success,
                // never run it again here: the caller's retry (same idempotency key) settles it.
                session.discard()
                fail(jobs, SQLError(kind: .outcomeUnknown,
                                    message: "the connection to PostgreSQL broke during COMMIT; the write may or may not have been applied"),
                     outcomeUnknown: true)
                return .settled
            }
            return abandon(connection, error: error, jobs: jobs)
        }
        guard tag == "COMMIT" else {
            fail(jobs, SQLError(kind: .database, message: "COMMIT answered \(tag); nothing was applied"), outcomeUnknown: false)
            return .settled
        }
        statistics.recordCommit(size: outcomes.count, bodiesSucceeded: outcomes.count { $0.bodyError == nil })
        // Counted before the callers resume, so a caller that returned sees its statements counted.
        statistics.record(session.takeWork())
        for outcome in outcomes { outcome.deliver() }
        return .committed
    }

    /// After an error outside any body's own domain: roll back, then decide whether the same bodies may run again.
    private func abandon(_ connection: PGConnection, error: any Error, jobs: ArraySlice<PGWriteJob>) -> Attempt {
        if connection.isBroken || Self.isStandbyRefusal(error) {
            // Before COMMIT: the server rolled the transaction back (or never ran it).
            session.discard()
            return .again(serialization: false, error: error)
        }
        connection.rollbackIfInTransaction()
        if connection.sawSerializationFailure || (error as? SQLError)?.kind == .conflict {
            return .again(serialization: true, error: error)
        }
        if connection.laterStatementFailed { return .laterStatementFailed }
        fail(jobs, error, outcomeUnknown: false)
        return .settled
    }

    /// SQLSTATE 25006: this server turned read-only (a demoted primary); another connection may reach the new one.
    private static func isStandbyRefusal(_ error: (any Error)?) -> Bool {
        (error as? SQLError)?.sqlState == "25006"
    }
}

/// One caller's `read`, type-erased.
struct PGReadJob: Sendable {
    let run: @Sendable (PGConnection) -> PGReadOutcome
    let fail: @Sendable (any Error) -> Void
}

struct PGReadOutcome {
    let deliver: () -> Void
}

/// A reader thread: one connection, one REPEATABLE READ READ ONLY transaction per read. A read that met
/// a broken connection runs once more on a new one (reading twice changes nothing).
///
/// Round trips, not queries, are what a read costs most, so a read's `BEGIN` travels with its first query,
/// and its `COMMIT` — which can change nothing in a read-only transaction, so the caller has its answer
/// already — with the next read's `BEGIN` and first query, or alone once the thread has been idle for
/// `idleCommitMs` (a snapshot is never held longer than that while nothing happens).
final class PostgresReader {
    static let idleCommitMs = 5
    static let begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

    private let session: PGSession
    private let queue: JobQueue<PGReadJob>
    private let statistics: PostgresStatisticsRecorder
    /// The connection whose last read transaction still waits for its COMMIT.
    private var uncommitted: PGConnection?

    init(session: PGSession, queue: JobQueue<PGReadJob>, statistics: PostgresStatisticsRecorder) {
        self.session = session
        self.queue = queue
        self.statistics = statistics
    }

    func run() {
        session.warmUp(.reader)
        while let jobs = queue.take(countMax: 1, waitingAtMostMs: uncommitted == nil ? nil : Self.idleCommitMs, joining: { _, _ in false }) {
            if jobs.isEmpty { commitNow() }
            for job in jobs { read(job) }
        }
        commitNow()
        session.discard()
    }

    /// Sends the last read's COMMIT (idle, or closing).
    private func commitNow() {
        guard let connection = uncommitted else { return }
        uncommitted = nil
        connection.dropWaiting()
        _ = try? connection.run("COMMIT")
    }

    private func read(_ job: PGReadJob) {
        for attempt in 0..<2 {
            let connection: PGConnection
            do {
                connection = try session.live(.reader)
            } catch {
                uncommitted = nil
                if attempt == 0 { continue }
                job.fail(error)
                return
            }
            connection.resetFailureFlags()
            connection.dropWaiting()
            let pendingCommit = uncommitted === connection
            if pendingCommit {
                connection.later("COMMIT", Self.begin)
            } else {
                connection.later(Self.begin)
            }
            uncommitted = nil
            let outcome = job.run(connection)
            if connection.isBroken || connection.engineStatementFailed {
                // Nothing of this read can be trusted; read again on a sound connection.
                connection.rollbackIfInTransaction()
                if attempt == 0 { continue }
                job.fail(SQLError(kind: .unavailable, message: "the database connection failed during a read"))
                return
            }
            if connection.hasWaiting {
                // The body ran no query: nothing was sent, the previous read's COMMIT still waits.
                connection.dropWaiting()
                if pendingCommit { uncommitted = connection }
            } else {
                uncommitted = connection
            }
            statistics.recordRead(work: session.takeWork())
            outcome.deliver()
            return
        }
    }
}
