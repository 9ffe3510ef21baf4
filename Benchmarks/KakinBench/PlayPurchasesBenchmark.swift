import Foundation
import KakinCore

/// verified Google Play purchases per server CPU-second, beside the App Store's, in one run on one server: `kakin serve`
/// in local mode (both simulators mounted in the process, RTDN pushes turned off so that Kakin learns of each purchase
/// only from the app). Each repetition buys the same number of coin packs on each store beforehand, through the
/// simulators' control APIs (the App Store's with `"notify": false`), over 1,000 customers with their `appAccountToken`;
/// then wrk hands them to Kakin: `{"signedTransaction"}` (verified locally) or `{"store": "googlePlay", "packageName",
/// "productId", "purchaseToken"}` (read from the Developer API, credited, then consumed by the acknowledgement worker).
/// Server CPU is `kakin serve`'s from the first request until it is idle again after the last answer (its acknowledgement
/// worker has consumed what was credited), so Play's includes the Play simulator's own work answering Kakin (the access
/// token, `productsv2`, `:consume`): a real server hands that to Google.
enum PlayPurchasesBenchmark {
    static let customers = 1_000
    static let packageName = "dev.kakin.demo"
    /// Purchases per second of load and store, at most this many per run: Play sells a customer one unconsumed purchase
    /// of a product at a time, so each customer buys each of the two coin packs at most once a run.
    static let poolPerSecond = 500
    static let poolMax = 2 * customers

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let server = try KakinServerProcess.start(kakin: workspace.kakin, arguments: ["serve", "--port", "0", "--database",
                                                                                      "sqlite:" + workspace.file("play.db").path],
                                                  log: workspace.file("play.log"))
        let poolSize = min(poolMax, poolPerSecond * options.loadSeconds)
        var play: [Double] = [], appStore: [Double] = [], openssl: [Double] = []
        var result = BenchResult()
        do {
            let connection = HTTPConnection(port: server.port)
            let push = try connection.request("PUT", "/play-simulator/v1/push", json: ["url": nil])
            guard push.status == 200 else { throw SubprocessFailure(description: "the Play simulator's push could not be turned off: \(push.status)") }
            // Each repetition has its own 1,000 customers: a pack bought but not sent in the last run is still theirs, unconsumed.
            let tokens = try server.seedCustomers(customers * options.repetitions)
            for repetition in 0..<options.repetitions {
                openssl.append(try VerifyBenchmark.opensslVerifyPerSecond(workspace))
                for store in ["appStore", "googlePlay"] {
                    let bought = try buy(store, count: poolSize, first: repetition * customers, tokens: tokens, connection: connection)
                    let pool = try RequestPool.write(workspace, name: "\(store)-\(repetition)", count: poolSize,
                                                     files: Wrk.threadCount(connections: options.connections)) { n in bought[n] }
                    let (run, cpuSeconds) = try server.measuringCPU { () throws -> PoolRun in
                        let run = try server.send(pool, expectedStatus: 201, options, workspace)
                        try waitUntilIdle(server)
                        return run
                    }
                    pool.remove()
                    result.check("\(store) purchases run \(repetition + 1): \(BenchResult.grouped(run.ok)) answered 201 (of \(BenchResult.grouped(poolSize)) bought), "
                                 + "\(run.other) other answers, \(run.run.socketErrors) socket errors",
                                 run.ok > 0 && run.other == 0 && run.run.socketErrors == 0)
                    if store == "googlePlay" { play.append(Double(run.ok) / cpuSeconds) } else { appStore.append(Double(run.ok) / cpuSeconds) }
                }
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }
        result.figures.append(Figure(
            name: "verified Play purchases per server CPU-second", value: median(play),
            baselineName: "verified App Store purchases per server CPU-second (same server, same run)", baselineValue: median(appStore), goal: nil,
            details: [
                String(format: "kakin serve CPU per purchase: Play %.0f µs, App Store %.0f µs (%.1f and %.1f verifies of openssl's %.0f µs)",
                       1e6 / median(play), 1e6 / median(appStore), median(openssl) / median(play), median(openssl) / median(appStore),
                       1e6 / median(openssl)),
                "Play: \(BenchResult.rates(play)); App Store: \(BenchResult.rates(appStore))",
                "local mode, \(BenchResult.grouped(poolSize)) coin packs per store and run over \(BenchResult.grouped(customers)) customers; "
                    + "Play's CPU counts the simulator answering Kakin in the same process (token, productsv2, consume)",
            ]))
        return result
    }

    /// `count` purchases made on `store` beforehand (customer `first` + n mod 1,000), as wrk's request lines.
    static func buy(_ store: String, count: Int, first: Int, tokens: [String], connection: HTTPConnection) throws -> [(path: String, body: JSONValue)] {
        try (0..<count).map { n in
            let customer = first + n % customers
            let path = "/v1/customers/bench-\(customer)/transactions"
            if store == "appStore" {
                let answer = try connection.request("POST", "/simulator/v1/purchases",
                                                    json: ["productId": n < customers ? "coins.500" : "coins.1200", "appAccountToken": .string(tokens[customer]),
                                                           "notify": false])
                guard answer.status == 201, let jws = answer.json["signedTransaction"]?.stringValue else {
                    throw SubprocessFailure(description: "the App Store simulator refused a purchase: \(answer.status)")
                }
                return (path, ["signedTransaction": .string(jws)])
            }
            let product = n < customers ? "coins_500" : "coins_1200"
            let answer = try connection.request("POST", "/play-simulator/v1/purchases", json: ["productId": .string(product), "obfuscatedAccountId": .string(tokens[customer])])
            guard answer.status == 201, let token = answer.json["purchaseToken"]?.stringValue else {
                throw SubprocessFailure(description: "the Play simulator refused a purchase: \(answer.status)")
            }
            return (path, ["store": "googlePlay", "packageName": .string(packageName), "productId": .string(product), "purchaseToken": .string(token)])
        }
    }

    /// Waits (up to a minute) until the server is idle again: its acknowledgement worker has consumed what was credited.
    static func waitUntilIdle(_ server: KakinServerProcess) throws {
        let deadline = Date().addingTimeInterval(60)
        var before = try server.cpuSeconds
        while Date() < deadline {
            Thread.sleep(forTimeInterval: 0.5)
            let now = try server.cpuSeconds
            if now - before < 0.01 { return }
            before = now
        }
        throw SubprocessFailure(description: "kakin serve was still busy a minute after the load")
    }
}
