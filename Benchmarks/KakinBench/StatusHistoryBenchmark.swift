import Foundation
import KakinCore

/// status reads of long-paying customers: GET /v1/customers/{id} for customers who have paid every month for
/// ten years on each of three subscriptions (3 × 120 transactions, the renewal info of each) and hold 500
/// ledger entries, against GET /healthz on the same server in the same run. What an app launch costs must
/// not grow with a customer's loyalty: beside it, the same read for customers with the same three
/// subscriptions in their first month (no goal; the two should be close). And what a 3-subscription status
/// costs the server: status reads of the first-month customers per second of server CPU against wallet
/// reads of the same customers per second of server CPU (issue 15: a status ≤ 2× a wallet read's CPU).
enum StatusHistoryBenchmark {
    static let customers = 10
    static let months = 120
    static let ledgerEntries = 500
    static let dayMs: Int64 = 86_400_000

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        let (config, _) = try workspace.writeConfig("history", products: BenchAppStore.productsWithSubscriptionsJSON)
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("history.log"))
        func load(_ path: String, _ scriptArguments: [String]?) throws -> MeasuredRun {
            try server.customerReads(path, scriptArguments, options, workspace)
        }
        var result = BenchResult()
        var healthz: [MeasuredRun] = [], status = healthz, firstMonth = healthz, wallet = healthz
        do {
            let seeded = try seed(workspace, port: server.port, first: 0, months: months, ledgerEntries: ledgerEntries)
            result.check("status history: \(customers) ten-year customers, each \(seeded)", seeded.hasPrefix("3 subscriptions subscribed"))
            let seededNew = try seed(workspace, port: server.port, first: customers, months: 1, ledgerEntries: 0)
            result.check("status history: \(customers) first-month customers, each \(seededNew)", seededNew.hasPrefix("3 subscriptions subscribed"))
            for _ in 0..<options.repetitions {
                healthz.append(try load("/healthz", nil))
                status.append(try load("", ["\(customers)", "", "0"]))
                firstMonth.append(try load("", ["\(customers)", "", "\(customers)"]))
                wallet.append(try load("", ["\(customers)", "/wallet", "\(customers)"]))
            }
            try server.stop()
        } catch {
            server.kill()
            throw error
        }

        let healthzRuns = healthz.map(\.run)
        func figure(_ name: String, _ measured: [MeasuredRun], goal: Double?, history: String) -> Figure {
            let requests = measured.map(\.run.requests).reduce(0, +)
            let runs = measured.map(\.run)
            return Figure(
                name: name, value: median(runs.map(\.requestsPerSecond)), baselineName: "GET /healthz",
                baselineValue: median(healthzRuns.map(\.requestsPerSecond)), goal: goal,
                details: [
                    "each customer: \(history)",
                    String(format: "latency p50 %.2f ms, p99 %.2f ms; healthz p50 %.2f ms, p99 %.2f ms", median(runs.map(\.latencyP50Ms)),
                           median(runs.map(\.latencyP99Ms)), median(healthzRuns.map(\.latencyP50Ms)), median(healthzRuns.map(\.latencyP99Ms))),
                    "runs: \(BenchResult.rates(runs.map(\.requestsPerSecond))); healthz: \(BenchResult.rates(healthzRuns.map(\.requestsPerSecond)))",
                    String(format: "kakin serve CPU per request: %.0f µs (healthz %.0f µs)", median(measured.map(\.cpuPerRequest)) * 1e6,
                           median(healthz.map(\.cpuPerRequest)) * 1e6),
                    measured.map(\.work).total.perRequest(requests, "status read"),
                ])
        }
        result.figures.append(figure(
            "status reads, 10-year customers (\(options.connections) connections)", status, goal: 0.4,
            history: "3 monthly subscriptions × \(months) transactions (ten years), a renewal info each, \(ledgerEntries) ledger entries"))
        result.figures.append(figure(
            "status reads, first-month customers (\(options.connections) connections)", firstMonth, goal: nil,
            history: "the same 3 subscriptions, 1 transaction and a renewal info each, no ledger entries"))
        let statusPerCPUSecond = firstMonth.map { 1 / $0.cpuPerRequest }, walletPerCPUSecond = wallet.map { 1 / $0.cpuPerRequest }
        result.figures.append(Figure(
            name: "status reads per server CPU-second, first-month customers", value: median(statusPerCPUSecond),
            baselineName: "wallet reads per server CPU-second (same customers)", baselineValue: median(walletPerCPUSecond), goal: 0.5,
            details: [
                String(format: "kakin serve CPU per status read %.0f µs (3 subscriptions), per wallet read %.0f µs: a status costs %.1f× "
                       + "a wallet read (goal ≤ 2×)", 1e6 / median(statusPerCPUSecond), 1e6 / median(walletPerCPUSecond),
                       median(walletPerCPUSecond) / median(statusPerCPUSecond)),
                "status: \(BenchResult.rates(statusPerCPUSecond)); wallet: \(BenchResult.rates(walletPerCPUSecond)) "
                    + "(\(options.loadSeconds) s of wrk each over the same \(customers) customers, same server, one right after the other)",
                "wallet reads: \(BenchResult.rates(wallet.map(\.run.requestsPerSecond))) over HTTP",
            ]))
        let all = (status + firstMonth + wallet + healthz).map(\.run)
        let non2xx = all.map(\.non2xx).reduce(0, +)
        let socketErrors = all.map(\.socketErrors).reduce(0, +)
        result.check("status history: wrk saw \(non2xx) non-2xx answers and \(socketErrors) socket errors", non2xx == 0 && socketErrors == 0)
        return result
    }

    /// Customers bench-{first} … bench-{first+customers-1}, one thread each: every month of three subscriptions
    /// presented by the app (`POST …/transactions`), a DID_RENEW notification per subscription for its renewal
    /// info, then `ledgerEntries` grants. Returns what the last customer's status shows, once every
    /// notification so far is applied.
    static func seed(_ workspace: BenchWorkspace, port: Int, first: Int, months: Int, ledgerEntries: Int) throws -> String {
        let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
        // The latest month started 5 days ago: every subscription is current.
        let startMs = nowMs - Int64(months - 1) * 30 * dayMs - 5 * dayMs
        let ledgerEntries = ledgerEntries
        let appStore = workspace.appStore
        let failures = Collected<String>()
        startThreads(customers) { worker in
            let c = first + worker
            do {
                let connection = HTTPConnection(port: port)
                let customer = "/v1/customers/bench-\(c)"
                guard let token = try connection.request("GET", customer).json["appAccountToken"]?.stringValue else {
                    throw SubprocessFailure(description: "no appAccountToken for bench-\(c)")
                }
                for s in BenchAppStore.subscriptions.indices {
                    let original = 5_000_000_000_000_000 + Int64(c) * 10_000 + Int64(s) * 1_000
                    var latest = ""
                    for month in 0..<months {
                        let purchaseMs = startMs + Int64(month) * 30 * dayMs
                        latest = try appStore.subscriptionTransaction(
                            id: String(original + Int64(month)), originalId: String(original), subscription: s, purchaseMs: purchaseMs,
                            expiresMs: purchaseMs + 30 * dayMs, appAccountToken: token, nowMs: nowMs)
                        let answer = try connection.request("POST", customer + "/transactions", json: ["signedTransaction": .string(latest)])
                        guard answer.status == 201 else {
                            throw SubprocessFailure(description: "bench-\(c) month \(month): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
                        }
                    }
                    let notification = try appStore.didRenewNotification(
                        transaction: latest, originalId: String(original), subscription: s, renewalMs: startMs + Int64(months) * 30 * dayMs,
                        startMs: startMs, appAccountToken: token, nowMs: nowMs)
                    let answer = try connection.request("POST", "/v1/notifications/appstore", json: ["signedPayload": .string(notification)])
                    guard answer.status == 200 else { throw SubprocessFailure(description: "DID_RENEW for bench-\(c): \(answer.status)") }
                }
                for n in 0..<ledgerEntries {
                    let answer = try connection.request("POST", customer + "/wallet/grants", json: ["amount": 1, "reason": "loyalty"],
                                                        headers: ["Idempotency-Key": "history-\(c)-\(n)"])
                    guard answer.status == 201 else { throw SubprocessFailure(description: "grant for bench-\(c): \(answer.status)") }
                }
            } catch {
                failures.append(contentsOf: ["\(error)"])
            }
        }.wait()
        if let failure = failures.all.first { throw SubprocessFailure(description: "seeding the status-history customers: \(failure)") }

        let expected = (first + customers) * BenchAppStore.subscriptions.count
        let deadline = Date().addingTimeInterval(120)
        while try NotificationsBenchmark.counter("kakin_notifications_applied_total", port: port) < expected {
            guard Date() < deadline else { throw SubprocessFailure(description: "the DID_RENEW notifications were not applied within 120 s") }
            Thread.sleep(forTimeInterval: 0.1)
        }
        let status = try HTTPConnection(port: port).request("GET", "/v1/customers/bench-\(first + customers - 1)").json
        let subscribed = status["subscriptions"]?.arrayValue?.filter {
            $0["state"]?.stringValue == "subscribed" && $0["willAutoRenew"] == true
        }.count ?? 0
        return "\(subscribed) subscriptions subscribed with auto-renew on, wallet \(status["wallet"]?["total"]?.intValue ?? -1) coins"
    }
}
