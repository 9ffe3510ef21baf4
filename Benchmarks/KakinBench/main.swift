import Foundation

// kakin-bench: programs that prove two of Kakin's promises against the real release binary. Figures
// are printed beside baselines measured in the same run; the crash test SIGKILLs the server under load
// and checks the ledger. See Benchmarks/README.md.

signal(SIGPIPE, SIG_IGN)  // a server that went away must surface as a failed send, not kill the benchmark

/// Each figure's benchmark, in the order `all` runs them. A new figure is a function here.
let benchmarks: [(command: BenchOptions.Command, run: (BenchWorkspace, BenchOptions) throws -> BenchResult)] = [
    (.verify, VerifyBenchmark.run),
    (.units, UnitsBenchmark.run),
    (.budget, BudgetBenchmark.run),
    (.purchases, PurchasesBenchmark.run),
    (.play, PlayPurchasesBenchmark.run),
    (.grants, GrantsBenchmark.run),
    (.reads, ReadsBenchmark.run),
    (.history, StatusHistoryBenchmark.run),
    (.notifications, NotificationsBenchmark.run),
    (.events, EventsBenchmark.run),
    (.import, ImportBenchmark.run),
    (.postgres, PostgresBenchmark.run),
    (.metrics, MetricsBenchmark.run),
]

@MainActor
func runFigures(_ options: BenchOptions, in workspace: BenchWorkspace) throws -> Bool {
    if options.prepare {
        let prepared = try options.command == .purchases ? PurchasesBenchmark.prepare(workspace, options) : NotificationsBenchmark.prepare(workspace, options)
        print("Prepared: config \(prepared.config.path), requests \(prepared.pool.prefix.path)-N.lines (\(BenchResult.grouped(prepared.pool.count)))")
        return true  // runCommand keeps the workspace
    }
    var result = BenchResult()
    // `all` is every SQLite figure; `postgres` (which needs a server) runs those it compares with itself.
    for benchmark in benchmarks where (options.command == .all && benchmark.command != .postgres && benchmark.command != .metrics) || options.command == benchmark.command {
        result.append(try benchmark.run(workspace, options))
    }
    let date = ISO8601DateFormatter().string(from: Date())
    print(result.printed(title: "kakin-bench \(options.command.rawValue) — \(date)", repetitions: options.repetitions))
    return result.passed
}

/// Runs the command in a fresh workspace; kept for a look when something failed, or on request.
@MainActor
func runCommand(_ options: BenchOptions) throws -> Bool {
    let workspace = try BenchWorkspace(kakin: options.kakin)
    let passed: Bool
    do {
        passed = options.command == .crashTest
            ? try CrashTest(workspace: workspace, options: options).run() : try runFigures(options, in: workspace)
    } catch {
        print("Kept the workspace: \(workspace.directory.path)")
        throw error
    }
    if passed && !options.keepWorkspace && !options.prepare {
        workspace.remove()
    } else {
        print("Kept the workspace: \(workspace.directory.path)")
    }
    return passed
}

do {
    guard let options = try BenchOptions.parse(Array(CommandLine.arguments.dropFirst())) else {
        print(BenchOptions.usage)
        exit(0)
    }
    exit(try runCommand(options) ? 0 : 1)
} catch let error as UsageError {
    FileHandle.standardError.write(Data("kakin-bench: \(error) (see kakin-bench --help)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("kakin-bench: \(error)\n".utf8))
    exit(1)
}
