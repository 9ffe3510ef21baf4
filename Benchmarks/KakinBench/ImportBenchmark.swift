import Foundation

/// import: status reads (GET /v1/customers/{id}, wrk) while a balances import runs in the same server, against the same
/// reads with no import, in the same run: the import shares the writer and must never block serving. Also prints the
/// import's own rate and checks that every row was applied once.
enum ImportBenchmark {
    /// Rows per import: more than a measurement's worth at the import's rate, so each reads-with-import run overlaps one.
    static let rows = 100_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, _) = try workspace.writeConfig("import")
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("import.log"))
        var alone: [MeasuredRun] = [], during = alone
        var rates: [Double] = [], imported: [(applied: Int64, rows: Int64)] = []
        do {
            try ReadsBenchmark.seedCustomers(port: server.port)
            let connection = HTTPConnection(port: server.port, timeoutSeconds: 300)
            for repetition in 0..<options.repetitions {
                alone.append(try server.customerReads("", ["\(ReadsBenchmark.customers)"], options, workspace))
                let started = try connection.request("POST", "/v1/admin/imports?kind=balances", body: Array(file(repetition).utf8),
                                                     headers: ["Content-Type": "text/csv"])
                guard started.status == 202, let id = started.json["importId"]?.stringValue else {
                    throw SubprocessFailure(description: "import refused: \(started.status) \(String(decoding: started.body, as: UTF8.self))")
                }
                during.append(try server.customerReads("", ["\(ReadsBenchmark.customers)"], options, workspace))
                let status = try connection.request("GET", "/v1/admin/imports/\(id)").json
                guard status["state"] == "running" else {
                    throw SubprocessFailure(description: "the import was not running through the whole measurement: \(status)")
                }
                rates.append(status["ratePerSecond"]?.doubleValue ?? 0)
                let cancelled = try connection.request("POST", "/v1/admin/imports/\(id)/cancel").json
                imported.append((cancelled["applied"]?.int64Value ?? -1, cancelled["done"]?.int64Value ?? -2))
            }
            let check = try connection.request("GET", "/v1/admin/ledger/check")
            try server.stop()
            var result = BenchResult()
            let runs = during.map(\.run), baseline = alone.map(\.run)
            result.figures.append(Figure(
                name: "status reads over HTTP during a balances import (\(options.connections) connections)",
                value: median(runs.map(\.requestsPerSecond)), baselineName: "status reads with no import", baselineValue: median(baseline.map(\.requestsPerSecond)),
                goal: 0.5,
                details: [
                    String(format: "latency p50 %.2f ms, p99 %.2f ms; with no import p50 %.2f ms, p99 %.2f ms", median(runs.map(\.latencyP50Ms)),
                           median(runs.map(\.latencyP99Ms)), median(baseline.map(\.latencyP50Ms)), median(baseline.map(\.latencyP99Ms))),
                    "import rate while read: \(rates.map { String(format: "%.0f", $0) }.joined(separator: ", ")) rows/s; "
                        + "rows done when cancelled: \(imported.map { String($0.rows) }.joined(separator: ", "))",
                ]))
            let non2xx = (runs + baseline).map(\.non2xx).reduce(0, +)
            result.check("import: wrk saw \(non2xx) non-2xx answers", non2xx == 0)
            result.check("import: every row done was applied once (\(imported))", imported.allSatisfy { $0.applied == $0.rows && $0.rows > 0 })
            result.check("import: the ledger check passed", check.status == 200)
            return result
        } catch {
            server.kill()
            throw error
        }
    }

    /// A balances file with references unique to the repetition.
    static func file(_ repetition: Int) -> String {
        var lines = ["customerId,paid,free,reference,asOf"]
        lines.reserveCapacity(rows + 1)
        for i in 0..<rows { lines.append("import-\(i % 20_000),\(i % 997),\(i % 13),bench-\(repetition)-\(i),2026-09-30") }
        return lines.joined(separator: "\n") + "\n"
    }
}
