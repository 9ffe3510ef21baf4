/// How a group-committed batch of write bodies whose transaction failed before anything was committed runs
/// again (PostgreSQL's writer: a serialization failure, SQLSTATE `40001`/`40P01`, or a connection that broke
/// before `COMMIT` was sent).
///
/// The rules, as the writer has always applied them:
/// - the batch's first run is beside the process's other writers; every re-run is alone (`runsAlone`);
/// - a failed run is run again at once, the same bodies together, the first time;
/// - after that, a serialization failure splits the run into halves (the first half, then the second, each
///   settled before the next starts), down to single bodies, so one conflicting body stops failing the
///   others; a broken connection runs the same bodies again;
/// - every serialization re-run after the first waits a jittered pause of 0…min(2^attempt, 16) ms first,
///   so conflicting writers drift apart;
/// - a run at attempt `retriesMax` that fails is given up: its bodies fail, nothing of them was applied.
///
/// A value-type state machine (`next`, `failed`): the writer executes each `Run` and reports failures; the
/// pure decision is `decide`. The jitter comes from the random source the caller passes in, so a seeded
/// source replays the same plan.
public struct WriteRerunPlan: Sendable {
    /// What made a run fail with nothing committed.
    public enum Failure: Sendable, Hashable {
        /// PostgreSQL could not order the transaction serially (or found a deadlock): it may succeed apart.
        case serialization
        /// The connection broke before `COMMIT` was sent: the same bodies may run again on a new one.
        case connection
    }

    /// One transaction to attempt.
    public struct Run: Sendable, Hashable {
        /// The bodies it runs, as offsets into the batch (never empty).
        public let bodies: Range<Int>
        /// 0 for the batch's first run; each re-run one more than the run it replaces.
        public let attempt: Int
        /// How long to wait before starting it, in microseconds.
        public let pauseMicroseconds: Int

        /// The first run goes beside the process's other writers; a re-run meets none of them.
        public var runsAlone: Bool { attempt > 0 }

        public init(bodies: Range<Int>, attempt: Int, pauseMicroseconds: Int) {
            precondition(!bodies.isEmpty && bodies.lowerBound >= 0, "a run holds at least one body")
            precondition(attempt >= 0 && pauseMicroseconds >= 0)
            self.bodies = bodies
            self.attempt = attempt
            self.pauseMicroseconds = pauseMicroseconds
        }
    }

    /// What follows a failed run.
    public enum Decision: Sendable, Hashable {
        /// These runs, in order (one: the same bodies; two: the halves). Only the first carries a pause.
        case rerun([Run])
        /// The cap is spent: the run's bodies fail.
        case giveUp
    }

    /// The largest `retriesMax` accepted (`PostgresDatabase.Options` allows 0...1000).
    public static let retriesMaxLimit = 1_000

    public let batchSize: Int
    public let retriesMax: Int
    /// Runs still to do; the last is next (depth first: a half is settled before its sibling starts).
    private var pending: [Run]

    /// - Parameters:
    ///   - batchSize: bodies in the batch, at least 1.
    ///   - retriesMax: re-runs allowed along any chain of failures, 0...`retriesMaxLimit`.
    public init(batchSize: Int, retriesMax: Int) {
        precondition(batchSize >= 1, "a batch holds at least one body")
        precondition((0...Self.retriesMaxLimit).contains(retriesMax), "retriesMax not in 0...\(Self.retriesMaxLimit)")
        self.batchSize = batchSize
        self.retriesMax = retriesMax
        pending = [Run(bodies: 0..<batchSize, attempt: 0, pauseMicroseconds: 0)]
    }

    /// The run to do next, or nil when every body has committed, settled or been given up.
    public mutating func next() -> Run? { pending.popLast() }

    /// Records that `run` (the last one `next` returned) failed with nothing committed, and plans what follows.
    /// A run that committed, or whose bodies were settled otherwise, needs no call.
    public mutating func failed(_ run: Run, _ failure: Failure, using random: inout some RandomNumberGenerator) -> Decision {
        precondition(run.bodies.upperBound <= batchSize, "the run is not of this batch")
        let decision = Self.decide(bodies: run.bodies, attempt: run.attempt, failure: failure, retriesMax: retriesMax, using: &random)
        if case .rerun(let runs) = decision { pending.append(contentsOf: runs.reversed()) }
        // Depth first, at most one waiting sibling per attempt level, plus the run on top.
        precondition(pending.count <= retriesMax + 1, "the plan holds more runs than attempt levels")
        return decision
    }

    /// The pure decision: given the failed run's bodies, its attempt and what failed, what runs next and after
    /// what pause — or that the cap is spent.
    public static func decide(bodies: Range<Int>, attempt: Int, failure: Failure, retriesMax: Int,
                              using random: inout some RandomNumberGenerator) -> Decision {
        precondition(!bodies.isEmpty, "a run holds at least one body")
        precondition((0...retriesMax).contains(attempt), "attempt \(attempt) beyond the cap \(retriesMax)")
        guard attempt < retriesMax else { return .giveUp }
        let pause = failure == .serialization && attempt > 0
            ? Int.random(in: 0...(pauseCapMs(attempt: attempt) * 1_000), using: &random) : 0
        guard failure == .serialization, attempt > 0, bodies.count > 1 else {
            return .rerun([Run(bodies: bodies, attempt: attempt + 1, pauseMicroseconds: pause)])
        }
        let middle = bodies.lowerBound + bodies.count / 2
        return .rerun([
            Run(bodies: bodies.lowerBound..<middle, attempt: attempt + 1, pauseMicroseconds: pause),
            Run(bodies: middle..<bodies.upperBound, attempt: attempt + 1, pauseMicroseconds: 0),
        ])
    }

    /// The longest pause before a serialization re-run of a run at `attempt`: 2^attempt ms, at most 16.
    public static func pauseCapMs(attempt: Int) -> Int { 1 << min(max(attempt, 0), 4) }
}
