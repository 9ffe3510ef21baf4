import Foundation
import KakinCore
import KakinSQLite
import KakinStorage

/// notifications: wrk POSTs /v1/notifications/appstore, every request a different signed ONE_TIME_CHARGE
/// notification (a consumable purchase of one of 1,000 seeded customers, its signed transaction inside with
/// the customer's `appAccountToken`, ~9 KB as Apple sends them), answered 200 once verified and durably
/// stored; the worker then applies each (verifies the transaction, credits the customer). Two figures:
/// - notifications ingested per second of load against durable single-row SQLite commits on the same disk;
/// - notifications APPLIED per second of the server's CPU, counted from the first request until the inbox
///   has drained (every stored notification applied), against `openssl speed ecdsap256` verifies per CPU-second.
/// Skipped while the route answers 404.
enum NotificationsBenchmark {
    static let customers = 1_000
    /// Pre-signed notifications per second of load (~9 KB each), written before each run, removed after it.
    static let poolPerSecond = 2_500
    static let poolMax = 40_000
    static let firstTransactionId = 3_000_000_000_000_000
    /// How long the worker may take to apply what a run stored, after wrk has stopped.
    static let drainTimeoutSeconds = 600.0

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        var result = BenchResult()
        guard try routeAnswers(workspace) else {
            result.skipped.append("notifications: POST /v1/notifications/appstore answers 404 in this build")
            return result
        }
        let poolSize = min(poolMax, poolPerSecond * options.loadSeconds)
        let (config, database) = try workspace.writeConfig("notifications")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("notifications.log"))
        var runs: [PoolRun] = [], commits: [Double] = [], openssl: [Double] = []
        var perCPUSecond: [Double] = [], drainSeconds: [Double] = [], appliedTotal = 0, work: [DatabaseWork] = []
        do {
            let tokens = try server.seedCustomers(customers)
            for repetition in 0..<options.repetitions {
                let pool = try writePool(workspace, count: poolSize, files: Wrk.threadCount(connections: options.connections),
                                         name: "notifications-\(repetition)", firstId: firstTransactionId + repetition * 100_000_000, tokens: tokens)
                commits.append(try SQLiteDatabase.measureSingleRowDurableCommits(
                    path: workspace.file("single-row-commits.db").path, seconds: Double(options.loadSeconds)))
                openssl.append(try VerifyBenchmark.opensslVerifyPerSecond(workspace))
                let before = try server.metrics()
                let ((run, drained), cpuSeconds) = try server.measuringCPU {
                    let run = try server.send(pool, expectedStatus: 200, options, workspace)
                    let target = Int(before[appliedName] ?? 0) + run.ok
                    return (run, try waitUntilApplied(server, count: target))
                }
                let after = try server.metrics()
                work.append(DatabaseWork(metrics: after) - DatabaseWork(metrics: before))
                pool.remove()
                let stored = Int((after[receivedName] ?? 0) - (before[receivedName] ?? 0))
                let applied = Int((after[appliedName] ?? 0) - (before[appliedName] ?? 0))
                let waiting = ["received", "retrying", "dead"].map { (state: $0, count: Int(after["kakin_notification_inbox{state=\"\($0)\"}"] ?? 0)) }
                runs.append(run)
                appliedTotal += applied
                perCPUSecond.append(Double(applied) / cpuSeconds)
                if let drained { drainSeconds.append(drained) }
                result.check("notifications run \(repetition + 1): \(BenchResult.grouped(run.ok)) answered 200 = \(BenchResult.grouped(stored)) stored as new, "
                             + "\(run.other) other answers, \(run.run.socketErrors) socket errors",
                             run.ok == stored && run.other == 0 && run.run.socketErrors == 0)
                let when: String = drained.map { String(format: "the last %.1f s after wrk stopped", $0) } ?? "NOT within \(Int(drainTimeoutSeconds)) s"
                let inbox: String = waiting.map { "\($0.state) \($0.count)" }.joined(separator: ", ")
                let allApplied = drained != nil && applied == stored && waiting.allSatisfy { $0.count == 0 }
                result.check("notifications run \(repetition + 1): every stored notification applied (\(BenchResult.grouped(applied)) applied, \(when); inbox \(inbox))",
                             allApplied)
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }

        let perSecond = runs.map(\.perSecond)
        let cpuPerNotification = median(perCPUSecond.map { 1 / $0 })
        result.figures.append(Figure(
            name: "notifications ingested over HTTP (\(options.connections) connections)", value: median(perSecond),
            baselineName: "durable single-row commits (SQLite, same disk)", baselineValue: median(commits), goal: 1.5,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms", median(runs.map(\.run.latencyP50Ms)), median(runs.map(\.run.latencyP99Ms))),
                "notifications: \(BenchResult.rates(perSecond)); single-row commits: \(BenchResult.rates(commits))",
                "\(BenchResult.grouped(poolSize)) new pre-signed ONE_TIME_CHARGE notifications per run over \(BenchResult.grouped(customers)) customers, "
                    + "load until \(options.loadSeconds) s or the pool is used up; the worker applies them meanwhile, on the same cores",
            ]))
        result.figures.append(Figure(
            name: "notifications applied per server CPU-second", value: median(perCPUSecond),
            baselineName: VerifyBenchmark.opensslName, baselineValue: median(openssl), goal: 0.2,
            details: [
                String(format: "kakin serve CPU per notification, ingested and applied: %.0f µs = %.1f verifies of openssl's %.0f µs (goal ≤ 5)",
                       cpuPerNotification * 1e6, cpuPerNotification * median(openssl), 1e6 / median(openssl)),
                "per CPU-second: \(BenchResult.rates(perCPUSecond)); openssl: \(BenchResult.rates(openssl))",
                "CPU from the first request until the inbox had drained; the last applied "
                    + drainSeconds.map { String(format: "%.1f s", $0) }.joined(separator: ", ") + " after wrk stopped",
                work.total.perRequest(appliedTotal, "notification, ingested and applied"),
            ]))

        let report = try workspace.ledgerCheck(database: database)
        let entries = report["entries"]?.intValue ?? -1
        result.check("notifications: ledger entries \(BenchResult.grouped(entries)) = notifications applied \(BenchResult.grouped(appliedTotal)) "
                     + "(each a new purchase of a known customer)", entries == appliedTotal)
        result.check("notifications: kakin ledger check (\(report["customers"]?.intValue ?? 0) customers, every balance = sum of its entries)",
                     report["ok"] == true)
        return result
    }

    static let receivedName = "kakin_notifications_received_total"
    static let appliedName = "kakin_notifications_applied_total"

    /// Waits until the server has applied `count` notifications in all; the seconds it took, nil past the timeout.
    /// Polled once a second: each `/metrics` reads the inbox's waiting rows from the database (~10 ms of server CPU
    /// with 15,000 waiting), which polling every 50 ms added to the figure (~5 % of its CPU; now < 1 %).
    static func waitUntilApplied(_ server: KakinServerProcess, count: Int) throws -> Double? {
        let start = Date()
        while try server.counter(appliedName) < count {
            guard Date().timeIntervalSince(start) < drainTimeoutSeconds else { return nil }
            Thread.sleep(forTimeInterval: 1)
        }
        return Date().timeIntervalSince(start)
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

    /// `count` notifications as `requests.lua` lines (`/v1/notifications/appstore {"signedPayload": …}`) in files
    /// NAME-0.lines …, one per wrk thread; transaction ids count up from `firstId`. With `tokens`, notification n
    /// is a purchase of customer n mod their count, carrying its token; without, of an unknown customer.
    static func writePool(_ workspace: BenchWorkspace, count: Int, files: Int, name: String, firstId: Int, tokens: [String]? = nil) throws -> RequestPool {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let appStore = workspace.appStore
        return try RequestPool.write(workspace, name: name, count: count, files: files) { n in
            let transaction = try appStore.consumableTransaction(
                id: String(firstId + n), pack: BenchAppStore.coinPacks[n % BenchAppStore.coinPacks.count], quantity: 1,
                appAccountToken: tokens.map { $0[n % $0.count] } ?? UUID().uuidString.lowercased(), nowMs: nowMs - Int64(n))
            let body: JSONValue = ["signedPayload": .string(try appStore.oneTimeChargeNotification(transaction: transaction, nowMs: nowMs))]
            return ("/v1/notifications/appstore", body)
        }
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

extension NotificationsBenchmark {
    /// `--prepare`: the customers seeded on `notifications.json`'s database and `--seconds` of notifications in
    /// `notifications-profile-N.lines`, for `scripts/profile notifications`.
    static func prepare(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> (config: URL, pool: RequestPool) {
        let (config, _) = try workspace.writeConfig("notifications")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("notifications.log"))
        let tokens: [String]
        do {
            tokens = try server.seedCustomers(customers)
            try server.stop()
        } catch {
            server.kill()
            throw error
        }
        let pool = try writePool(workspace, count: poolPerSecond * options.loadSeconds, files: Wrk.threadCount(connections: options.connections),
                                 name: "notifications-profile", firstId: firstTransactionId, tokens: tokens)
        return (config, pool)
    }
}
