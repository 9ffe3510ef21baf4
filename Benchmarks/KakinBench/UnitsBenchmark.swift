import Foundation
import KakinCore
import KakinEvents
import KakinPostgreSQL
import KakinSQLite
import KakinStorage

#if canImport(Glibc)
    import Glibc
#endif

/// units: the unit costs a path's budget multiplies its counts by (`Benchmarks/README.md`, "The budget"), each per
/// CPU-second beside `GET /healthz` per server CPU-second of a server started for it: a prepared single-row INSERT and
/// UPDATE inside a write on SQLite (the writer thread's CPU), parsing a purchase's 3.7 KB body, one event's JSON with a
/// customer's status in it, one ES256 verify (`openssl speed ecdsap256`). `postgres` adds the same statements on
/// PostgreSQL, one round trip each and sixteen to a round trip (`executeBatch`), with the server's CPU from `/proc`.
enum UnitsBenchmark {
    static let rowsPerBody = 20_000
    static let postgresStatements = 4_000
    static let postgresBatch = 16
    static let parses = 20_000
    static let events = 20_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (healthz, status) = try healthzAndStatus(workspace, options)
        var result = BenchResult()
        let database = try SQLiteDatabase(path: workspace.file("units.db").path)
        defer { try? blocking { await database.close() } }
        try createTable(database)
        var inserts: [Double] = [], updates: [Double] = []
        for repetition in 0..<options.repetitions {
            inserts.append(try statementCPUSeconds(database, insert: true, repetition: repetition))
            updates.append(try statementCPUSeconds(database, insert: false, repetition: repetition))
        }
        result.figures.append(unit("unit: SQLite prepared single-row INSERT in a write", perStatement: inserts, healthz: healthz,
                                   what: "writer thread CPU per INSERT (an indexed table, \(BenchResult.grouped(rowsPerBody)) in one write body)"))
        result.figures.append(unit("unit: SQLite prepared single-row UPDATE in a write", perStatement: updates, healthz: healthz,
                                   what: "writer thread CPU per UPDATE … WHERE id = ? (random rows, \(BenchResult.grouped(rowsPerBody)) in one write body)"))

        let commits = try (0..<options.repetitions).map { _ in
            let before = threadCPUSeconds()
            let seconds = 2.0
            let rate = try SQLiteDatabase.measureSingleRowDurableCommits(path: workspace.file("units-commits.db").path, seconds: seconds)
            return (threadCPUSeconds() - before) / (rate * seconds)
        }
        result.figures.append(unit("unit: SQLite durable commit of one row (WAL frames, fdatasync)", perStatement: commits, healthz: healthz,
                                   what: "CPU per one-row transaction with synchronous=FULL (its INSERT included; wall time is the disk's)"))
        let body = Array(JSONValue.object(["signedTransaction": .string(try workspace.appStore.consumableTransaction(
            id: "7000000000000000", pack: BenchAppStore.coinPacks[0], quantity: 1, appAccountToken: UUID().uuidString.lowercased(),
            nowMs: Int64(Date().timeIntervalSince1970 * 1000)))]).serialized())
        let parsed = (0..<options.repetitions).map { _ in
            timedOnThisThread(parses) { _ in _ = try? JSONParser.parse(body) }
        }
        result.figures.append(unit("unit: parsing a purchase's body (\(String(format: "%.1f", Double(body.count) / 1000)) KB of JSON)",
                                   perStatement: parsed, healthz: healthz, what: "CPU per parse (JSONParser, one thread)"))
        let event = Event(id: "evt_0123456789abcdef", type: .coinsGranted, customerId: "bench-0", sequence: 2, createdAtMs: 1_764_000_000_000,
                          environment: nil, bundleId: nil, data: ["amount": 1, "reason": "bench", "customer": status])
        let built = (0..<options.repetitions).map { _ in
            timedOnThisThread(events) { _ in _ = event.payload }
        }
        result.figures.append(unit("unit: one event's JSON (\(event.payload.utf8.count) bytes, the customer's status in it)",
                                   perStatement: built, healthz: healthz, what: "CPU per event serialized (Event.payload, one thread)"))
        let verifies = try (0..<options.repetitions).map { _ in 1 / (try VerifyBenchmark.opensslVerifyPerSecond(workspace)) }
        result.figures.append(unit("unit: one ES256 verify (openssl speed ecdsap256)", perStatement: verifies, healthz: healthz,
                                   what: "CPU per verify (openssl's own count)"))
        return result
    }

    /// PostgreSQL's statements, one round trip each and `postgresBatch` to a round trip, in a schema of their own.
    static func postgres(_ workspace: BenchWorkspace, _ options: BenchOptions, cluster: String, server: PostgresServerCPU?) throws -> BenchResult {
        let (healthz, _) = try healthzAndStatus(workspace, options)
        let url = try workspace.postgresSchema("units", cluster: cluster)
        let database = try PostgresDatabase(url: url, options: .init(writerConnections: 1, readerConnections: 1))
        defer { try? blocking { await database.close() } }
        try createTable(database)
        var result = BenchResult()
        for (name, sql) in [("INSERT", insertSQL), ("UPDATE", updateSQL)] {
            for batch in [1, postgresBatch] {
                var samples: [(client: Double, server: Double?, wall: Double)] = []
                for repetition in 0..<options.repetitions {
                    let serverBefore = try server?.cpuSeconds
                    let start = Date()
                    let client = try blocking {
                        try await database.write { db in
                            let before = threadCPUSeconds()
                            for offset in stride(from: 0, to: postgresStatements, by: batch) {
                                let statements = (offset..<(offset + batch)).map { SQLStatement(sql, parameters(for: $0 + repetition * postgresStatements, insert: name == "INSERT")) }
                                if batch == 1 { try db.execute(statements[0].sql, statements[0].parameters) } else { try db.executeBatch(statements) }
                            }
                            return threadCPUSeconds() - before
                        }
                    }
                    let wall = Date().timeIntervalSince(start)
                    let serverSeconds = try server.map { try $0.cpuSeconds - serverBefore! }
                    samples.append((client, serverSeconds, wall))
                }
                let n = Double(postgresStatements)
                let clientEach = median(samples.map(\.client)) / n, wallEach = median(samples.map(\.wall)) / n
                let serverEach = samples.allSatisfy { $0.server != nil } ? median(samples.map { $0.server! }) / n : nil
                let cpuEach = clientEach + (serverEach ?? 0)
                result.figures.append(Figure(
                    name: "unit: PostgreSQL prepared single-row \(name), " + (batch == 1 ? "one round trip each" : "\(batch) per round trip"),
                    value: 1 / cpuEach, baselineName: "GET /healthz per server CPU-second", baselineValue: 1 / healthz, goal: nil,
                    details: [
                        String(format: "per statement: %.1f µs of wall clock, %.1f µs of Kakin's thread CPU", wallEach * 1e6, clientEach * 1e6)
                            + (serverEach.map { String(format: ", %.1f µs of PostgreSQL's (its processes, from /proc)", $0 * 1e6) } ?? ", PostgreSQL's CPU not readable"),
                        "\(BenchResult.grouped(postgresStatements)) statements in one write body (one transaction), per CPU-second of both",
                    ]))
            }
        }
        return result
    }

    // MARK: Pieces

    static let insertSQL = "INSERT INTO unit_rows (customer_id, amount) VALUES (?, ?)"
    static let updateSQL = "UPDATE unit_rows SET amount = amount + ? WHERE id = ?"

    static func parameters(for n: Int, insert: Bool) -> [SQLValue] {
        insert ? [.text("bench-\(n % 1_000)"), .integer(1)] : [.integer(1), .integer(Int64(1 + (n &* 7_919) % rowsPerBody))]
    }

    /// `unit_rows` with an index on its customer (as the ledger's), and `rowsPerBody` rows for the updates.
    static func createTable(_ database: some SQLDatabase) throws {
        try blocking {
            try await database.write { db in
                let key = db.dialect == .postgresql ? "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" : "INTEGER PRIMARY KEY"
                try db.execute("CREATE TABLE IF NOT EXISTS unit_rows (id \(key), customer_id TEXT NOT NULL, amount BIGINT NOT NULL)", [])
                try db.execute("CREATE INDEX IF NOT EXISTS unit_rows_by_customer ON unit_rows(customer_id)", [])
                for n in 0..<rowsPerBody { try db.execute(insertSQL, parameters(for: n, insert: true)) }
            }
        }
    }

    /// The writer thread's CPU per statement over one body of `rowsPerBody` of them.
    static func statementCPUSeconds(_ database: SQLiteDatabase, insert: Bool, repetition: Int) throws -> Double {
        try blocking {
            try await database.write { db in
                let before = threadCPUSeconds()
                for n in 0..<rowsPerBody {
                    try db.execute(insert ? insertSQL : updateSQL, parameters(for: n + repetition * rowsPerBody, insert: insert))
                }
                return (threadCPUSeconds() - before) / Double(rowsPerBody)
            }
        }
    }

    /// CPU seconds per call of `body`, run `count` times on this thread.
    static func timedOnThisThread(_ count: Int, _ body: (Int) -> Void) -> Double {
        let before = threadCPUSeconds()
        for n in 0..<count { body(n) }
        return (threadCPUSeconds() - before) / Double(count)
    }

    /// A server for the baseline: `/healthz`'s CPU per request (wrk for `--seconds`), and one customer's status (granted
    /// coins once) for the event's JSON.
    static func healthzAndStatus(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> (healthz: Double, status: JSONValue) {
        let (config, _) = try workspace.writeConfig("units")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("units.log"))
        do {
            let connection = HTTPConnection(port: server.port)
            let granted = try connection.request("POST", "/v1/customers/bench-0/wallet/grants", json: ["amount": 100, "reason": "seed"],
                                                 headers: ["Idempotency-Key": "seed-0"])
            guard granted.status == 201, let status = try? JSONParser.parse(try connection.request("GET", "/v1/customers/bench-0").body) else {
                throw SubprocessFailure(description: "units: seeding a customer answered \(granted.status)")
            }
            let healthz = median(try (0..<options.repetitions).map { _ in try server.customerReads("/healthz", nil, options, workspace).cpuPerRequest })
            try server.stop()
            return (healthz, status)
        } catch {
            server.kill()
            throw error
        }
    }

    static func unit(_ name: String, perStatement: [Double], healthz: Double, what: String) -> Figure {
        Figure(name: name, value: 1 / median(perStatement), baselineName: "GET /healthz per server CPU-second", baselineValue: 1 / healthz, goal: nil,
               details: [String(format: "%@: %.2f µs (runs: %@); a /healthz: %.1f µs of server CPU", what, median(perStatement) * 1e6,
                                perStatement.map { String(format: "%.2f", $0 * 1e6) }.joined(separator: ", "), healthz * 1e6)])
    }
}

/// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
func threadCPUSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
