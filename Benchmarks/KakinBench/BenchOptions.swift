import Foundation

struct UsageError: Error, CustomStringConvertible {
    var description: String
}

/// The command line: `kakin-bench [verify|units|budget|purchases|play|grants|reads|history|notifications|events|import|all|postgres|crash-test] [--seconds S] …`.
struct BenchOptions {
    static let usage = """
        usage: kakin-bench [verify|units|budget|purchases|play|grants|reads|history|notifications|events|import|all] [--seconds S] [--connections N] [--repetitions R] [--kakin PATH]
               kakin-bench purchases|notifications --prepare [--seconds S] [--kakin PATH]
               kakin-bench postgres --postgres URL [--seconds S] [--connections N] [--repetitions R] [--kakin PATH]
               kakin-bench metrics [--customers N] [--rebuild] [--repetitions R] [--kakin PATH]
               kakin-bench crash-test [--seconds S] [--rounds R] [--clients N] [--postgres URL [--processes P]] [--kakin PATH]

        Figures (default: all) measured against the release `kakin` binary, each beside a baseline
        measured in the same run. crash-test SIGKILLs `kakin serve` under load and checks that every
        acknowledged purchase and spend is in the ledger exactly once. Exit 1 when a check fails.

          --seconds S       load per HTTP measurement (default 10); crash-test: load per round before
                            the kill, which comes at a random moment in its second half (default 4)
          --connections N   wrk connections (default 64)
          --repetitions R   measurements per figure, interleaved with the baseline's (default 3)
          --rounds R        crash-test kill/restart rounds (default 5)
          --clients N       crash-test concurrent clients (default 8)
          --postgres URL    a PostgreSQL server to use (each run gets schemas of its own in it);
                            `postgres` measures it beside SQLite, `crash-test` runs on it instead of SQLite
          --processes P     crash-test on PostgreSQL: kakin serve processes on the one database, one of
                            them SIGKILLed each round (default 2)
          --customers N     metrics: customers in the generated year (default 1000000); --rebuild measures
                            purchases and status reads during kakin report rebuild above 200000 too (minutes)
          --kakin PATH      the kakin binary (default .build/release/kakin in this package)
          --keep            keep the run's temporary directory (configs, databases, logs, JWS);
                            it is always kept when a check fails
          --prepare         purchases, notifications: only seed a workspace (its customers, and --seconds
                            of requests for Benchmarks/wrk/requests.lua in PREFIX-N.lines), keep it and
                            print it; scripts/profile loads a server with it
        """

    enum Command: String {
        case verify, units, budget, purchases, play, grants, reads, history, notifications, events, all, postgres, metrics
        case `import`
        case crashTest = "crash-test"
    }

    var command = Command.all
    var seconds: Int?
    var connections = 64
    var repetitions = 3
    var rounds = 5
    var clients = 8
    var postgresURL: String?
    var processes = 2
    var kakin: URL?
    var keepWorkspace = false
    var prepare = false
    /// `metrics`: customers in the generated year, and whether to measure ingest during a rebuild above 200,000.
    var customers = 1_000_000
    var rebuild = false

    /// nil: `--help`.
    static func parse(_ arguments: [String]) throws(UsageError) -> BenchOptions? {
        var options = BenchOptions()
        var rest = arguments[...]
        if let first = rest.first, !first.hasPrefix("-") {
            guard let command = Command(rawValue: first) else { throw UsageError(description: "unknown command \(first)") }
            options.command = command
            rest = rest.dropFirst()
        }
        while let flag = rest.popFirst() {
            if flag == "--help" || flag == "-h" { return nil }
            if flag == "--keep" || flag == "--prepare" || flag == "--rebuild" {
                if flag == "--keep" { options.keepWorkspace = true } else if flag == "--rebuild" { options.rebuild = true } else { options.prepare = true }
                continue
            }
            guard let value = rest.popFirst() else { throw UsageError(description: "\(flag) needs a value") }
            func number(_ range: ClosedRange<Int>) throws(UsageError) -> Int {
                guard let n = Int(value), range.contains(n) else { throw UsageError(description: "\(flag) must be a whole number in \(range)") }
                return n
            }
            switch flag {
            case "--seconds": options.seconds = try number(1...600)
            case "--connections": options.connections = try number(1...1000)
            case "--repetitions": options.repetitions = try number(1...20)
            case "--rounds": options.rounds = try number(1...100)
            case "--clients": options.clients = try number(1...64)
            case "--kakin": options.kakin = URL(fileURLWithPath: value)
            case "--postgres":
                guard value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") else { throw UsageError(description: "--postgres needs a postgresql:// URL") }
                options.postgresURL = value
            case "--processes": options.processes = try number(1...8)
            case "--customers": options.customers = try number(1_000...5_000_000)
            default: throw UsageError(description: "unknown option \(flag)")
            }
        }
        if options.prepare, options.command != .purchases, options.command != .notifications {
            throw UsageError(description: "--prepare is for purchases and notifications")
        }
        if options.command == .postgres, options.postgresURL == nil {
            throw UsageError(description: "postgres needs --postgres URL (scripts/bench postgres starts a server and passes it)")
        }
        return options
    }

    var loadSeconds: Int { seconds ?? (command == .crashTest ? 4 : 10) }
}
