import Foundation
import KakinCore
import KakinMetrics
import KakinService
import KakinSQLite
import KakinStorage

/// `kakin-bench metrics [--customers N] [--rebuild]`: the business overview over a generated year (issue 18), and
/// ingest while `kakin report rebuild` runs over it (issue 28). On a SQLite file: N customers (default 1,000,000) created
/// through the year; 30% subscribe monthly (980 JPY, 30-day periods) from a day of the year, three in four of them
/// cancel after 1–12 months, the rest renew to the year's end; 10% buy 500 coins. Facts (customers, transactions with
/// their decoded status fields, links, renewal infos, ledger) and the daily rollups are generated directly with SQL
/// (INSERT … SELECT over recursive sequences), the rollups by aggregating the generated facts the way
/// `docs/metrics.md` defines them; all under the bench app (`BenchAppStore.bundleId`, Sandbox, product `m`).
///
/// Figure 1, in-process: the year's overview from the rollups (`BusinessMetrics.overview`), overviews per second;
/// baseline: the same numbers (active subscriptions at the year's end, new subscriptions, gross revenue, paid
/// transactions, voluntary churn) queried from the facts directly. Goal: the overview in ≤ 50 ms.
///
/// Figures 2 and 3 (skipped with `--customers` above 200,000 unless `--rebuild`): `kakin serve` on the year's database,
/// 1,000 customers seeded; verified purchases (wrk, pre-signed, as `purchases` sends them) and then status reads
/// (`GET /v1/customers/bench-N`) for `--seconds` each, first without a rebuild (the baselines), then while
/// `kakin report rebuild --config` runs beside the server as its own process (one customer range per write). Checks:
/// both loads ended before the rebuild did; every 201 was applied; and once the rollup worker has caught up and the
/// server stopped, a second `kakin report rebuild` finds 0 cells differing (the rebuild's rollups plus the incremental
/// ones for what was bought meanwhile are what the facts say).
enum MetricsBenchmark {
    static let day: Int64 = 86_400_000
    static let t0: Int64 = 1_735_689_600_000  // 2025-01-01T00:00:00Z

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        try blocking { try await measure(workspace, options) }
    }

    static func measure(_ workspace: BenchWorkspace, _ options: BenchOptions) async throws -> BenchResult {
        let n = options.customers
        let path = workspace.file("metrics.db").path
        var sqliteOptions = SQLiteDatabase.Options()
        sqliteOptions.durable = false
        let database = try SQLiteDatabase(path: path, options: sqliteOptions)
        let store = KakinStore(database: database, ids: BenchIDs(), clock: FixedClock(ms: t0 + 365 * day))
        try await store.migrate()
        let started = Date()
        try await generate(database, customers: n)
        let generated = Date().timeIntervalSince(started)
        let settings = MetricsSettings(apps: [AppMetricsSettings(bundleId: BenchAppStore.bundleId, calendar: FixedOffsetCalendar(),
                                                                 environments: [.sandbox], periods: ["m": ISOPeriod(months: 1)])])
        let numbers = BusinessMetrics(store: store, settings: settings, clock: FixedClock(ms: t0 + 365 * day), logger: Logger(minimum: .error))

        var overviewMs: [Double] = [], factsMs: [Double] = []
        var overview: Overview?
        var facts: [Int64] = []
        for _ in 0..<max(5, options.repetitions) {
            var t = Date()
            overview = try await numbers.overview(from: "2025-01-01", to: "2025-12-31", filter: MetricsFilter())
            overviewMs.append(Date().timeIntervalSince(t) * 1000)
            t = Date()
            facts = try await factsQuery(database)
            factsMs.append(Date().timeIntervalSince(t) * 1000)
        }
        let o = overview!
        let medianOverview = overviewMs.sorted()[overviewMs.count / 2], medianFacts = factsMs.sorted()[factsMs.count / 2]
        var result = BenchResult()
        var figure = Figure(name: "business overview, a year of \(BenchResult.grouped(n)) customers (rollups)", value: 1000 / medianOverview,
                            baselineName: "the same numbers from the facts", baselineValue: 1000 / medianFacts, goal: nil)
        figure.details = [
            String(format: "overview %.1f ms (goal ≤ 50 ms: %@), facts query %.1f ms; medians of %d", medianOverview,
                   medianOverview <= 50 ? "ok" : "BELOW GOAL", medianFacts, overviewMs.count),
            "generated in \(Int(generated)) s: \(BenchResult.grouped(Int(facts[5]))) transactions, \(BenchResult.grouped(Int(facts[6]))) rollup cells",
            "overview: active \(o.activeSubscriptions), new \(o.newSubscriptions), churned \(o.churnedVoluntary), gross \(o.revenue.first?.gross ?? 0) JPY, coins sold \(o.coinsSold)",
        ]
        result.figures.append(figure)
        result.check("overview from the rollups = the same numbers from the facts (active, new, gross, paid transactions, churned)",
                     [o.activeSubscriptions, o.newSubscriptions, o.revenue.first?.gross ?? 0, o.paidTransactions, o.churnedVoluntary] == Array(facts.prefix(5)))
        await database.close()
        if n <= 200_000 || options.rebuild {
            result.append(try duringRebuild(workspace, options))
        } else {
            result.skipped.append("ingest during kakin report rebuild (over 200,000 customers: add --rebuild)")
        }
        return result
    }

    /// `kakin serve` on the generated year: purchases, then status reads, without a rebuild and while `kakin report
    /// rebuild` runs beside it; then a second rebuild on the quiet database.
    static func duringRebuild(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let config = try workspace.writeConfig("metrics", products: .array((BenchAppStore.productsJSON.arrayValue ?? [])
            + [["productId": "m", "type": "autoRenewable", "groupId": "m", "period": "P1M", "price": 980, "currency": "JPY"]]))
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config.config, log: workspace.file("metrics-serve.log"))
        let files = Wrk.threadCount(connections: options.connections)
        let poolSize = min(PurchasesBenchmark.poolMax, PurchasesBenchmark.poolPerSecond * options.loadSeconds)
        var result = BenchResult()
        let quiet: (purchases: PoolRun, reads: Wrk.Run), during: (purchases: PoolRun, reads: Wrk.Run)
        let rebuild: (seconds: Double, answer: JSONValue, loadsEndedFirst: Bool, applied: Int)
        do {
            let tokens = try server.seedCustomers(PurchasesBenchmark.customers)
            let pools = try (0..<2).map { try PurchasesBenchmark.writePool(workspace, tokens: tokens, count: poolSize, repetition: $0, files: files,
                                                                           name: "metrics-purchases-\($0)") }
            func load(_ pool: RequestPool) throws -> (purchases: PoolRun, reads: Wrk.Run) {
                let purchases = try server.send(pool, expectedStatus: 201, options, workspace)
                pool.remove()
                return (purchases, try server.customerReads("", ["\(PurchasesBenchmark.customers)"], options, workspace).run)
            }
            quiet = try load(pools[0])
            let appliedBefore = try server.counter("kakin_purchases_applied_total")
            let child = try RebuildProcess(workspace, config: config.config, name: "metrics-rebuild-1")
            during = try load(pools[1])
            let loadsEndedFirst = child.isRunning
            let applied = try server.counter("kakin_purchases_applied_total") - appliedBefore
            let (seconds, answer) = try child.wait()
            rebuild = (seconds, answer, loadsEndedFirst, applied)
            try waitForTheRollupWorker(server)
            try server.stop()
        } catch {
            server.kill()
            throw error
        }
        let second = try RebuildProcess(workspace, config: config.config, name: "metrics-rebuild-2").wait()

        func details(_ run: Wrk.Run, _ baseline: Wrk.Run) -> String {
            String(format: "latency p50 %.2f ms, p99 %.2f ms; without a rebuild p50 %.2f ms, p99 %.2f ms", run.latencyP50Ms, run.latencyP99Ms,
                   baseline.latencyP50Ms, baseline.latencyP99Ms)
        }
        let answer = rebuild.answer
        let writes = answer["writes"]?.intValue ?? 0, customers = answer["customers"]?.intValue ?? 0
        result.figures.append(Figure(
            name: "purchases credited during kakin report rebuild", value: during.purchases.perSecond,
            baselineName: "the same without a rebuild", baselineValue: quiet.purchases.perSecond, goal: nil,
            details: [
                details(during.purchases.run, quiet.purchases.run),
                "\(BenchResult.grouped(during.purchases.ok)) purchases answered 201 in \(options.loadSeconds) s of load, one run each (the rebuild runs once)",
                String(format: "kakin report rebuild beside the server: %.0f s, %@ customers in %@ writes (%@ per write), %@ cells, %d differing",
                       rebuild.seconds, BenchResult.grouped(customers), BenchResult.grouped(writes),
                       BenchResult.grouped(BusinessMetrics.rebuildCustomersPerWrite), BenchResult.grouped(answer["cells"]?.intValue ?? 0),
                       answer["differing"]?.intValue ?? -1),
            ]))
        result.figures.append(Figure(
            name: "status reads during kakin report rebuild", value: during.reads.requestsPerSecond,
            baselineName: "the same without a rebuild", baselineValue: quiet.reads.requestsPerSecond, goal: nil,
            details: [details(during.reads, quiet.reads), "GET /v1/customers/bench-N over the 1,000 seeded customers, right after the purchases"]))
        result.check("both loads ended while kakin report rebuild was still running (the figures were taken during it)", rebuild.loadsEndedFirst)
        result.check("purchases during the rebuild: \(BenchResult.grouped(during.purchases.ok)) answered 201 = \(BenchResult.grouped(rebuild.applied)) applied, "
                     + "\(during.purchases.other) other answers", during.purchases.ok == rebuild.applied && during.purchases.other == 0
                        && quiet.purchases.other == 0)
        result.check("status reads: \(during.reads.non2xx + quiet.reads.non2xx) non-2xx answers", during.reads.non2xx + quiet.reads.non2xx == 0)
        result.check(String(format: "a second kakin report rebuild once the worker caught up (%.0f s): %d differing %@", second.seconds,
                            second.answer["differing"]?.intValue ?? -1, second.answer["sample"]?.jsonString ?? ""),
                     second.answer["differing"] == .int(0))
        return result
    }

    /// Waits until the server's rollup worker has counted every purchase: the outstanding paid coins it reports stay the
    /// same over more than one of its passes (every 2 s; each purchase moves them).
    static func waitForTheRollupWorker(_ server: KakinServerProcess) throws {
        let gauge = "kakin_business_outstanding_paid_coins"
        var last = try server.metrics()[gauge]
        for _ in 0..<60 {
            Thread.sleep(forTimeInterval: 3)
            let now = try server.metrics()[gauge]
            if now == last { return }
            last = now
        }
        throw SubprocessFailure(description: "the rollup worker did not catch up within 3 minutes")
    }

    /// `kakin report rebuild --config CONFIG` as a process of its own, its JSON answer in NAME.json.
    struct RebuildProcess {
        let process = Process()
        let output: URL
        let errors: URL
        let started = Date()

        init(_ workspace: BenchWorkspace, config: URL, name: String) throws {
            output = workspace.file("\(name).json")
            errors = workspace.file("\(name).stderr")
            process.executableURL = workspace.kakin
            process.arguments = ["report", "rebuild", "--config", config.path]
            process.standardOutput = try Subprocess.newFile(output)
            process.standardError = try Subprocess.newFile(errors)
            process.standardInput = FileHandle.nullDevice
            try process.run()
        }

        var isRunning: Bool { process.isRunning }

        /// Waits for it; its wall-clock time and answer.
        func wait() throws -> (seconds: Double, answer: JSONValue) {
            process.waitUntilExit()
            let seconds = Date().timeIntervalSince(started)
            guard process.terminationReason == .exit, process.terminationStatus == 0 else {
                throw SubprocessFailure(description: "kakin report rebuild failed (status \(process.terminationStatus)): \(Subprocess.tail(of: errors))")
            }
            return (seconds, try JSONParser.parse(try String(contentsOf: output, encoding: .utf8)))
        }
    }

    /// The year's facts and rollups, in SQL.
    static func generate(_ database: SQLiteDatabase, customers n: Int) async throws {
        let bundle = "'\(BenchAppStore.bundleId)'"
        // A subscriber i (i % 10 < 3) starts on day s = (i * 7919) % 365; cancels (i % 4 != 0) after 1 + (i / 7) % 12 months.
        let start = "((i * 7919) % 365)"
        let months = "(CASE WHEN i % 4 != 0 THEN 1 + (i / 7) % 12 ELSE 13 END)"
        let sequence = "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < \(n - 1))"
        let statements = [
            "\(sequence) INSERT INTO customers (customer_id, app_account_token, created_at_ms) SELECT 'c' || i, 'tok-' || i, \(t0) + (i % 365) * \(day) FROM n",
            """
            \(sequence), k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < 12),
            p AS (SELECT i, j, \(t0) + (\(start) + j * 30) * \(day) AS at FROM n, k WHERE i % 10 < 3 AND j < \(months) AND \(start) + j * 30 <= 364)
            INSERT INTO transactions (transaction_id, original_transaction_id, bundle_id, product_id, product_type, environment, purchase_date_ms,
                expires_date_ms, signed_date_ms, jws, customer_id, first_seen_ms, updated_ms, status_input, status_json)
            SELECT 't' || i || '-' || j, 'o' || i, \(bundle), 'm', 'Auto-Renewable Subscription', 'Sandbox', at, at + 30 * \(day), at, '', 'c' || i,
                at, at, 1,
                json_object('transactionId', 't' || i || '-' || j, 'originalTransactionId', 'o' || i, 'bundleId', \(bundle), 'productId', 'm',
                    'purchaseDate', at, 'expiresDate', at + 30 * \(day), 'type', 'Auto-Renewable Subscription', 'signedDate', at,
                    'environment', 'Sandbox', 'price', 980000, 'currency', 'JPY', 'quantity', 1, 'inAppOwnershipType', 'PURCHASED',
                    'transactionReason', CASE j WHEN 0 THEN 'PURCHASE' ELSE 'RENEWAL' END)
            FROM p
            """,
            "INSERT INTO original_links (original_transaction_id, customer_id, linked_at_ms) SELECT DISTINCT original_transaction_id, customer_id, \(t0) FROM transactions",
            """
            \(sequence) INSERT INTO renewal_infos (original_transaction_id, signed_date_ms, environment, jws, updated_ms, status_json)
            SELECT 'o' || i, \(t0), 'Sandbox', '', \(t0),
                json_object('originalTransactionId', 'o' || i, 'productId', 'm', 'autoRenewStatus', CASE WHEN i % 4 != 0 THEN 0 ELSE 1 END,
                    'signedDate', \(t0), 'environment', 'Sandbox', 'isInBillingRetryPeriod', json('false'))
            FROM n WHERE i % 10 < 3
            """,
            """
            \(sequence) INSERT INTO ledger_entries (entry_id, customer_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after, reference, effect_key)
            SELECT 'le-' || i, 'c' || i, \(t0) + (i % 365) * \(day) + 3600000, 'purchase', 500, 50, 500, 50, 'coins-' || i, 'purchase:coins-' || i
            FROM n WHERE i % 10 = 5
            """,
            // The rollups, aggregated from the facts as docs/metrics.md defines them (UTC days).
            """
            INSERT INTO metric_days (metric, bundle_id, product_id, source, currency, day, value)
            SELECT metric, \(bundle), product, 'appStore', currency, day, SUM(v) FROM (
                SELECT 'gross' AS metric, 'm' AS product, 'JPY' AS currency, purchase_date_ms / \(day) AS day, 980 AS v FROM transactions
                UNION ALL SELECT 'paidTransactions', 'm', '', purchase_date_ms / \(day), 1 FROM transactions
                UNION ALL SELECT 'newSubscriptions', 'm', '', MIN(purchase_date_ms) / \(day), 1 FROM transactions GROUP BY original_transaction_id
                UNION ALL SELECT 'active', 'm', '', MIN(purchase_date_ms) / \(day), 1 FROM transactions GROUP BY original_transaction_id
                UNION ALL SELECT 'active', 'm', '', MAX(expires_date_ms) / \(day), -1 FROM transactions GROUP BY original_transaction_id
                UNION ALL SELECT 'mrr', 'm', 'JPY', MIN(purchase_date_ms) / \(day), 980 FROM transactions GROUP BY original_transaction_id
                UNION ALL SELECT 'mrr', 'm', 'JPY', MAX(expires_date_ms) / \(day), -980 FROM transactions GROUP BY original_transaction_id
                UNION ALL SELECT 'churnVoluntary', 'm', '', MAX(t.expires_date_ms) / \(day), 1 FROM transactions t
                    JOIN renewal_infos r ON r.original_transaction_id = t.original_transaction_id
                    WHERE json_extract(r.status_json, '$.autoRenewStatus') = 0 GROUP BY t.original_transaction_id
            ) GROUP BY metric, product, currency, day
            """,
            """
            INSERT INTO metric_days (metric, bundle_id, product_id, source, currency, day, value)
            SELECT metric, '', '', '', '', day, SUM(v) FROM (
                SELECT 'paidCoins' AS metric, at_ms / \(day) AS day, paid_delta AS v FROM ledger_entries
                UNION ALL SELECT 'coinsSold', at_ms / \(day), paid_delta FROM ledger_entries
                UNION ALL SELECT 'coinsGrantedFree', at_ms / \(day), free_delta FROM ledger_entries
            ) GROUP BY metric, day
            """,
        ]
        try await database.write { db in
            for sql in statements { try db.execute(sql, []) }
        }
        // One more small write: the writer checkpoints the generation's WAL (over 1 GB) before it and the WAL restarts, so
        // the server opening the file later does not read the whole WAL again while it starts.
        try await database.write { db in
            try db.execute("INSERT INTO leases (name, owner, until_ms) VALUES ('kakin-bench', '', 0)", [])
            try db.execute("DELETE FROM leases WHERE name = 'kakin-bench'", [])
        }
    }

    /// The same numbers straight from the facts: active at the year's last instant, new, gross, paid transactions,
    /// voluntary churn in the year; then counts for the details.
    static func factsQuery(_ database: SQLiteDatabase) async throws -> [Int64] {
        let end = t0 + 365 * day
        return try await database.read { db in
            let a = try db.queryOne("""
                SELECT COUNT(*) AS n FROM (SELECT original_transaction_id FROM transactions GROUP BY original_transaction_id
                    HAVING MIN(purchase_date_ms) < ? AND MAX(expires_date_ms) >= ?)
                """, [.integer(end), .integer(end)])?.int("n") ?? 0
            let s = try db.queryOne("""
                SELECT COUNT(DISTINCT original_transaction_id) AS new, SUM(json_extract(status_json, '$.price')) / 1000 AS gross, COUNT(*) AS paid
                FROM transactions WHERE purchase_date_ms >= ? AND purchase_date_ms < ?
                """, [.integer(t0), .integer(end)])
            let churned = try db.queryOne("""
                SELECT COUNT(*) AS n FROM (SELECT MAX(t.expires_date_ms) AS e FROM transactions t JOIN renewal_infos r
                    ON r.original_transaction_id = t.original_transaction_id WHERE json_extract(r.status_json, '$.autoRenewStatus') = 0
                    GROUP BY t.original_transaction_id) WHERE e < ?
                """, [.integer(end)])?.int("n") ?? 0
            let transactions = try db.queryOne("SELECT COUNT(*) AS n FROM transactions", [])?.int("n") ?? 0
            let cells = try db.queryOne("SELECT COUNT(*) AS n FROM metric_days", [])?.int("n") ?? 0
            return [a, s?.int("new") ?? 0, s?.int("gross") ?? 0, s?.int("paid") ?? 0, churned, transactions, cells]
        }
    }

    struct FixedClock: Clock {
        var ms: Int64
        func nowMs() -> Int64 { ms }
    }

    final class BenchIDs: IDGenerator, @unchecked Sendable {
        let lock = NSLock()
        var n = 0
        func uuid() -> String { lock.withLock { n += 1; return String(format: "00000000-0000-4000-8000-%012d", n) } }
        func id(prefix: String) -> String { prefix + String(lock.withLock { n += 1; return n }) }
    }
}
