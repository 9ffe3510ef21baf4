import Foundation
import KakinSQLite
import KakinStorage

/// durable grants over HTTP: wrk POSTs grants, each under its own Idempotency-Key, at `kakin serve`;
/// against durable single-row SQLite commits per second on the same disk (one fsync'd transaction per
/// row). Every grant is fsync'd before its 201 too, so the ratio is what group commit buys (no goal since
/// issue 15: the goal is the grant's CPU). Beside it, grants per second of the server's CPU against
/// `GET /healthz` per second of the same server's CPU: what a durable write costs beyond the HTTP edge.
enum GrantsBenchmark {
    static let customers = 1_000
    /// The issue's latency goal beside the ratio: group commit must not buy throughput with long waits.
    static let latencyP99GoalMs = 20.0

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, database) = try workspace.writeConfig("grants")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("grants.log"))
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/grants.lua")
        var runs: [Wrk.Run] = []
        var baseline: [Double] = []
        var serverCPUSeconds: [Double] = []
        var healthz: [MeasuredRun] = []
        var work: [DatabaseWork] = []
        do {
            for repetition in 0..<options.repetitions {
                baseline.append(try SQLiteDatabase.measureSingleRowDurableCommits(
                    path: workspace.file("single-row-commits.db").path, seconds: Double(options.loadSeconds)))
                let ((run, cpuSeconds), runWork) = try server.measuringWork {
                    try server.measuringCPU {
                        try Wrk.run(url: "http://127.0.0.1:\(server.port)", seconds: options.loadSeconds + Wrk.drainSeconds,
                                    connections: options.connections, script: script,
                                    scriptArguments: ["\(options.loadSeconds)", "\(customers)", "run\(repetition)"], workspace: workspace)
                    }
                }
                work.append(runWork)
                runs.append(run)
                serverCPUSeconds.append(cpuSeconds)
                healthz.append(try server.customerReads("/healthz", nil, options, workspace))
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }

        var result = BenchResult()
        let created = try runs.map { try $0.count("created") }
        let grantsPerSecond = created.map { Double($0) / Double(options.loadSeconds) }
        let grantsPerCPUSecond = zip(created, serverCPUSeconds).map { Double($0) / $1 }
        let healthzPerCPUSecond = healthz.map { 1 / $0.cpuPerRequest }
        result.figures.append(Figure(
            name: "durable grants over HTTP (\(options.connections) connections)", value: median(grantsPerSecond),
            baselineName: "durable single-row commits (SQLite, same disk)", baselineValue: median(baseline), goal: nil,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms (medians of the runs' wrk --latency); goal p99 < %.0f ms: ",
                       median(runs.map(\.latencyP50Ms)), median(runs.map(\.latencyP99Ms)), Self.latencyP99GoalMs)
                    + (median(runs.map(\.latencyP99Ms)) < Self.latencyP99GoalMs ? "ok" : "BELOW GOAL"),
                "grants: \(BenchResult.rates(grantsPerSecond)); single-row commits: \(BenchResult.rates(baseline))",
                String(format: "kakin serve CPU per grant: %.0f µs (user + system; wrk and the machine's other work share the cores)",
                       median(zip(serverCPUSeconds, created).map { $0 / Double(max(1, $1)) * 1e6 })),
                "\(options.loadSeconds) s of load per run over \(BenchResult.grouped(customers)) customers, then \(Wrk.drainSeconds) s for the last answers",
            ]))
        result.figures.append(Figure(
            name: "durable grants per server CPU-second", value: median(grantsPerCPUSecond),
            baselineName: "GET /healthz per server CPU-second", baselineValue: median(healthzPerCPUSecond), goal: 0.5,
            details: [
                String(format: "kakin serve CPU per grant %.0f µs, per /healthz %.0f µs: a grant costs %.1f× /healthz (goal ≤ 2×)",
                       1e6 / median(grantsPerCPUSecond), 1e6 / median(healthzPerCPUSecond), median(healthzPerCPUSecond) / median(grantsPerCPUSecond)),
                work.total.perRequest(created.reduce(0, +), "grant"),
                "grants: \(BenchResult.rates(grantsPerCPUSecond)); healthz: \(BenchResult.rates(healthzPerCPUSecond)) "
                    + "(\(options.loadSeconds) s of wrk each, same server, one right after the other)",
            ]))

        let answered201 = created.reduce(0, +)
        let non2xx = runs.map(\.non2xx).reduce(0, +)
        let otherThan201 = try runs.map { try $0.count("other") }.reduce(0, +)
        let socketErrors = runs.map(\.socketErrors).reduce(0, +)
        let report = try workspace.ledgerCheck(database: database)
        let entries = report["entries"]?.intValue ?? -1
        result.check("grants: wrk saw \(non2xx) non-2xx answers, \(otherThan201) answers other than 201, \(socketErrors) socket errors",
                     non2xx == 0 && otherThan201 == 0 && socketErrors == 0)
        result.check("grants: ledger entries \(BenchResult.grouped(entries)) = 201 answers wrk saw \(BenchResult.grouped(answered201))",
                     entries == answered201)
        result.check("grants: kakin ledger check (\(report["customers"]?.intValue ?? 0) customers, every balance = sum of its entries)",
                     report["ok"] == true)
        let healthzFailures = healthz.map { $0.run.non2xx + $0.run.socketErrors }.reduce(0, +)
        result.check("grants: /healthz runs saw \(healthzFailures) non-2xx answers and socket errors", healthzFailures == 0)
        return result
    }
}
