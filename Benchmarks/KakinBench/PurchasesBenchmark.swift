import Foundation
import KakinCore
import KakinSQLite
import KakinStorage

/// verified purchases over HTTP: wrk POSTs `/v1/customers/{id}/transactions` `{"signedTransaction": …}`, every
/// request a new pre-signed consumable transaction carrying its customer's `appAccountToken` (as an app
/// passes it to StoreKit), spread over 1,000 customers; each answered 201 once verified, credited and
/// durably committed. Two figures in one run:
/// - purchases per second against durable single-row SQLite commits per second on the same disk;
/// - purchases per second of the server's CPU against `openssl speed ecdsap256` verifies per CPU-second:
///   the ratio is 1 / (the server's CPU per purchase, counted in ES256 verifies).
enum PurchasesBenchmark {
    static let customers = 1_000
    /// Pre-signed transactions per second of load (~3.7 KB each), written before each run, removed after it.
    static let poolPerSecond = 4_000
    static let poolMax = 48_000
    static let firstTransactionId = 6_000_000_000_000_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, database) = try workspace.writeConfig("purchases")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("purchases.log"))
        let poolSize = min(poolMax, poolPerSecond * options.loadSeconds)
        var runs: [PoolRun] = [], commits: [Double] = [], openssl: [Double] = [], perCPUSecond: [Double] = [], work: [DatabaseWork] = []
        var result = BenchResult()
        do {
            let tokens = try server.seedCustomers(customers)
            for repetition in 0..<options.repetitions {
                let pool = try writePool(workspace, tokens: tokens, count: poolSize, repetition: repetition,
                                         files: Wrk.threadCount(connections: options.connections))
                commits.append(try SQLiteDatabase.measureSingleRowDurableCommits(
                    path: workspace.file("single-row-commits.db").path, seconds: Double(options.loadSeconds)))
                openssl.append(try VerifyBenchmark.opensslVerifyPerSecond(workspace))
                let appliedBefore = try server.counter("kakin_purchases_applied_total")
                let ((run, cpuSeconds), runWork) = try server.measuringWork {
                    try server.measuringCPU { try server.send(pool, expectedStatus: 201, options, workspace) }
                }
                work.append(runWork)
                let applied = try server.counter("kakin_purchases_applied_total") - appliedBefore
                pool.remove()
                runs.append(run)
                perCPUSecond.append(Double(run.ok) / cpuSeconds)
                result.check("purchases run \(repetition + 1): \(BenchResult.grouped(run.ok)) answered 201 = \(BenchResult.grouped(applied)) "
                             + "applied (kakin_purchases_applied_total), \(run.other) other answers, \(run.run.socketErrors) socket errors",
                             run.ok == applied && run.other == 0 && run.run.socketErrors == 0)
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }

        let perSecond = runs.map(\.perSecond)
        let latency = String(format: "latency p50 %.2f ms, p99 %.2f ms", median(runs.map(\.run.latencyP50Ms)), median(runs.map(\.run.latencyP99Ms)))
        let cpuPerPurchase = median(perCPUSecond.map { 1 / $0 })
        result.figures.append(Figure(
            name: "verified purchases over HTTP (\(options.connections) connections)", value: median(perSecond),
            baselineName: "durable single-row commits (SQLite, same disk)", baselineValue: median(commits), goal: 1.5,
            details: [
                latency,
                "purchases: \(BenchResult.rates(perSecond)); single-row commits: \(BenchResult.rates(commits))",
                "\(BenchResult.grouped(poolSize)) new signed consumable transactions per run over \(BenchResult.grouped(customers)) customers "
                    + "(each with its customer's appAccountToken), load until \(options.loadSeconds) s or the pool is used up",
            ]))
        result.figures.append(Figure(
            name: "verified purchases per server CPU-second", value: median(perCPUSecond),
            baselineName: VerifyBenchmark.opensslName, baselineValue: median(openssl), goal: 0.33,
            details: [
                String(format: "kakin serve CPU per purchase: %.0f µs = %.1f verifies of openssl's %.0f µs (goal ≤ 3)", cpuPerPurchase * 1e6,
                       cpuPerPurchase * median(openssl), 1e6 / median(openssl)),
                "per CPU-second: \(BenchResult.rates(perCPUSecond)); openssl: \(BenchResult.rates(openssl))",
                "user + system CPU of kakin serve from the first request to the last answer (wrk shares the cores, and is not counted)",
                work.total.perRequest(runs.map(\.ok).reduce(0, +), "purchase"),
            ]))

        let answered201 = runs.map(\.ok).reduce(0, +)
        let report = try workspace.ledgerCheck(database: database)
        let entries = report["entries"]?.intValue ?? -1
        result.check("purchases: ledger entries \(BenchResult.grouped(entries)) = 201 answers \(BenchResult.grouped(answered201))",
                     entries == answered201)
        result.check("purchases: kakin ledger check (\(report["customers"]?.intValue ?? 0) customers, every balance = sum of its entries)",
                     report["ok"] == true)
        return result
    }

    /// `count` purchases for repetition `repetition`: transaction n goes to customer n mod 1,000, whose token it carries.
    static func writePool(_ workspace: BenchWorkspace, tokens: [String], count: Int, repetition: Int, files: Int, name: String? = nil) throws -> RequestPool {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let appStore = workspace.appStore
        let firstId = firstTransactionId + repetition * 100_000_000
        return try RequestPool.write(workspace, name: name ?? "purchases-\(repetition)", count: count, files: files) { n in
            let customer = n % tokens.count
            let transaction = try appStore.consumableTransaction(
                id: String(firstId + n), pack: BenchAppStore.coinPacks[n % BenchAppStore.coinPacks.count], quantity: 1,
                appAccountToken: tokens[customer], nowMs: nowMs - Int64(n))
            return ("/v1/customers/bench-\(customer)/transactions", ["signedTransaction": .string(transaction)])
        }
    }
}

extension PurchasesBenchmark {
    /// `--prepare`: the customers seeded on `purchases.json`'s database and `--seconds` of purchases in
    /// `purchases-profile-N.lines`, for `scripts/profile purchases`.
    static func prepare(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> (config: URL, pool: RequestPool) {
        let (config, _) = try workspace.writeConfig("purchases")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("purchases.log"))
        let tokens: [String]
        do {
            tokens = try server.seedCustomers(customers)
            try server.stop()
        } catch {
            server.kill()
            throw error
        }
        let pool = try writePool(workspace, tokens: tokens, count: poolPerSecond * options.loadSeconds, repetition: 0,
                                 files: Wrk.threadCount(connections: options.connections), name: "purchases-profile")
        return (config, pool)
    }
}
