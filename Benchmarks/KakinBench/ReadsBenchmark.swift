import Foundation

/// reads: GET /v1/customers/{id}/wallet (one indexed SQLite read on a reader thread) and GET
/// /v1/customers/{id} (the status: the customer's transactions through the status engine), over many
/// customers, each against GET /healthz (no database, no work) from the same server in the same run.
enum ReadsBenchmark {
    static let customers = 1_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, _) = try workspace.writeConfig("reads")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("reads.log"))
        func load(_ path: String, _ scriptArguments: [String]?) throws -> MeasuredRun {
            try server.customerReads(path, scriptArguments, options, workspace)
        }
        var healthz: [MeasuredRun] = [], wallet = healthz, status = healthz
        do {
            try seedCustomers(port: server.port)
            for _ in 0..<options.repetitions {
                healthz.append(try load("/healthz", nil))
                wallet.append(try load("", ["\(customers)", "/wallet"]))
                status.append(try load("", ["\(customers)"]))
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }

        var result = BenchResult()
        let healthzRuns = healthz.map(\.run)
        func figure(_ name: String, _ what: String, _ measured: [MeasuredRun], goal: Double?) -> Figure {
            let runs = measured.map(\.run)
            return Figure(
                name: name, value: median(runs.map(\.requestsPerSecond)), baselineName: "GET /healthz",
                baselineValue: median(healthzRuns.map(\.requestsPerSecond)), goal: goal,
                details: [
                    String(format: "latency p50 %.2f ms, p99 %.2f ms; healthz p50 %.2f ms, p99 %.2f ms", median(runs.map(\.latencyP50Ms)),
                           median(runs.map(\.latencyP99Ms)), median(healthzRuns.map(\.latencyP50Ms)), median(healthzRuns.map(\.latencyP99Ms))),
                    "runs: \(BenchResult.rates(runs.map(\.requestsPerSecond))); healthz: \(BenchResult.rates(healthzRuns.map(\.requestsPerSecond)))",
                    String(format: "kakin serve CPU per request: %.0f µs (healthz %.0f µs)", median(measured.map(\.cpuPerRequest)) * 1e6,
                           median(healthz.map(\.cpuPerRequest)) * 1e6),
                    measured.map(\.work).total.perRequest(runs.map(\.requests).reduce(0, +), what),
                ])
        }
        result.figures.append(figure("wallet reads over HTTP (\(options.connections) connections)", "wallet read", wallet, goal: 0.8))
        result.figures.append(figure("status reads over HTTP (\(options.connections) connections)", "status read", status, goal: 0.6))
        let all = (healthz + wallet + status).map(\.run)
        let non2xx = all.map(\.non2xx).reduce(0, +)
        let socketErrors = all.map(\.socketErrors).reduce(0, +)
        result.check("reads: wrk saw \(non2xx) non-2xx answers and \(socketErrors) socket errors", non2xx == 0 && socketErrors == 0)
        return result
    }

    /// Customers bench-0 … bench-(customers-1), each with one grant, so every read finds a wallet.
    static func seedCustomers(port: Int) throws {
        let connection = HTTPConnection(port: port)
        for n in 0..<customers {
            let answer = try connection.request("POST", "/v1/customers/bench-\(n)/wallet/grants", json: ["amount": 100, "reason": "seed"],
                                                headers: ["Idempotency-Key": "seed-\(n)"])
            guard answer.status == 201 else {
                throw SubprocessFailure(description: "seeding customer bench-\(n): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
    }
}
