import Foundation
import KakinCore

#if canImport(Glibc)
    import Glibc
#endif

/// events: Kakin's webhooks against the real release binaries — `kakin serve` with one webhook endpoint pointing at
/// `kakin events listen` (signatures checked, each event printed once, to /dev/null). Two figures:
/// - events delivered per second to that local receiver, against notifications ingested per second by the same
///   server in the same repetition (goal ≥ 1.0×: delivery keeps up with the ingest's peak). Each repetition first
///   ingests `--seconds` of pre-signed ONE_TIME_CHARGE notifications (the baseline, as the notifications figure
///   takes it), waits until they are applied and their `coins.credited` events delivered live, then replays every
///   event of the repetition to the endpoint at once (`POST /v1/admin/webhooks/bench/replay {"since"}`) and times the
///   whole backlog's delivery: the endpoint's capacity, not the rate events happen to be made;
/// - durable grants per server CPU-second with that webhook configured (the CPU counted until every grant's event is
///   delivered) against the same without webhooks, two servers side by side (goal ≥ 0.83×: a grant's CPU grows by
///   ≤ 20 % with one webhook).
enum EventsBenchmark {
    static let secret = "whsec_bench_0123456789abcdef"
    static let secretVariable = "KAKIN_BENCH_WEBHOOK_SECRET"
    static let endpoint = "bench"
    static let drainTimeoutSeconds = 600.0
    static let deliveredName = "kakin_webhook_attempts_total{endpoint=\"bench\",outcome=\"delivered\"}"
    static let backlogName = "kakin_webhook_backlog{endpoint=\"bench\"}"
    static let deadName = "kakin_webhook_dead{endpoint=\"bench\"}"

    /// `kakin events listen` as a child process; its port read from its first line on standard error.
    final class Listener {
        let process: Process
        let port: Int
        let log: URL
        var url: String { "http://127.0.0.1:\(port)/hooks/kakin" }

        init(_ workspace: BenchWorkspace) throws {
            log = workspace.file("events-listen.log")
            process = Process()
            process.executableURL = workspace.kakin
            process.arguments = ["events", "listen", "--port", "0", "--secret", EventsBenchmark.secret]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = try Subprocess.newFile(log)
            process.standardInput = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                if let r = text.range(of: "http://127.0.0.1:"), let end = text[r.upperBound...].firstIndex(of: "/"), let p = Int(text[r.upperBound..<end]) {
                    port = p
                    return
                }
                guard process.isRunning else { throw SubprocessFailure(description: "kakin events listen exited: \(Subprocess.tail(of: log))") }
                Thread.sleep(forTimeInterval: 0.02)
            }
            process.terminate()
            throw SubprocessFailure(description: "kakin events listen did not start")
        }

        /// SIGTERM; its summary line (`N events printed, N redeliveries, N failed on purpose, N refused`).
        func stop() -> String {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
            return ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n").last.map(String.init) ?? ""
        }
    }

    /// `NAME.json` as the other figures write it, plus `events` with the one webhook when `webhookURL` is given.
    static func writeConfig(_ workspace: BenchWorkspace, _ name: String, webhookURL: String?,
                            products: JSONValue = BenchAppStore.productsJSON) throws -> (config: URL, database: URL) {
        let (config, database) = try workspace.writeConfig(name, products: products)
        guard let webhookURL else { return (config, database) }
        guard case .object(var o) = try JSONParser.parse([UInt8](try Data(contentsOf: config))) else {
            throw SubprocessFailure(description: "unexpected config \(config.path)")
        }
        o["events"] = ["webhooks": [["id": .string(endpoint), "url": .string(webhookURL), "secretEnv": .string(secretVariable), "types": ["*"]]]]
        try Data(JSONValue.object(o).serialized(pretty: true)).write(to: config)
        return (config, database)
    }

    static func run(_ workspace: BenchWorkspace, _ options: BenchOptions) throws -> BenchResult {
        setenv(secretVariable, secret, 1)
        let listener = try Listener(workspace)
        var result = BenchResult()
        do {
            try delivery(workspace, options, listener, &result)
            try grantCPU(workspace, options, listener, &result)
        } catch {
            _ = listener.stop()
            throw error
        }
        let summary = listener.stop()
        result.check("events: the receiver refused none (signatures checked): \(summary)", summary.hasSuffix(" 0 refused"))
        return result
    }

    /// Waits until the endpoint's backlog is 0 and `delivered` (when given) attempts were delivered in all; the
    /// seconds it took, nil past the timeout. Polled every 100 ms (`/metrics` reads the endpoint's queue: one indexed read).
    static func waitUntilDelivered(_ server: KakinServerProcess, delivered: Int? = nil, poll: Double = 0.1) throws -> Double? {
        let start = Date()
        while true {
            let m = try server.metrics()
            if (m[backlogName] ?? 1) == 0, delivered.map({ Int(m[deliveredName] ?? 0) >= $0 }) ?? true { return Date().timeIntervalSince(start) }
            guard Date().timeIntervalSince(start) < drainTimeoutSeconds else { return nil }
            Thread.sleep(forTimeInterval: poll)
        }
    }

    /// Waits until the endpoint has no pending or retrying delivery (a replay creates its deliveries in its own write,
    /// so nothing is left to fan out); the seconds it took, nil past the timeout. Polled every 50 ms with two
    /// `GET /v1/admin/webhooks/bench/deliveries?state=…&limit=1` (an index's first row each), not `/metrics`, whose
    /// queue counts would add their own CPU to the figure.
    static func waitUntilNoneWaiting(_ server: KakinServerProcess) throws -> Double? {
        let start = Date()
        let connection = HTTPConnection(port: server.port)
        while true {
            var waiting = false
            for state in ["pending", "retrying"] {
                let answer = try connection.request("GET", "/v1/admin/webhooks/\(endpoint)/deliveries?state=\(state)&limit=1")
                guard answer.status == 200 else { throw SubprocessFailure(description: "deliveries answered \(answer.status)") }
                if answer.json["deliveries"]?.arrayValue?.isEmpty == false { waiting = true }
            }
            if !waiting { return Date().timeIntervalSince(start) }
            guard Date().timeIntervalSince(start) < drainTimeoutSeconds else { return nil }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    static func delivery(_ workspace: BenchWorkspace, _ options: BenchOptions, _ listener: Listener, _ result: inout BenchResult) throws {
        let poolSize = min(NotificationsBenchmark.poolMax, NotificationsBenchmark.poolPerSecond * options.loadSeconds)
        let (config, _) = try writeConfig(workspace, "events-delivery", webhookURL: listener.url)
        let server = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: workspace.file("events-delivery.log"))
        var ingested: [Double] = [], delivered: [Double] = [], cpuPerDelivery: [Double] = [], work: [DatabaseWork] = [], queuedTotal = 0
        do {
            let tokens = try server.seedCustomers(NotificationsBenchmark.customers)
            guard try waitUntilDelivered(server) != nil else { throw SubprocessFailure(description: "the seeded customers' events were never delivered") }
            for repetition in 0..<options.repetitions {
                let pool = try NotificationsBenchmark.writePool(
                    workspace, count: poolSize, files: Wrk.threadCount(connections: options.connections), name: "events-\(repetition)",
                    firstId: NotificationsBenchmark.firstTransactionId + (repetition + 50) * 100_000_000, tokens: tokens)
                let sinceMs = Int64(Date().timeIntervalSince1970 * 1000) - 1
                let before = try server.metrics()
                let run = try server.send(pool, expectedStatus: 200, options, workspace)
                pool.remove()
                ingested.append(run.perSecond)
                let applied = try NotificationsBenchmark.waitUntilApplied(server, count: Int(before[NotificationsBenchmark.appliedName] ?? 0) + run.ok)
                let live = try waitUntilDelivered(server)
                result.check("events run \(repetition + 1): \(BenchResult.grouped(run.ok)) notifications ingested, applied and their events delivered live",
                             run.other == 0 && applied != nil && live != nil)

                // The capacity: every event of this repetition queued again at once, delivered as one backlog.
                let deliveredBefore = Int(try server.metrics()[deliveredName] ?? 0)
                let workBefore = try server.databaseWork()
                let ((queued, seconds), cpuSeconds) = try server.measuringCPU { () throws -> (Int, Double?) in
                    let start = Date()
                    let answer = try HTTPConnection(port: server.port).request(
                        "POST", "/v1/admin/webhooks/\(endpoint)/replay", json: ["since": .string(Timestamp.rfc3339(sinceMs))])
                    guard answer.status == 202, let queued = answer.json["queued"]?.intValue else {
                        throw SubprocessFailure(description: "replay answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
                    }
                    guard try waitUntilNoneWaiting(server) != nil else { return (queued, nil) }
                    return (queued, Date().timeIntervalSince(start))
                }
                work.append(try server.databaseWork() - workBefore)
                queuedTotal += queued
                let deliveredNow = Int(try server.metrics()[deliveredName] ?? 0)
                result.check("events run \(repetition + 1): \(BenchResult.grouped(deliveredNow - deliveredBefore)) deliveries answered 2xx ≥ queued",
                             deliveredNow - deliveredBefore >= queued)
                if let seconds {
                    delivered.append(Double(queued) / seconds)
                    cpuPerDelivery.append(cpuSeconds / Double(max(1, queued)))
                }
                result.check("events run \(repetition + 1): the replay queued \(BenchResult.grouped(queued)) = one coins.credited per notification "
                             + "(\(BenchResult.grouped(run.ok))), all delivered" + (seconds == nil ? " — NOT within \(Int(drainTimeoutSeconds)) s" : ""),
                             queued == run.ok && seconds != nil)
            }
            let dead = Int(try server.metrics()[deadName] ?? -1)
            result.check("events: \(dead) dead deliveries", dead == 0)
            try server.stop()
        } catch {
            server.kill()
            throw error
        }
        guard !delivered.isEmpty else { return }
        result.figures.append(Figure(
            name: "events delivered to a local receiver (1 endpoint)", value: median(delivered),
            baselineName: "notifications ingested over HTTP (same server)", baselineValue: median(ingested), goal: 1.0,
            details: [
                "delivered: \(BenchResult.rates(delivered)); ingested: \(BenchResult.rates(ingested))",
                String(format: "kakin serve CPU per delivery %.0f µs; `kakin events listen` checks each signature and prints each event once", median(cpuPerDelivery) * 1e6),
                work.total.perRequest(queuedTotal, "delivery (the replay's write included)"),
                "each repetition: \(BenchResult.grouped(poolSize)) pre-signed notifications over \(BenchResult.grouped(NotificationsBenchmark.customers)) customers "
                    + "ingested (the baseline), applied, their events delivered live; then all of them replayed at once and the backlog timed, "
                    + "8 deliveries in flight (the contract's defaults), each customer's in sequence order",
            ]))
    }

    static func grantCPU(_ workspace: BenchWorkspace, _ options: BenchOptions, _ listener: Listener, _ result: inout BenchResult) throws {
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/grants.lua")
        let (plainConfig, _) = try writeConfig(workspace, "events-grants-plain", webhookURL: nil)
        let (hookedConfig, _) = try writeConfig(workspace, "events-grants-webhook", webhookURL: listener.url)
        let plain = try KakinServerProcess.start(kakin: workspace.kakin, config: plainConfig, log: workspace.file("events-grants-plain.log"))
        let hooked: KakinServerProcess
        do {
            hooked = try KakinServerProcess.start(kakin: workspace.kakin, config: hookedConfig, log: workspace.file("events-grants-webhook.log"))
        } catch {
            plain.kill()
            throw error
        }
        var perCPU: [String: [Double]] = ["plain": [], "hooked": []]
        var work: [String: [DatabaseWork]] = [:], grants: [String: Int] = [:]
        var drains: [Double] = []
        var failures = 0
        do {
            for repetition in 0..<options.repetitions {
                for (label, server) in [("plain", plain), ("hooked", hooked)] {
                    let workBefore = try server.databaseWork()
                    let (run, cpuSeconds) = try server.measuringCPU { () throws -> Wrk.Run in
                        let run = try Wrk.run(url: "http://127.0.0.1:\(server.port)", seconds: options.loadSeconds + Wrk.drainSeconds,
                                              connections: options.connections, script: script,
                                              scriptArguments: ["\(options.loadSeconds)", "\(GrantsBenchmark.customers)", "\(label)\(repetition)"],
                                              workspace: workspace)
                        if label == "hooked" {
                            // Until every grant's event is delivered: the webhook's whole cost is in the figure.
                            guard let drained = try waitUntilDelivered(server, poll: 1) else {
                                throw SubprocessFailure(description: "the grants' events were not delivered within \(Int(drainTimeoutSeconds)) s")
                            }
                            drains.append(drained)
                        }
                        return run
                    }
                    failures += run.non2xx + run.socketErrors
                    perCPU[label, default: []].append(Double(try run.count("created")) / cpuSeconds)
                    work[label, default: []].append(try server.databaseWork() - workBefore)
                    grants[label, default: 0] += try run.count("created")
                }
            }
            let dead = Int(try hooked.metrics()[deadName] ?? -1)
            result.check("events grants: \(failures) non-2xx answers and socket errors, \(dead) dead deliveries", failures == 0 && dead == 0)
            try plain.stop()
            try hooked.stop()
        } catch {
            plain.kill()
            hooked.kill()
            throw error
        }
        let with = median(perCPU["hooked"] ?? []), without = median(perCPU["plain"] ?? [])
        result.figures.append(Figure(
            name: "durable grants per server CPU-second, one webhook", value: with,
            baselineName: "the same, no webhook", baselineValue: without, goal: 0.83,
            details: [
                String(format: "kakin serve CPU per grant %.0f µs with one webhook (its event delivered), %.0f µs without: %+.0f %% (goal ≤ +20 %%, i.e. ratio ≥ 0.83×)",
                       1e6 / with, 1e6 / without, (without / with - 1) * 100),
                "with: \(BenchResult.rates(perCPU["hooked"] ?? [])); without: \(BenchResult.rates(perCPU["plain"] ?? [])) "
                    + "(\(options.loadSeconds) s of wrk each, two servers, one right after the other)",
                (work["hooked"] ?? []).total.perRequest(grants["hooked"] ?? 0, "grant with its event delivered"),
                (work["plain"] ?? []).total.perRequest(grants["plain"] ?? 0, "grant, no webhook"),
                "CPU counted until the endpoint's backlog was 0 (the last event delivered "
                    + drains.map { String(format: "%.1f s", $0) }.joined(separator: ", ") + " after wrk stopped, /metrics polled once a second)",
            ]))
    }
}
