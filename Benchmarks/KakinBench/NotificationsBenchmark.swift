import Dispatch
import Foundation
import KakinCore
import KakinSQLite
import KakinStorage

/// notifications ingested: wrk POSTs /v1/notifications/appstore, every request a different signed
/// ONE_TIME_CHARGE notification (a consumable purchase with its signed transaction inside, ~9 KB as
/// Apple sends them), answered 200 once verified and durably stored; against durable single-row SQLite
/// commits per second on the same disk. Skipped while the route answers 404.
enum NotificationsBenchmark {
    /// Pre-signed notifications per second of load (bounded: they are ~9 KB each, on disk).
    static let poolPerSecond = 2_500
    static let poolMax = 40_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        var result = BenchResult()
        guard try routeAnswers(workspace) else {
            result.skipped.append("notifications ingested: POST /v1/notifications/appstore answers 404 in this build")
            return result
        }
        let threads = Wrk.threadCount(connections: options.connections)
        let poolSize = min(poolMax, poolPerSecond * options.loadSeconds)
        let poolPrefix = try writePool(workspace, count: poolSize, files: threads)
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/notifications.lua")
        var perSecond: [Double] = [], baseline: [Double] = [], runs: [Wrk.Run] = [], cpuPerNotification: [Double] = []
        for repetition in 0..<options.repetitions {
            baseline.append(try SQLiteDatabase.measureSingleRowDurableCommits(
                path: workspace.file("single-row-commits.db").path, seconds: Double(options.loadSeconds)))
            // A fresh database each time, so the same notifications are new again.
            let (config, database) = try workspace.writeConfig("notifications-\(repetition)")
            let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("notifications-\(repetition).log"))
            let run: Wrk.Run
            let cpuSeconds: Double
            let stored: Int
            do {
                (run, cpuSeconds) = try server.measuringCPU {
                    try Wrk.run(url: "http://127.0.0.1:\(server.port)", seconds: options.loadSeconds + Wrk.drainSeconds,
                                connections: options.connections, script: script,
                                scriptArguments: ["\(options.loadSeconds)", poolPrefix.path], workspace: workspace)
                }
                stored = try counter("kakin_notifications_received_total", port: server.port)
                try server.stop()
            } catch {
                server.kill()
                throw error
            }
            let ok = try run.count("ok"), other = try run.count("other")
            perSecond.append(Double(ok) / (Double(max(1, try run.count("loadms"))) / 1000))
            runs.append(run)
            cpuPerNotification.append(cpuSeconds / Double(max(1, ok)))
            result.check("notifications run \(repetition + 1): \(BenchResult.grouped(ok)) answered 200 = \(BenchResult.grouped(stored)) stored as new, "
                         + "\(other) other answers, \(run.socketErrors) socket errors", ok == stored && other == 0 && run.socketErrors == 0)
            try? FileManager.default.removeItem(at: database)
        }
        result.figures.append(Figure(
            name: "notifications ingested over HTTP (\(options.connections) connections)", value: median(perSecond),
            baselineName: "durable single-row commits (SQLite, same disk)", baselineValue: median(baseline), goal: 2,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms", median(runs.map(\.latencyP50Ms)), median(runs.map(\.latencyP99Ms))),
                "notifications: \(BenchResult.rates(perSecond)); single-row commits: \(BenchResult.rates(baseline))",
                String(format: "kakin serve CPU per notification: %.0f µs (ingesting, and processing as far as it got)",
                       median(cpuPerNotification) * 1e6),
                "\(BenchResult.grouped(poolSize)) pre-signed ONE_TIME_CHARGE notifications per run (a fresh database each), "
                    + "load until \(options.loadSeconds) s or the pool is used up",
            ]))
        return result
    }

    /// Whether this build has the route: one notification POSTed to a throw-away server.
    static func routeAnswers(_ workspace: BenchWorkspace) throws -> Bool {
        let (config, _) = try workspace.writeConfig("notifications-probe")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("notifications-probe.log"))
        do {
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let notification = try workspace.appStore.oneTimeChargeNotification(
                transaction: try workspace.appStore.consumableTransaction(id: "1999999999999999", pack: BenchAppStore.coinPacks[0], quantity: 1,
                                                                          appAccountToken: nil, nowMs: nowMs),
                nowMs: nowMs)
            let answer = try HTTPConnection(port: server.port).request("POST", "/v1/notifications/appstore",
                                                                       json: ["signedPayload": .string(notification)])
            try server.stop()
            guard answer.status == 200 || answer.status == 404 else {
                throw SubprocessFailure(description: "a valid notification answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
            }
            return answer.status == 200
        } catch {
            server.kill()
            throw error
        }
    }

    /// `count` notifications as request bodies, spread over files PREFIX-0.jsonl … (one per wrk thread),
    /// PREFIX being `name` in the workspace; transaction ids count up from `firstId`.
    static func writePool(_ workspace: BenchWorkspace, count: Int, files: Int, name: String = "notifications",
                          firstId: Int = 3_000_000_000_000_000) throws -> URL {
        let prefix = workspace.file(name)
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let appStore = workspace.appStore
        let failures = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: files) { file in
            do {
                var text = ""
                for n in stride(from: file, to: count, by: files) {
                    let transaction = try appStore.consumableTransaction(
                        id: String(firstId + n), pack: BenchAppStore.coinPacks[n % BenchAppStore.coinPacks.count], quantity: 1,
                        appAccountToken: UUID().uuidString.lowercased(), nowMs: nowMs - Int64(n))
                    let body: JSONValue = ["signedPayload": .string(try appStore.oneTimeChargeNotification(transaction: transaction, nowMs: nowMs))]
                    text += body.jsonString + "\n"
                }
                try text.write(to: URL(fileURLWithPath: "\(prefix.path)-\(file).jsonl"), atomically: false, encoding: .utf8)
            } catch {
                failures.append(contentsOf: ["\(error)"])
            }
        }
        if let failure = failures.all.first { throw SubprocessFailure(description: "writing the notifications: \(failure)") }
        return prefix
    }

    /// A counter from `GET /metrics` (Prometheus text).
    static func counter(_ name: String, port: Int) throws -> Int {
        let text = String(decoding: try HTTPConnection(port: port).request("GET", "/metrics").body, as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name + " ") }), let value = Int(line.split(separator: " ")[1]) else {
            throw SubprocessFailure(description: "no \(name) in /metrics")
        }
        return value
    }
}
