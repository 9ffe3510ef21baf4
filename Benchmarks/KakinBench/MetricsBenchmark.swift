import Foundation
import KakinCore
import KakinMetrics
import KakinService
import KakinSQLite
import KakinStorage

/// `kakin-bench metrics [--customers N]`: the business overview over a generated year (issue 18). In-process, on a
/// SQLite file: N customers (default 1,000,000) created through the year; 30% subscribe monthly (980 JPY, 30-day
/// periods) from a day of the year, three in four of them cancel after 1–12 months, the rest renew to the year's end;
/// 10% buy 500 coins. Facts (customers, transactions with their decoded status fields, links, renewal infos, ledger)
/// and the daily rollups are generated directly with SQL (INSERT … SELECT over recursive sequences), the rollups by
/// aggregating the generated facts the way `docs/metrics.md` defines them.
///
/// Figure: the year's overview from the rollups (`BusinessMetrics.overview`), overviews per second; baseline: the same
/// numbers (active subscriptions at the year's end, new subscriptions, gross revenue, paid transactions, voluntary
/// churn) queried from the facts directly. Goal: the overview in ≤ 50 ms. Check: `rebuild` (what `kakin report
/// rebuild` runs: every customer recomputed from the facts in Swift) finds the SQL-generated rollups equal, cell by
/// cell (skipped with `--customers` above 200,000 unless `--rebuild`).
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
        let settings = MetricsSettings(apps: [AppMetricsSettings(bundleId: "bench", calendar: FixedOffsetCalendar(), environments: [.production],
                                                                 periods: ["m": ISOPeriod(months: 1)])])
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
        if n <= 200_000 || options.rebuild {
            let t = Date()
            let rebuilt = try await numbers.rebuild()
            result.check("kakin report rebuild on the generated year: \(rebuilt.cells) cells recomputed from \(BenchResult.grouped(rebuilt.customers)) customers' facts in \(Int(Date().timeIntervalSince(t))) s, \(rebuilt.differing) differing \(rebuilt.sample)",
                         rebuilt.differing == 0)
        } else {
            result.skipped.append("rebuild check (over 200,000 customers: add --rebuild)")
        }
        await database.close()
        return result
    }

    /// The year's facts and rollups, in SQL.
    static func generate(_ database: SQLiteDatabase, customers n: Int) async throws {
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
            SELECT 't' || i || '-' || j, 'o' || i, 'bench', 'm', 'Auto-Renewable Subscription', 'Production', at, at + 30 * \(day), at, '', 'c' || i,
                at, at, 1,
                json_object('transactionId', 't' || i || '-' || j, 'originalTransactionId', 'o' || i, 'bundleId', 'bench', 'productId', 'm',
                    'purchaseDate', at, 'expiresDate', at + 30 * \(day), 'type', 'Auto-Renewable Subscription', 'signedDate', at,
                    'environment', 'Production', 'price', 980000, 'currency', 'JPY', 'quantity', 1, 'inAppOwnershipType', 'PURCHASED',
                    'transactionReason', CASE j WHEN 0 THEN 'PURCHASE' ELSE 'RENEWAL' END)
            FROM p
            """,
            "INSERT INTO original_links (original_transaction_id, customer_id, linked_at_ms) SELECT DISTINCT original_transaction_id, customer_id, \(t0) FROM transactions",
            """
            \(sequence) INSERT INTO renewal_infos (original_transaction_id, signed_date_ms, environment, jws, updated_ms, status_json)
            SELECT 'o' || i, \(t0), 'Production', '', \(t0),
                json_object('originalTransactionId', 'o' || i, 'productId', 'm', 'autoRenewStatus', CASE WHEN i % 4 != 0 THEN 0 ELSE 1 END,
                    'signedDate', \(t0), 'environment', 'Production', 'isInBillingRetryPeriod', json('false'))
            FROM n WHERE i % 10 < 3
            """,
            """
            \(sequence) INSERT INTO ledger_entries (entry_id, customer_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after, reference, effect_key)
            SELECT 'le-' || i, 'c' || i, \(t0) + (i % 365) * \(day) + 3600000, 'purchase', 500, 50, 500, 50, 'coins-' || i, 'purchase:coins-' || i
            FROM n WHERE i % 10 = 5
            """,
            // The rollups, aggregated from the facts as docs/metrics.md defines them (UTC days).
            """
            INSERT INTO metric_days (metric, bundle_id, product_id, currency, day, value)
            SELECT metric, 'bench', product, currency, day, SUM(v) FROM (
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
            INSERT INTO metric_days (metric, bundle_id, product_id, currency, day, value)
            SELECT metric, '', '', '', day, SUM(v) FROM (
                SELECT 'paidCoins' AS metric, at_ms / \(day) AS day, paid_delta AS v FROM ledger_entries
                UNION ALL SELECT 'coinsSold', at_ms / \(day), paid_delta FROM ledger_entries
                UNION ALL SELECT 'coinsGrantedFree', at_ms / \(day), free_delta FROM ledger_entries
            ) GROUP BY metric, day
            """,
        ]
        try await database.write { db in
            for sql in statements { try db.execute(sql, []) }
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
