import KakinCore
import Testing

/// `WriteRerunPlan`: how PostgreSQL's writer runs a failed batch again. Property tests drive the plan as the
/// writer does, against seeded models of which runs fail, and check what a caller of `write` relies on.
@Suite struct WriteRerunPlanTests {
    /// Which runs fail, as a function of the run (a model of PostgreSQL and the network).
    enum World {
        /// Every run fails with a serialization failure.
        case alwaysConflicts
        /// A run fails while it holds one of these bodies and any other body beside it.
        case conflictsInCompany(Set<Int>)
        /// Each run fails with this probability (per mille), serialization or connection at random.
        case flaky(perMille: Int)
    }

    /// What happened to one batch.
    struct Trace {
        var runs: [WriteRerunPlan.Run] = []
        var committed: [Int] = []
        var givenUp: [Int] = []
        /// Bodies that ran in a run of their own at some point.
        var ranAlone: Set<Int> = []
    }

    /// Runs the plan to its end as `PostgresWriter.commit` does, checking each decision on the way.
    static func drive(batchSize: Int, retriesMax: Int, world: World, seed: UInt64) -> Trace {
        var plan = WriteRerunPlan(batchSize: batchSize, retriesMax: retriesMax)
        var jitter = SeededRandom(seed: seed)
        var worldRandom = SeededRandom(seed: seed ^ 0xA5A5_A5A5)
        var trace = Trace()
        var steps = 0
        while let run = plan.next() {
            steps += 1
            precondition(steps < 100_000, "the plan did not end")
            trace.runs.append(run)
            #expect(run.bodies.lowerBound >= 0 && run.bodies.upperBound <= batchSize && !run.bodies.isEmpty)
            #expect(run.attempt <= retriesMax)
            #expect(run.runsAlone == (run.attempt > 0), "the first run goes beside the other writers, re-runs alone")
            if run.bodies.count == 1 { trace.ranAlone.insert(run.bodies.lowerBound) }

            let failure: WriteRerunPlan.Failure?
            switch world {
            case .alwaysConflicts:
                failure = .serialization
            case .conflictsInCompany(let troublemakers):
                failure = run.bodies.count > 1 && run.bodies.contains(where: troublemakers.contains) ? .serialization : nil
            case .flaky(let perMille):
                failure = Int.random(in: 0..<1000, using: &worldRandom) < perMille
                    ? (Bool.random(using: &worldRandom) ? .serialization : .connection) : nil
            }
            guard let failure else {
                trace.committed.append(contentsOf: run.bodies)
                continue
            }
            switch plan.failed(run, failure, using: &jitter) {
            case .giveUp:
                #expect(run.attempt == retriesMax, "given up only once the cap is spent")
                trace.givenUp.append(contentsOf: run.bodies)
            case .rerun(let next):
                #expect(run.attempt < retriesMax)
                // The parts cover the failed run's bodies exactly, in order, without overlap.
                #expect(next.first?.bodies.lowerBound == run.bodies.lowerBound)
                #expect(next.last?.bodies.upperBound == run.bodies.upperBound)
                for (left, right) in zip(next, next.dropFirst()) { #expect(left.bodies.upperBound == right.bodies.lowerBound) }
                #expect(next.allSatisfy { $0.attempt == run.attempt + 1 })
                // Halves only after a serialization failure of a re-run with more than one body.
                let halves = failure == .serialization && run.attempt > 0 && run.bodies.count > 1
                #expect(next.count == (halves ? 2 : 1))
                if halves { #expect(next[0].bodies.count == run.bodies.count / 2) }
                // Pauses: none before the first re-run or after a broken connection, else bounded by the cap.
                let pause = next[0].pauseMicroseconds
                if failure == .connection || run.attempt == 0 {
                    #expect(pause == 0)
                } else {
                    #expect((0...WriteRerunPlan.pauseCapMs(attempt: run.attempt) * 1_000).contains(pause))
                    #expect(pause <= WriteRerunPlan.pauseMsMax * 1_000)
                }
                #expect(next.dropFirst().allSatisfy { $0.pauseMicroseconds == 0 }, "one pause per failure")
            }
        }
        return trace
    }

    static let sizes = [1, 2, 3, 7, 64, 128, 511]
    static let seeds: [UInt64] = Array(1...12)

    @Test(arguments: sizes)
    func everyBodyEndsExactlyOnceCommittedOrGivenUpInBatchOrder(batchSize: Int) {
        for seed in Self.seeds {
            for world in [World.flaky(perMille: 300), .flaky(perMille: 900), .conflictsInCompany([0, batchSize / 2]), .alwaysConflicts] {
                for retriesMax in [0, 1, 3, 30] {
                    let trace = Self.drive(batchSize: batchSize, retriesMax: retriesMax, world: world, seed: seed)
                    // No body runs in two committed transactions, and none is both committed and failed.
                    #expect(Set(trace.committed).count == trace.committed.count)
                    #expect(Set(trace.givenUp).count == trace.givenUp.count)
                    #expect(Set(trace.committed).isDisjoint(with: trace.givenUp))
                    #expect(Set(trace.committed).union(trace.givenUp) == Set(0..<batchSize))
                    // A half is settled before its sibling starts: bodies commit in the order they were queued.
                    #expect(trace.committed == trace.committed.sorted())
                }
            }
        }
    }

    @Test(arguments: sizes)
    func underEndlessConflictsEveryBodyIsRunAloneOrTheCapIsHit(batchSize: Int) {
        for retriesMax in [0, 1, 2, 5, 30] {
            let trace = Self.drive(batchSize: batchSize, retriesMax: retriesMax, world: .alwaysConflicts, seed: 7)
            #expect(trace.committed.isEmpty)
            #expect(Set(trace.givenUp) == Set(0..<batchSize))
            // Every chain of re-runs ends at the cap; with enough re-runs to halve down to one body, every
            // body was run alone before it was given up.
            // The first re-run is the whole batch again; each later one halves.
            if retriesMax >= 1 + bitsToHalve(batchSize) {
                #expect(trace.ranAlone == Set(0..<batchSize))
            }
            #expect(trace.runs.allSatisfy { $0.attempt <= retriesMax })
        }
    }

    /// Halvings from `n` bodies down to one.
    private func bitsToHalve(_ n: Int) -> Int {
        var size = n, count = 0
        while size > 1 {
            size = (size + 1) / 2
            count += 1
        }
        return count
    }

    @Test func aConflictingBodyStopsFailingTheOthers() {
        let trace = Self.drive(batchSize: 128, retriesMax: 30, world: .conflictsInCompany([5, 90]), seed: 3)
        #expect(trace.givenUp.isEmpty)
        #expect(trace.committed == Array(0..<128))
        #expect(trace.ranAlone.isSuperset(of: [5, 90]), "the conflicting bodies commit on their own")
    }

    @Test func theFirstReRunIsTheSameBatchAtOnceAloneThenHalvesWithAPause() {
        var plan = WriteRerunPlan(batchSize: 10, retriesMax: 30)
        var random = SeededRandom(seed: 1)
        let first = plan.next()!
        #expect(first == .init(bodies: 0..<10, attempt: 0, pauseMicroseconds: 0))
        #expect(!first.runsAlone)
        #expect(plan.failed(first, .serialization, using: &random) == .rerun([.init(bodies: 0..<10, attempt: 1, pauseMicroseconds: 0)]))
        let second = plan.next()!
        #expect(second.runsAlone)
        guard case .rerun(let halves) = plan.failed(second, .serialization, using: &random) else {
            Issue.record("expected halves")
            return
        }
        #expect(halves.map(\.bodies) == [0..<5, 5..<10])
        #expect(halves[0].pauseMicroseconds <= 2_000)
        #expect(plan.next()?.bodies == 0..<5)
        #expect(plan.next()?.bodies == 5..<10)
        #expect(plan.next() == nil)
    }

    @Test func aBrokenConnectionRunsTheSameBodiesAgainWithoutAPause() {
        var random = SeededRandom(seed: 9)
        for attempt in 0..<5 {
            #expect(WriteRerunPlan.decide(bodies: 3..<9, attempt: attempt, failure: .connection, retriesMax: 5, using: &random)
                    == .rerun([.init(bodies: 3..<9, attempt: attempt + 1, pauseMicroseconds: 0)]))
        }
        #expect(WriteRerunPlan.decide(bodies: 3..<9, attempt: 5, failure: .connection, retriesMax: 5, using: &random) == .giveUp)
    }

    @Test func pausesGrowToSixteenMillisecondsAndTheSameSeedReplaysTheSamePlan() {
        #expect((0...8).map { WriteRerunPlan.pauseCapMs(attempt: $0) } == [1, 2, 4, 8, 16, 16, 16, 16, 16])
        for world in [World.flaky(perMille: 600), .alwaysConflicts] {
            let one = Self.drive(batchSize: 100, retriesMax: 30, world: world, seed: 42)
            let two = Self.drive(batchSize: 100, retriesMax: 30, world: world, seed: 42)
            #expect(one.runs == two.runs)
        }
        let conflicted = Self.drive(batchSize: 100, retriesMax: 30, world: .alwaysConflicts, seed: 42)
        #expect(conflicted.runs.contains { $0.pauseMicroseconds > 0 })
        #expect(Set(conflicted.runs.map(\.pauseMicroseconds)).count > 10, "jittered, not one fixed pause")
    }
}
