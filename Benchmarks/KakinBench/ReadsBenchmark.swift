import Foundation
import KakinCore

/// reads: GET /v1/customers/{id}/wallet (one indexed SQLite read on a reader thread) and GET
/// /v1/customers/{id} (the status: the customer's transactions through the status engine), over many
/// customers, each against GET /healthz (no database, no work) from the same server in the same run; and
/// GET /v1/customers/{id}/offerings (a placement with a rule and a running experiment every customer is enrolled in)
/// per server CPU-second against the wallet reads' (issue 29: ≥ 0.8×).
enum ReadsBenchmark {
    static let customers = 1_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, _) = try workspace.writeConfig("reads")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("reads.log"))
        func load(_ path: String, _ scriptArguments: [String]?) throws -> MeasuredRun {
            try server.customerReads(path, scriptArguments, options, workspace)
        }
        var healthz: [MeasuredRun] = [], wallet = healthz, status = healthz, offerings = healthz
        do {
            try seedCustomers(port: server.port)
            try seedOfferings(port: server.port)
            for _ in 0..<options.repetitions {
                healthz.append(try load("/healthz", nil))
                wallet.append(try load("", ["\(customers)", "/wallet"]))
                status.append(try load("", ["\(customers)"]))
                offerings.append(try load("", ["\(customers)", offeringsSuffix]))
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
        let offeringsPerCPUSecond = offerings.map { 1 / $0.cpuPerRequest }, walletPerCPUSecond = wallet.map { 1 / $0.cpuPerRequest }
        result.figures.append(Figure(
            name: "offerings reads per server CPU-second", value: median(offeringsPerCPUSecond),
            baselineName: "wallet reads per server CPU-second (same customers)", baselineValue: median(walletPerCPUSecond), goal: 0.8,
            details: [
                String(format: "kakin serve CPU per offerings read %.0f µs, per wallet read %.0f µs", 1e6 / median(offeringsPerCPUSecond),
                       1e6 / median(walletPerCPUSecond)),
                "offerings: \(BenchResult.rates(offeringsPerCPUSecond)); wallet: \(BenchResult.rates(walletPerCPUSecond)) (\(options.loadSeconds) s of wrk "
                    + "each over the same \(customers) customers, same server, one after the other; every customer enrolled before the runs)",
                "offerings reads: \(BenchResult.rates(offerings.map(\.run.requestsPerSecond))) over HTTP",
            ]))
        let all = (healthz + wallet + status + offerings).map(\.run)
        let non2xx = all.map(\.non2xx).reduce(0, +)
        let socketErrors = all.map(\.socketErrors).reduce(0, +)
        result.check("reads: wrk saw \(non2xx) non-2xx answers and \(socketErrors) socket errors", non2xx == 0 && socketErrors == 0)
        return result
    }

    static let offeringsSuffix = "/offerings?placement=onboarding&platform=ios&country=US&appVersion=2.4.1"

    /// Two offerings, a placement with a country rule and an experiment on it enrolling everyone; every customer asks once
    /// (its enrollment is written), so the runs measure the steady state: the revision and the enrollment read, no write.
    static func seedOfferings(port: Int) throws {
        let connection = HTTPConnection(port: port)
        let puts: [(String, JSONValue)] = [
            ("/v1/admin/offerings/small", ["packages": [["id": "coins", "appStore": "coins.100"], ["id": "more", "appStore": "coins.500"]],
                                           "metadata": ["title": "Top up", "highlight": "coins"]]),
            ("/v1/admin/offerings/big", ["packages": [["id": "coins", "appStore": "coins.1200"], ["id": "less", "appStore": "coins.500"]],
                                         "metadata": ["title": "Best value", "highlight": "coins"]]),
            ("/v1/admin/placements/onboarding", ["rules": [["when": ["countries": ["JP"]], "offering": "big"]], "default": "small"]),
            ("/v1/admin/experiments/bench", ["placement": "onboarding", "enrollmentPercent": 100, "startsAt": "2020-01-01T00:00:00Z",
                                             "variants": [["id": "a", "offering": "small", "weight": 1], ["id": "b", "offering": "big", "weight": 1]]]),
        ]
        for (path, body) in puts {
            let answer = try connection.request("PUT", path, json: body)
            guard answer.status == 200 else { throw SubprocessFailure(description: "PUT \(path): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))") }
        }
        for n in 0..<customers {
            let answer = try connection.request("GET", "/v1/customers/bench-\(n)" + offeringsSuffix)
            guard answer.status == 200 else {
                throw SubprocessFailure(description: "offerings of bench-\(n): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            }
        }
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
