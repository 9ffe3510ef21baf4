import Foundation
import KakinCore
import KakinEvents
import KakinSQLite
import KakinStorage

#if canImport(Glibc)
    import Glibc
#endif

/// budget: each path's server CPU per request as count × unit cost, summed, beside the CPU per request measured in
/// the same run, and the remainder the rows do not explain (`Benchmarks/README.md`, "The budget"). Each path runs on
/// a server of its own started with `KAKIN_SQLITE_STATEMENT_PROFILE`, so its unit costs of SQL statements are those
/// of the statements it really ran, on its own database, with their counts: the thread CPU of every statement by
/// text and connection (`SQLiteStatementProfile`), written when the server stops. Beside them: the HTTP edge (the
/// same server's CPU per `/healthz`), ES256 verifies (openssl's), body parses and event JSON (timed here), and the
/// server's CPU per thread over the run from `/proc/PID/task` (the writer's CPU less its statements: the writer's
/// "rest" of a profile).
enum BudgetBenchmark {
    static let profileVariable = "KAKIN_SQLITE_STATEMENT_PROFILE"
    /// Statement kinds run less often than this per request are summed in one row (startup, seeding, reads of the bench).
    static let statementsPerRequestMin = 0.01
    static let unitRepetitions = 20_000

    /// One path's run on a profiled server: its requests, the server's CPU over them and per thread, its statements.
    struct PathRun {
        var requests: Int
        var cpuSeconds: Double
        var threadSeconds: [String: Double]
        var healthz: Double
        var statements: [SQLiteStatementKey: SQLiteStatementTotals]
        var clockReadingNs: Int64
    }

    /// A row of a budget: `count` per request of a unit costing `seconds`.
    struct Row {
        var what: String
        var count: Double
        var seconds: Double
    }

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let verify = 1 / (try VerifyBenchmark.opensslVerifyPerSecond(workspace))
        let body = Array(JSONValue.object(["signedTransaction": .string(try workspace.appStore.consumableTransaction(
            id: "7000000000000000", pack: BenchAppStore.coinPacks[0], quantity: 1, appAccountToken: UUID().uuidString.lowercased(),
            nowMs: Int64(Date().timeIntervalSince1970 * 1000)))]).serialized())
        let parse = UnitsBenchmark.timedOnThisThread(unitRepetitions) { _ in _ = try? JSONParser.parse(body) }
        var result = BenchResult()

        var status = JSONValue.null
        let grants = try profiled(workspace, "grants", options) { server in
            let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/grants.lua")
            let run = try Wrk.run(url: "http://127.0.0.1:\(server.port)", seconds: options.loadSeconds + Wrk.drainSeconds,
                                  connections: options.connections, script: script,
                                  scriptArguments: ["\(options.loadSeconds)", "\(GrantsBenchmark.customers)", "budget"], workspace: workspace)
            return try run.count("created")
        } after: { server in
            status = (try? JSONParser.parse(try HTTPConnection(port: server.port).request("GET", "/v1/customers/bench-0").body)) ?? .null
        }
        let event = Event(id: "evt_0123456789abcdef", type: .coinsGranted, customerId: "bench-0", sequence: 2, createdAtMs: 1_764_000_000_000,
                          environment: nil, bundleId: nil, data: ["amount": 1, "reason": "bench", "customer": status])
        let eventJSON = UnitsBenchmark.timedOnThisThread(unitRepetitions) { _ in _ = event.payload }
        result.append(budget("grant", grants, [Row(what: "the event's JSON (Event.payload, the customer's status in it)", count: 1, seconds: eventJSON)]))

        let purchases = try profiled(workspace, "purchases", options, seed: { try $0.seedCustomers(PurchasesBenchmark.customers) }) { server, tokens in
            let pool = try PurchasesBenchmark.writePool(workspace, tokens: tokens, count: min(PurchasesBenchmark.poolMax, PurchasesBenchmark.poolPerSecond * options.loadSeconds),
                                                        repetition: 0, files: Wrk.threadCount(connections: options.connections))
            defer { pool.remove() }
            return try server.measuringCPU { try server.send(pool, expectedStatus: 201, options, workspace).ok }
        }
        result.append(budget("purchase", purchases, [
            Row(what: "ES256 verify of the signed transaction (openssl speed; the chain is cached)", count: 1, seconds: verify),
            Row(what: "parsing its \(String(format: "%.1f", Double(body.count) / 1000)) KB body (JSONParser)", count: 1, seconds: parse),
            Row(what: "the event's JSON (as a grant's)", count: 1, seconds: eventJSON),
        ]))

        let notifications = try profiled(workspace, "notifications", options, seed: { try $0.seedCustomers(NotificationsBenchmark.customers) }) { server, tokens in
            let pool = try NotificationsBenchmark.writePool(workspace, count: min(NotificationsBenchmark.poolMax, NotificationsBenchmark.poolPerSecond * options.loadSeconds),
                                                            files: Wrk.threadCount(connections: options.connections), name: "budget-notifications",
                                                            firstId: NotificationsBenchmark.firstTransactionId, tokens: tokens)
            defer { pool.remove() }
            return try server.measuringCPU {
                let before = try server.counter(NotificationsBenchmark.appliedName)
                let run = try server.send(pool, expectedStatus: 200, options, workspace)
                _ = try NotificationsBenchmark.waitUntilApplied(server, count: before + run.ok)
                return run.ok
            }
        }
        result.append(budget("notification, ingested and applied", notifications, [
            Row(what: "ES256 verifies: the notification's and its transaction's (openssl speed)", count: 2, seconds: verify),
            Row(what: "parsing a body of the purchase's size (JSONParser)", count: 1, seconds: parse),
            Row(what: "the event's JSON (as a grant's)", count: 1, seconds: eventJSON),
        ]))

        // The goal's status read: the history figure's first-month customers, 3 subscriptions each.
        let reads = try profiled(workspace, "status", options, products: BenchAppStore.productsWithSubscriptionsJSON, seed: {
            try StatusHistoryBenchmark.seed(workspace, port: $0.port, first: 0, months: 1, ledgerEntries: 0)
        }) { server, _ in
            let measured = try server.customerReads("", ["\(StatusHistoryBenchmark.customers)", "", "0"], options, workspace)
            return (measured.run.requests, measured.cpuPerRequest * Double(measured.run.requests))
        }
        result.append(budget("status read (3 subscriptions in their first month)", reads, try statusUnits(workspace.file("budget-status.db"))))
        result.append(budget("webhook delivery (replayed grants' events)", try deliveries(workspace, options), [], edge: false))
        return result
    }

    /// Grants for `--seconds` on a server with one webhook to `kakin events listen`, their events delivered; then, on
    /// a profiled server, all of them replayed and delivered again: CPU per delivery.
    static func deliveries(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> PathRun {
        setenv(EventsBenchmark.secretVariable, EventsBenchmark.secret, 1)
        let listener = try EventsBenchmark.Listener(workspace)
        defer { _ = listener.stop() }
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/grants.lua")
        return try profiled(workspace, "deliveries", options, webhookURL: listener.url, seed: { server -> Int64 in
            let sinceMs = Int64(Date().timeIntervalSince1970 * 1000) - 1
            _ = try Wrk.run(url: "http://127.0.0.1:\(server.port)", seconds: options.loadSeconds + Wrk.drainSeconds, connections: options.connections,
                            script: script, scriptArguments: ["\(options.loadSeconds)", "\(GrantsBenchmark.customers)", "budget"], workspace: workspace)
            guard try EventsBenchmark.waitUntilDelivered(server) != nil else { throw SubprocessFailure(description: "budget: the grants' events were never delivered") }
            return sinceMs
        }) { server, sinceMs in
            try server.measuringCPU { () throws -> Int in
                let answer = try HTTPConnection(port: server.port).request(
                    "POST", "/v1/admin/webhooks/\(EventsBenchmark.endpoint)/replay", json: ["since": .string(Timestamp.rfc3339(sinceMs))])
                guard answer.status == 202, let queued = answer.json["queued"]?.intValue, try EventsBenchmark.waitUntilNoneWaiting(server) != nil else {
                    throw SubprocessFailure(description: "budget: the replay answered \(answer.status) or was not delivered")
                }
                return queued
            }
        }
    }

    /// A status read's own work besides its statement, timed here on a customer's status inputs as the server read them
    /// (from its database, once it stopped): each stored row's fields decoded, the status engine, the answer written.
    static func statusUnits(_ database: URL) throws -> [Row] {
        let catalog = try Catalog(contractJSON: BenchAppStore.productsWithSubscriptionsJSON)
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        let snapshot = try blocking { () async throws -> CustomerSnapshot? in
            let store = KakinStore(database: try SQLiteDatabase(path: database.path), ids: MetricsBenchmark.BenchIDs(),
                                   clock: MetricsBenchmark.FixedClock(ms: nowMs))
            return try await store.customerStatusInputs("bench-0")
        }
        guard let snapshot, !snapshot.history.transactions.isEmpty, !snapshot.history.renewalInfos.isEmpty else {
            throw SubprocessFailure(description: "budget: bench-0 has no stored subscriptions in \(database.path)")
        }
        let transactions = snapshot.history.transactions.map(StoredStatusFields.json(of:))
        let renewalInfos = snapshot.history.renewalInfos.map(StoredStatusFields.json(of:))
        let decodeTransaction = UnitsBenchmark.timedOnThisThread(unitRepetitions) { n in
            _ = StoredStatusFields.transaction(transactions[n % transactions.count])
        }
        let decodeRenewalInfo = UnitsBenchmark.timedOnThisThread(unitRepetitions) { n in
            _ = StoredStatusFields.renewalInfo(renewalInfos[n % renewalInfos.count])
        }
        let engine = UnitsBenchmark.timedOnThisThread(unitRepetitions) { _ in
            _ = StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: nowMs)
        }
        let status = StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: nowMs)
        func answer() -> [UInt8] {
            status.answerJSON(customerId: snapshot.customer.customerId, appAccountToken: snapshot.customer.appAccountToken,
                              wallet: snapshot.wallet, version: snapshot.version, consentRescindedAtMs: snapshot.customer.consentRescindedAtMs)
        }
        let written = UnitsBenchmark.timedOnThisThread(unitRepetitions) { _ in _ = answer() }
        let average = { (rows: [String]) in rows.map(\.utf8.count).reduce(0, +) / rows.count }
        return [
            Row(what: "decoding a stored transaction's status fields (StoredStatusFields, \(average(transactions)) bytes)",
                count: Double(transactions.count), seconds: decodeTransaction),
            Row(what: "decoding a stored renewal info's status fields (\(average(renewalInfos)) bytes)", count: Double(renewalInfos.count),
                seconds: decodeRenewalInfo),
            Row(what: "the status engine (StatusEngine.evaluate of those, \(status.subscriptions.count) subscriptions)", count: 1, seconds: engine),
            Row(what: "writing the answer (CustomerStatus.answerJSON, \(answer().count) bytes)", count: 1, seconds: written),
        ]
    }

    // MARK: Running a path

    /// `load` on a server started with the statement profile (after `/healthz` for the edge's unit), measuring its
    /// CPU and its threads'; then `after`, and the server stopped so that the profile is written.
    static func profiled(_ workspace: BenchWorkspace, _ name: String, _ options: BenchOptions,
                         load: (KakinServerProcess) throws -> Int, after: (KakinServerProcess) throws -> Void = { _ in }) throws -> PathRun {
        try profiled(workspace, name, options, seed: { _ in () }) { server, _ in
            let (requests, cpuSeconds) = try server.measuringCPU { try load(server) }
            return (requests, cpuSeconds)
        } after: { try after($0) }
    }

    /// The same, after `seed` ran on a server of its own (not profiled) on the same database.
    static func profiled<Seed>(_ workspace: BenchWorkspace, _ name: String, _ options: BenchOptions, webhookURL: String? = nil,
                               products: JSONValue = BenchAppStore.productsJSON, seed: (KakinServerProcess) throws -> Seed,
                               load: (KakinServerProcess, Seed) throws -> (Int, Double),
                               after: (KakinServerProcess) throws -> Void = { _ in }) throws -> PathRun {
        let (config, _) = try EventsBenchmark.writeConfig(workspace, "budget-\(name)", webhookURL: webhookURL, products: products)
        let seeder = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("budget-\(name)-seed.log"))
        let seeded: Seed
        do {
            seeded = try seed(seeder)
            try seeder.stop()
        } catch {
            seeder.kill()
            throw error
        }
        let profile = workspace.file("budget-\(name)-statements.tsv")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("budget-\(name).log"),
                                                  environment: [profileVariable: profile.path])
        let run: PathRun
        do {
            let healthz = try server.customerReads("/healthz", nil, options, workspace).cpuPerRequest
            let threadsBefore = try server.threadCPUSeconds()
            let (requests, cpuSeconds) = try load(server, seeded)
            let threadsAfter = try server.threadCPUSeconds()
            try after(server)
            try server.stop()
            let statements = SQLiteStatementTotals.read(file: profile.path)
            var threadSeconds: [String: Double] = [:]
            for (thread, after) in threadsAfter {
                let group = statements.threads[thread].map { "sql-\($0)" } ?? after.group
                threadSeconds[group, default: 0] += after.seconds - (threadsBefore[thread]?.seconds ?? 0)
            }
            run = PathRun(requests: requests, cpuSeconds: cpuSeconds, threadSeconds: threadSeconds, healthz: healthz,
                          statements: statements.statements, clockReadingNs: statements.clockReadingNs)
        } catch {
            server.kill()
            throw error
        }
        guard !run.statements.isEmpty else { throw SubprocessFailure(description: "budget: \(workspace.kakin.path) wrote no statement profile (\(profileVariable))") }
        return run
    }

    // MARK: The budget

    /// The path's rows (the HTTP edge, `units`, then every statement kind by CPU per request), their sum beside the
    /// measured CPU, and the CPU by thread.
    static func budget(_ path: String, _ run: PathRun, _ units: [Row], edge: Bool = true) -> BenchResult {
        let n = Double(max(1, run.requests))
        let measured = run.cpuSeconds / n
        var rows = (edge ? [Row(what: "HTTP edge: a /healthz round trip (this server's CPU per /healthz)", count: 1, seconds: run.healthz)] : []) + units
        var kinds: [SQLiteStatementKey: SQLiteStatementTotals] = [:]
        for (key, totals) in run.statements {
            kinds[SQLiteStatementKey(connection: key.connection, sql: normalised(key.sql)), default: SQLiteStatementTotals()].add(totals)
        }
        func cpu(_ t: SQLiteStatementTotals) -> Double { Double(max(0, t.cpuNs - t.runs * run.clockReadingNs)) / 1e9 }
        let frequent = kinds.filter { Double($0.value.runs) / n >= statementsPerRequestMin }
        let rare = kinds.filter { Double($0.value.runs) / n < statementsPerRequestMin }.values
        let statementRows = frequent.sorted { cpu($0.value) > cpu($1.value) }.map { key, totals in
            Row(what: "\(key.connection): \(shortened(key.sql))", count: Double(totals.runs) / n, seconds: cpu(totals) / Double(totals.runs))
        }
        rows += statementRows
        let rareCPU = rare.map(cpu).reduce(0, +), rareRuns = rare.map(\.runs).reduce(0, +)
        if rareRuns > 0 {
            rows.append(Row(what: "\(rare.count) statement kinds under \(statementsPerRequestMin) per request each (background work, startup, the bench's own reads)",
                            count: Double(rareRuns) / n, seconds: rareCPU / Double(rareRuns)))
        }
        let explained = rows.map { $0.count * $0.seconds }.reduce(0, +)
        var lines = ["     count ×   unit µs =  µs/req  share of measured"]
        for row in rows {
            lines.append(String(format: "%10.2f × %9.2f = %7.1f  %5.1f %%  %@", row.count, row.seconds * 1e6, row.count * row.seconds * 1e6,
                                row.count * row.seconds / measured * 100, row.what))
        }
        let statementsPerRequest = statementRows.map(\.count).reduce(0, +)
        let statementCPU = statementRows.map { $0.count * $0.seconds }.reduce(0, +)
        lines.append(String(format: "statements: %.2f per request of the kinds above, %.1f µs of CPU (%.1f %% of measured)",
                            statementsPerRequest, statementCPU * 1e6, statementCPU / measured * 100))
        lines.append(String(format: "sum of the rows %.1f µs; measured server CPU per request %.1f µs (same run, profile on, %@ requests); "
                                + "not explained %.1f µs (%.1f %%)", explained * 1e6, measured * 1e6, BenchResult.grouped(run.requests),
                            (measured - explained) * 1e6, (measured - explained) / measured * 100))
        let allRuns = Double(kinds.values.map(\.runs).reduce(0, +)) / n
        lines.append(String(format: "the profile's cost: %.0f ns of clock readings per statement (subtracted from each unit above), about twice that "
                                + "added to the measured CPU by the readings outside the statement: ≈ %.1f µs per request for %.2f statements",
                            Double(run.clockReadingNs), 2 * Double(run.clockReadingNs) * allRuns / 1e3, allRuns))
        let writerStatements = frequent.filter { $0.key.connection == "writer" }.values.map(cpu).reduce(0, +) / n
        let writer = (run.threadSeconds["sql-writer"] ?? 0) / n
        lines.append(String(format: "server CPU by thread per request: sql-writer %.1f µs (its statements %.1f, the rest %.1f: plans, binding, rows, "
                                + "JSON, resuming callers)", writer * 1e6, writerStatements * 1e6, (writer - writerStatements) * 1e6))
        let threads = run.threadSeconds.filter { $0.key != "sql-writer" && $0.value > 0 }.sorted { $0.value > $1.value }
        lines.append("  " + threads.map { String(format: "%@ %.1f µs", threadNames[$0.key] ?? $0.key, $0.value / n * 1e6) }.joined(separator: ", ")
                     + String(format: " (threads' sum %.1f µs; /proc ticks of 10 ms)", run.threadSeconds.values.reduce(0, +) / n * 1e6))
        var result = BenchResult()
        result.figures.append(Figure(
            name: "budget: \(path), per server CPU-second (measured)", value: 1 / measured,
            baselineName: "by the budget (1 / sum of count × unit)", baselineValue: 1 / explained, goal: nil,
            details: [String(format: "the budget explains %.0f %% of the %.1f µs measured", explained / measured * 100, measured * 1e6)]))
        result.sections.append((title: "budget: \(path), server CPU per request as count × unit cost", lines: lines))
        return result
    }

    /// Thread names (`/proc`'s, 15 characters at most) as the budget prints them.
    static let threadNames = ["MHD-worker": "libmicrohttpd's workers (HTTP edge)", "oot.default-qos": "Swift tasks (com.apple.root.default-qos)",
                              "-qos.overcommit": "Dispatch overcommit threads", "kakin": "the main thread", "sql-reader": "sql-readers",
                              "sql-checkpointer": "sql-checkpoint"]

    /// Multi-row VALUES and IN lists of any length as one kind: "(?, ?), (?, ?)" → "(?, ?), …".
    static func normalised(_ sql: String) -> String {
        var text = sql
        for (pattern, template) in [(#"(\((?:\?|\?\d+)(?:, ?(?:\?|\?\d+|[^()?,]+))*\))(?:, ?\((?:\?|\?\d+)(?:, ?(?:\?|\?\d+|[^()?,]+))*\))+"#, "$1, …"),
                                    (#"IN \((\?\d*)(?:, ?\?\d*)+\)"#, "IN ($1, …)")] {
            text = text.replacingOccurrences(of: pattern, with: template, options: .regularExpression)
        }
        return text
    }

    static func shortened(_ sql: String) -> String { sql.count <= 110 ? sql : String(sql.prefix(107)) + "…" }
}

extension KakinServerProcess {
    /// Each thread's user + system CPU so far (`/proc/PID/task/TID/stat`), with its name less a trailing number
    /// (`MHD-worker-1` → `MHD-worker`): the group it is summed in, unless the statement profile names its connection.
    func threadCPUSeconds() throws -> [Int: (group: String, seconds: Double)] {
        let tasks = "/proc/\(process.processIdentifier)/task"
        var threads: [Int: (group: String, seconds: Double)] = [:]
        for tid in try FileManager.default.contentsOfDirectory(atPath: tasks) {
            guard let id = Int(tid), let stat = try? String(contentsOfFile: "\(tasks)/\(tid)/stat", encoding: .utf8),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { continue }
            var name = String(stat[stat.index(after: open)..<close])
            while let last = name.last, last.isNumber || last == "-" || last == "_" { name.removeLast() }
            threads[id] = (name.isEmpty ? "unnamed" : name, (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
        }
        return threads
    }
}
