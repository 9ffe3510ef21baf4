import Foundation
import KakinCore
import KakinPostgreSQL

/// postgres: the figures of `grants`, `reads` and `notifications` on PostgreSQL with 1 and with 2
/// `kakin serve` processes on one database (wrk split between them, as a load balancer would), each beside
/// a baseline from the same run — durable single-row commits on the same server (`synchronous_commit=on`),
/// or the 1-process figure — and after the same figures on SQLite, so both engines sit in one table. Beside
/// them PostgreSQL's unit costs (`UnitsBenchmark.postgres`), the statements and round trips per request, the
/// server's own CPU per request (from `/proc`, when it runs on this machine), and the scale-out projection.
enum PostgresBenchmark {
    static let processCounts = [1, 2]

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        guard let cluster = options.postgresURL else { throw UsageError(description: "postgres needs --postgres URL") }
        var result = BenchResult()
        result.append(try GrantsBenchmark.run(workspace, options))
        result.append(try ReadsBenchmark.run(workspace, options))
        result.append(try NotificationsBenchmark.run(workspace, options))
        let baselineURL = try workspace.postgresSchema("single_row_commits", cluster: cluster)
        let baseline = { try PostgresDatabase.measureSingleRowDurableCommits(url: baselineURL, seconds: Double(options.loadSeconds)) }
        let server = try PostgresServerCPU.locate(url: cluster)
        result.append(try UnitsBenchmark.postgres(workspace, options, cluster: cluster, server: server))
        var projections: [ScaleOutProjection] = []
        for processes in processCounts {
            let (figures, projection) = try grants(workspace, options, cluster: cluster, processes: processes, baseline: baseline, server: server)
            result.append(figures)
            if processes == 1, let projection { projections.append(projection) }
        }
        let (readFigures, readProjection) = try reads(workspace, options, cluster: cluster, server: server)
        result.append(readFigures)
        if let readProjection { projections.append(readProjection) }
        for processes in processCounts {
            let (figures, projection) = try notifications(workspace, options, cluster: cluster, processes: processes, baseline: baseline, server: server)
            result.append(figures)
            if processes == 1, let projection { projections.append(projection) }
        }
        result.sections.append((
            "Scale-out projection (N Kakin boxes in front of one PostgreSQL box, each with this machine's cores; docs/operations.md)",
            server == nil ? ["PostgreSQL's CPU could not be read (the server is not on this machine): no projection"]
                : projections.flatMap { $0.lines() }))
        return result
    }

    static let baselineName = "durable single-row commits (PostgreSQL, same server)"

    static func label(_ processes: Int) -> String { processes == 1 ? "1 process" : "\(processes) processes" }

    // MARK: Grants

    static func grants(_ workspace: BenchWorkspace, _ options: BenchOptions, cluster: String, processes: Int,
                       baseline: () throws -> Double, server: PostgresServerCPU?) throws -> (BenchResult, ScaleOutProjection?) {
        let name = "pg-grants-\(processes)"
        let database = try workspace.postgresSchema(name, cluster: cluster)
        let group = try KakinServerGroup.start(processes, workspace: workspace, config: try workspace.writeConfig(name, database: database), name: name)
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/grants.lua")
        var rates: [Double] = [], baselines: [Double] = [], runs: [[Wrk.Run]] = [], cpuPerGrant: [Double] = [], postgresCPUPerGrant: [Double] = []
        var engine: [String: Double] = [:]
        var work: [DatabaseWork] = []
        do {
            for repetition in 0..<options.repetitions {
                baselines.append(try baseline())
                let postgresBefore = try server?.cpuSeconds
                let workBefore = try group.databaseWork()
                let (together, cpuSeconds) = try group.measuringCPU {
                    try Wrk.runTogether(urls: group.urls, seconds: options.loadSeconds + Wrk.drainSeconds, connections: options.connections, script: script,
                                        scriptArguments: { ["\(options.loadSeconds)", "\(GrantsBenchmark.customers)", "run\(repetition)-p\($0)", "\($0 * 16)"] },
                                        workspace: workspace)
                }
                let created = try together.map { try $0.count("created") }.reduce(0, +)
                if let postgresBefore, let after = try server?.cpuSeconds { postgresCPUPerGrant.append((after - postgresBefore) / Double(max(1, created))) }
                work.append(try group.databaseWork() - workBefore)
                rates.append(Double(created) / Double(options.loadSeconds))
                cpuPerGrant.append(cpuSeconds / Double(max(1, created)))
                runs.append(together)
            }
            engine = try group.databaseCounters()
            try group.stop()
        } catch {
            group.kill()
            throw error
        }
        var result = BenchResult()
        let all = runs.flatMap { $0 }
        result.figures.append(Figure(
            name: "durable grants over HTTP, PostgreSQL, \(label(processes))", value: median(rates),
            baselineName: baselineName, baselineValue: median(baselines), goal: 3,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms (medians of the wrk runs)", median(all.map(\.latencyP50Ms)), median(all.map(\.latencyP99Ms))),
                "grants: \(BenchResult.rates(rates)); single-row commits: \(BenchResult.rates(baselines))",
                String(format: "kakin serve CPU per grant: %.0f µs (all processes)", median(cpuPerGrant) * 1e6)
                    + (postgresCPUPerGrant.isEmpty ? "" : String(format: "; PostgreSQL's: %.0f µs (its processes, from /proc)", median(postgresCPUPerGrant) * 1e6)),
                work.total.perRequest(all.map { (try? $0.count("created")) ?? 0 }.reduce(0, +), "grant"),
                engine.databaseSummary,
                "\(options.connections) connections split over \(label(processes)); \(options.loadSeconds) s of load per run over "
                    + "\(BenchResult.grouped(GrantsBenchmark.customers)) customers, then \(Wrk.drainSeconds) s for the last answers",
            ]))
        let answered = try all.map { try $0.count("created") }.reduce(0, +)
        let other = try all.map { try $0.count("other") }.reduce(0, +)
        let non2xx = all.map(\.non2xx).reduce(0, +), socketErrors = all.map(\.socketErrors).reduce(0, +)
        let report = try workspace.ledgerCheck(databaseArgument: database)
        let entries = report["entries"]?.intValue ?? -1
        result.check("PostgreSQL grants, \(label(processes)): \(non2xx) non-2xx, \(other) answers other than 201, \(socketErrors) socket errors",
                     non2xx == 0 && other == 0 && socketErrors == 0)
        result.check("PostgreSQL grants, \(label(processes)): ledger entries \(BenchResult.grouped(entries)) = 201 answers \(BenchResult.grouped(answered))",
                     entries == answered)
        result.check("PostgreSQL grants, \(label(processes)): kakin ledger check", report["ok"] == true)
        let total = work.total
        let projection = postgresCPUPerGrant.isEmpty ? nil : ScaleOutProjection(
            path: "durable grants", kakinCPUPerRequest: median(cpuPerGrant), postgresCPUPerRequest: median(postgresCPUPerGrant),
            writesPerCommit: total.commits > 0 ? total.bodies / total.commits : nil, singleRowCommitsPerSecond: median(baselines))
        return (result, projection)
    }

    // MARK: Reads

    static func reads(_ workspace: BenchWorkspace, _ options: BenchOptions, cluster: String, server: PostgresServerCPU?) throws -> (BenchResult, ScaleOutProjection?) {
        let database = try workspace.postgresSchema("pg-reads", cluster: cluster)
        let group = try KakinServerGroup.start(2, workspace: workspace, config: try workspace.writeConfig("pg-reads", database: database), name: "pg-reads")
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/customer-reads.lua")
        var healthz: [Wrk.Run] = [], one: [Wrk.Run] = [], two: [[Wrk.Run]] = []
        var kakinCPU: [Double] = [], postgresCPU: [Double] = [], work: [DatabaseWork] = [], workTwo: [DatabaseWork] = []
        do {
            try ReadsBenchmark.seedCustomers(port: group.servers[0].port)
            for _ in 0..<options.repetitions {
                healthz.append(try Wrk.run(url: group.urls[0] + "/healthz", seconds: options.loadSeconds, connections: options.connections,
                                           script: nil, workspace: workspace))
                let postgresBefore = try server?.cpuSeconds
                let workBefore = try group.databaseWork()
                let (run, cpuSeconds) = try group.measuringCPU {
                    try Wrk.run(url: group.urls[0], seconds: options.loadSeconds, connections: options.connections, script: script,
                                scriptArguments: ["\(ReadsBenchmark.customers)"], workspace: workspace)
                }
                one.append(run)
                kakinCPU.append(cpuSeconds / Double(max(1, run.requests)))
                if let postgresBefore, let after = try server?.cpuSeconds { postgresCPU.append((after - postgresBefore) / Double(max(1, run.requests))) }
                work.append(try group.databaseWork() - workBefore)
                let workTogetherBefore = try group.databaseWork()
                two.append(try Wrk.runTogether(urls: group.urls, seconds: options.loadSeconds, connections: options.connections, script: script,
                                               scriptArguments: { _ in ["\(ReadsBenchmark.customers)"] }, workspace: workspace))
                workTwo.append(try group.databaseWork() - workTogetherBefore)
            }
            try group.stop()
        } catch {
            group.kill()
            throw error
        }
        let oneRates = one.map(\.requestsPerSecond), twoRates = two.map { $0.map(\.requestsPerSecond).reduce(0, +) }
        var result = BenchResult()
        result.figures.append(Figure(
            name: "status reads over HTTP, PostgreSQL, 1 process", value: median(oneRates),
            baselineName: "GET /healthz (1 process)", baselineValue: median(healthz.map(\.requestsPerSecond)), goal: nil,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms", median(one.map(\.latencyP50Ms)), median(one.map(\.latencyP99Ms))),
                "runs: \(BenchResult.rates(oneRates)); healthz: \(BenchResult.rates(healthz.map(\.requestsPerSecond)))",
                String(format: "kakin serve CPU per status read: %.0f µs", median(kakinCPU) * 1e6)
                    + (postgresCPU.isEmpty ? "" : String(format: "; PostgreSQL's: %.0f µs", median(postgresCPU) * 1e6)),
                work.total.perRequest(one.map(\.requests).reduce(0, +), "status read"),
            ]))
        result.figures.append(Figure(
            name: "status reads over HTTP, PostgreSQL, 2 processes", value: median(twoRates),
            baselineName: "status reads, PostgreSQL, 1 process", baselineValue: median(oneRates), goal: 1.5,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms", median(two.flatMap { $0 }.map(\.latencyP50Ms)), median(two.flatMap { $0 }.map(\.latencyP99Ms))),
                "runs: \(BenchResult.rates(twoRates)); 1 process: \(BenchResult.rates(oneRates))",
                workTwo.total.perRequest(two.flatMap { $0 }.map(\.requests).reduce(0, +), "status read"),
                "\(options.connections) connections split over the 2 processes; both run during the 1-process runs too (one idles)",
            ]))
        let all = healthz + one + two.flatMap { $0 }
        let non2xx = all.map(\.non2xx).reduce(0, +), socketErrors = all.map(\.socketErrors).reduce(0, +)
        result.check("PostgreSQL reads: \(non2xx) non-2xx answers and \(socketErrors) socket errors", non2xx == 0 && socketErrors == 0)
        let projection = postgresCPU.isEmpty ? nil : ScaleOutProjection(path: "status reads", kakinCPUPerRequest: median(kakinCPU),
                                                                        postgresCPUPerRequest: median(postgresCPU))
        return (result, projection)
    }

    // MARK: Notifications

    static func notifications(_ workspace: BenchWorkspace, _ options: BenchOptions, cluster: String, processes: Int,
                              baseline: () throws -> Double, server: PostgresServerCPU?) throws -> (BenchResult, ScaleOutProjection?) {
        let threadsEach = max(1, Wrk.threadCount(connections: options.connections) / processes)
        let poolEach = min(NotificationsBenchmark.poolMax, NotificationsBenchmark.poolPerSecond * options.loadSeconds) / processes
        let pools = try (0..<processes).map {
            try NotificationsBenchmark.writePool(workspace, count: poolEach, files: threadsEach, name: "pg-notifications-\(processes)-\($0)",
                                                 firstId: 4_000_000_000_000_000 + $0 * 100_000_000)
        }
        let script = RequestPool.script(workspace)
        var result = BenchResult()
        var rates: [Double] = [], baselines: [Double] = [], runs: [Wrk.Run] = [], cpuPer: [Double] = [], postgresCPUPer: [Double] = []
        var engine: [String: Double] = [:]
        var work: [DatabaseWork] = [], answered = 0
        for repetition in 0..<options.repetitions {
            baselines.append(try baseline())
            let name = "pg-notifications-\(processes)-\(repetition)"
            let database = try workspace.postgresSchema(name, cluster: cluster)
            let group = try KakinServerGroup.start(processes, workspace: workspace, config: try workspace.writeConfig(name, database: database), name: name)
            do {
                let postgresBefore = try server?.cpuSeconds
                let workBefore = try group.databaseWork()
                let (together, cpuSeconds) = try group.measuringCPU {
                    try Wrk.runTogether(urls: group.urls, seconds: options.loadSeconds + Wrk.drainSeconds, connections: options.connections, script: script,
                                        scriptArguments: { pools[$0].scriptArguments(loadSeconds: options.loadSeconds, expectedStatus: 200) },
                                        workspace: workspace)
                }
                let postgresAfter = try server?.cpuSeconds
                work.append(try group.databaseWork() - workBefore)
                let stored = try group.servers.map { try NotificationsBenchmark.counter("kakin_notifications_received_total", port: $0.port) }.reduce(0, +)
                engine = try group.databaseCounters()
                try group.stop()
                let ok = try together.map { try $0.count("ok") }.reduce(0, +), other = try together.map { try $0.count("other") }.reduce(0, +)
                let loadMs = try together.map { try $0.count("loadms") }.max() ?? 1
                rates.append(Double(ok) / (Double(max(1, loadMs)) / 1000))
                cpuPer.append(cpuSeconds / Double(max(1, ok)))
                if let postgresBefore, let postgresAfter { postgresCPUPer.append((postgresAfter - postgresBefore) / Double(max(1, ok))) }
                answered += ok
                runs += together
                let socketErrors = together.map(\.socketErrors).reduce(0, +)
                result.check("PostgreSQL notifications, \(label(processes)), run \(repetition + 1): \(BenchResult.grouped(ok)) answered 200 = "
                             + "\(BenchResult.grouped(stored)) stored as new, \(other) other answers, \(socketErrors) socket errors",
                             ok == stored && other == 0 && socketErrors == 0)
            } catch {
                group.kill()
                throw error
            }
        }
        result.figures.append(Figure(
            name: "notifications ingested over HTTP, PostgreSQL, \(label(processes))", value: median(rates),
            baselineName: baselineName, baselineValue: median(baselines), goal: nil,
            details: [
                String(format: "latency p50 %.2f ms, p99 %.2f ms", median(runs.map(\.latencyP50Ms)), median(runs.map(\.latencyP99Ms))),
                "notifications: \(BenchResult.rates(rates)); single-row commits: \(BenchResult.rates(baselines))",
                String(format: "kakin serve CPU per notification: %.0f µs (all processes; ingesting, and processing as far as it got)", median(cpuPer) * 1e6)
                    + (postgresCPUPer.isEmpty ? "" : String(format: "; PostgreSQL's: %.0f µs (its processes, from /proc)", median(postgresCPUPer) * 1e6)),
                work.total.perRequest(answered, "notification (ingested, and processed as far as it got)"),
                engine.databaseSummary,
                "\(BenchResult.grouped(poolEach * processes)) pre-signed notifications per run (a fresh schema each), split over \(label(processes))",
            ]))
        let total = work.total
        let projection = postgresCPUPer.isEmpty ? nil : ScaleOutProjection(
            path: "notifications (ingested, and processed as far as they got)", kakinCPUPerRequest: median(cpuPer), postgresCPUPerRequest: median(postgresCPUPer),
            writesPerCommit: total.commits > 0 ? total.bodies / total.commits : nil, singleRowCommitsPerSecond: median(baselines))
        return (result, projection)
    }
}

/// Several `kakin serve` processes on one config (one database), each on its own ephemeral port.
final class KakinServerGroup {
    let servers: [KakinServerProcess]

    private init(servers: [KakinServerProcess]) { self.servers = servers }

    static func start(_ count: Int, workspace: BenchWorkspace, config: URL, name: String) throws -> KakinServerGroup {
        var started: [KakinServerProcess] = []
        do {
            for index in 0..<count {
                started.append(try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("\(name)-\(index).log")))
            }
        } catch {
            for server in started { server.kill() }
            throw error
        }
        return KakinServerGroup(servers: started)
    }

    var urls: [String] { servers.map { "http://127.0.0.1:\($0.port)" } }

    /// `body`'s result and the CPU time all the servers used while it ran.
    func measuringCPU<T>(_ body: () throws -> T) throws -> (result: T, cpuSeconds: Double) {
        let before = try servers.map { try $0.cpuSeconds }.reduce(0, +)
        let result = try body()
        return (result, try servers.map { try $0.cpuSeconds }.reduce(0, +) - before)
    }

    /// The unlabelled `kakin_db_*` lines of every server's `/metrics`, summed.
    func databaseCounters() throws -> [String: Double] {
        var sums: [String: Double] = [:]
        for server in servers {
            let text = String(decoding: try HTTPConnection(port: server.port).request("GET", "/metrics").body, as: UTF8.self)
            for line in text.split(separator: "\n") where line.hasPrefix("kakin_db_") {
                let parts = line.split(separator: " ")
                if parts.count == 2, let value = Double(parts[1]) { sums[String(parts[0]), default: 0] += value }
            }
        }
        return sums
    }

    func stop() throws {
        for server in servers { try server.stop() }
    }

    func kill() {
        for server in servers { server.kill() }
    }
}

extension [String: Double] {
    /// "PostgreSQL: 1,234 commits, 18.2 writes per commit, 12 serialization re-runs, 0 reconnects" from `databaseCounters`.
    var databaseSummary: String {
        let commits = self["kakin_db_commit_batch_size_count"] ?? 0, retries = Int(self["kakin_db_serialization_retries_total"] ?? 0)
        return String(format: "engine (last run, all processes): %@ commits, %.1f writes per commit, %@ serialization re-runs, %d reconnects",
                      BenchResult.grouped(Int(commits)), (self["kakin_db_commit_batch_size_sum"] ?? 0) / Swift.max(1, commits), BenchResult.grouped(retries),
                      Int(self["kakin_db_reconnects_total"] ?? 0))
    }
}
