import Foundation
import KakinCore

/// `kakin simulate --seed N [--customers N] [--days N] [--faults none|all|LIST] [--database URL] [--replay --until STEP]`
/// (the contract's shape), plus `--actions N` (replay a shrunk schedule: only the first N customer actions),
/// `--no-shrink` and `--quiet` (no day lines).
public enum SimulateCommand {
    public static let usage = """
        usage: kakin simulate --seed N [--customers N] [--days N] [--faults none|all|LIST] [--database URL]
                              [--replay --until STEP] [--actions N] [--no-shrink] [--quiet]
               kakin simulate --seed N --experiment a=0.08,b=0.12 [--customers N] [--database URL]
          faults: \(FaultSet.names.map(\.0).joined(separator: ","))
          --experiment: an A/B test of 2 to 4 variants with their true conversion rates (the first is the control): every
          customer asks Kakin for the onboarding paywall and buys with its variant's rate; prints Kakin's results
        """

    struct Parsed {
        var options: SimulationOptions
        var shrink = true
        /// `--experiment`: the variants' true conversion rates.
        var experiment: [(id: String, rate: Double)]?
    }

    static func parse(_ args: [String]) -> Parsed? {
        var seed: UInt64?
        var customers = 100, days = 30
        var faults = FaultSet.all
        var database: String?
        var replay = false
        var until: Int?
        var actions: Int?
        var shrink = true, quiet = false
        var experiment: [(id: String, rate: Double)]?
        var i = 0
        func value() -> String? {
            i += 1
            return i < args.count ? args[i] : nil
        }
        while i < args.count {
            switch args[i] {
            case "--seed": guard let v = value().flatMap({ UInt64($0) }) else { return nil }; seed = v
            case "--customers": guard let v = value().flatMap({ Int($0) }), (1...SimulationOptions.customersMax).contains(v) else { return nil }; customers = v
            case "--days": guard let v = value().flatMap({ Int($0) }), (1...SimulationOptions.daysMax).contains(v) else { return nil }; days = v
            case "--faults": guard let v = value().flatMap({ FaultSet(list: $0) }) else { return nil }; faults = v
            case "--database": guard let v = value(), v.hasPrefix("postgres") else { return nil }; database = v
            case "--replay": replay = true
            case "--until": guard let v = value().flatMap({ Int($0) }), v >= 1 else { return nil }; until = v
            case "--actions": guard let v = value().flatMap({ Int($0) }), v >= 0 else { return nil }; actions = v
            case "--no-shrink": shrink = false
            case "--quiet": quiet = true
            case "--experiment": guard let v = value().flatMap(ExperimentRun.parse) else { return nil }; experiment = v
            default: return nil
            }
            i += 1
        }
        guard let seed, replay == (until != nil) else { return nil }
        var options = SimulationOptions(seed: seed, customers: customers, days: days, faults: faults, databaseURL: database, untilStep: until,
                                        actionsMax: actions)
        options.printDays = !quiet
        guard experiment == nil || (!replay && actions == nil) else { return nil }
        return Parsed(options: options, shrink: shrink && until == nil, experiment: experiment)
    }

    public static func run(_ args: [String]) async -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            print(usage)
            return 0
        }
        guard let parsed = parse(args) else {
            FileHandle.standardError.write(Data((usage + "\n").utf8))
            return 2
        }
        let started = ContinuousClock.now
        if let rates = parsed.experiment {
            do {
                let outcome = try await ExperimentRun.run(parsed.options, rates: rates)
                for line in ExperimentRun.lines(outcome, rates: rates, seed: parsed.options.seed) { print(line) }
                print("seconds \(String(format: "%.1f", Simulation.seconds(since: started)))")
                return outcome.matches ? 0 : 1
            } catch {
                FileHandle.standardError.write(Data("simulate: the experiment failed: \(error)\n".utf8))
                return 1
            }
        }
        let result: SimulationResult
        do {
            result = try await Simulation.run(parsed.options, printLastLines: true)
        } catch {
            FileHandle.standardError.write(Data("simulate: the world could not be built: \(error)\n".utf8))
            return 2
        }
        let seconds = Simulation.seconds(since: started)
        print("steps \(result.steps) actions \(result.actions) notifications \(result.notifications) faults \(result.faultsInjected) seconds \(String(format: "%.1f", seconds))")
        if let stop = result.stoppedAt {
            print("digest \(result.digest) steps \(stop) stopped (replay --until \(stop))")
            return 0
        }
        guard let failure = result.failure else {
            print("digest \(result.digest) steps \(result.steps) invariants ok")
            return 0
        }
        print("FAILED \(failure)")
        print("digest \(result.digest) steps \(result.steps) invariant broken: \(failure.invariant)")
        print("replay: kakin simulate \(Simulation.flags(parsed.options)) --replay --until \(failure.step)")
        if parsed.shrink {
            let smallest = await Shrinker.shrink(parsed.options, failure: failure, actions: result.actions)
            print("shrunk: kakin simulate \(Simulation.flags(smallest.options)) (\(smallest.result.actions) actions, \(smallest.result.steps) steps, \(smallest.tries) tries)")
            if let f = smallest.result.failure { print("shrunk failure: \(f)") }
        }
        return 1
    }
}

/// Runs one world and cleans up after it.
public enum Simulation {
    public static func run(_ options: SimulationOptions, printLastLines: Bool = false) async throws -> SimulationResult {
        let world = try await World(options)
        if !options.printDays { world.log = { _ in } }
        let result = await world.run()
        world.printProfile()
        if printLastLines, result.failure != nil || result.stoppedAt != nil {
            print("last steps:")
            for line in world.lastTraceLines { print("  " + line) }
        }
        await world.close()
        return result
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let d = ContinuousClock.now - start
        return Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    public static func flags(_ o: SimulationOptions) -> String {
        var s = "--seed \(o.seed) --customers \(o.customers) --days \(o.days) --faults \(o.faults.description)"
        if let a = o.actionsMax { s += " --actions \(a)" }
        if o.databaseURL != nil { s += " --database URL" }
        return s
    }
}

/// Looks for a smaller failing world with the same seed: fewer customers, fewer days, then fewer actions (the
/// schedule cut after the N-th action). Keeps the smallest that still breaks the same invariant.
public enum Shrinker {
    public struct Smallest: Sendable {
        public var options: SimulationOptions
        public var result: SimulationResult
        public var tries: Int
    }

    /// Smaller is fewer actions, then fewer customers, then fewer days.
    static func smaller(_ a: SimulationOptions, than b: SimulationOptions) -> Bool {
        (a.actionsMax ?? .max, a.customers, a.days) < (b.actionsMax ?? .max, b.customers, b.days)
    }

    public static func shrink(_ start: SimulationOptions, failure: InvariantFailure, actions: Int, triesMax: Int = 40) async -> Smallest {
        var best = start
        best.printDays = false
        best.actionsMax = actions
        var bestResult = SimulationResult(digest: "", steps: failure.step, actions: actions, failure: failure, stoppedAt: nil, notifications: 0, faultsInjected: 0)
        var tries = 0
        func fails(_ o: SimulationOptions) async -> SimulationResult? {
            tries += 1
            guard let r = try? await Simulation.run(o), let f = r.failure, f.invariant == failure.invariant else { return nil }
            return r
        }
        func consider(_ o: SimulationOptions) async -> Bool {
            guard let r = await fails(o) else { return false }
            var candidate = o
            candidate.actionsMax = r.actions
            candidate.days = max(1, r.days)
            guard smaller(candidate, than: best) else { return false }
            best = candidate
            bestResult = r
            return true
        }
        // The run stops at the failure: its day bounds the days.
        _ = await consider(best)
        // Fewer customers (each count its own schedule): halving, then the small counts.
        var counts: [Int] = []
        var n = start.customers / 2
        while n >= 1 { counts.append(n); n /= 2 }
        for k in [1, 2, 3, 5, 8] where k < start.customers && !counts.contains(k) { counts.append(k) }
        for k in counts where tries < triesMax {
            var o = best
            o.customers = k
            o.actionsMax = nil
            o.days = start.days
            _ = await consider(o)
        }
        // Fewer actions: bisect the schedule's length.
        var low = 0, high = best.actionsMax ?? bestResult.actions
        while low + 1 < high, tries < triesMax {
            let mid = (low + high) / 2
            var o = best
            o.actionsMax = mid
            if await consider(o) { high = best.actionsMax ?? mid } else { low = mid }
        }
        return Smallest(options: best, result: bestResult, tries: tries)
    }
}
