import Foundation
import KakinCore
import Synchronization

/// crash-test: concurrent clients buy coin packs and spend coins against the real `kakin serve`, which is
/// SIGKILLed mid-load and restarted on the same database, round after round. Then:
/// - every acknowledged (201) purchase is in the ledger exactly once, and re-POSTing it answers 409
///   `already_processed`;
/// - every acknowledged spend is in the ledger exactly once (its `spendId` as the reference of one `spend`
///   entry), and replaying its Idempotency-Key answers the same bytes with `Idempotent-Replayed: true`;
/// - operations in flight at the kill are retried, as a client would: each then either had committed
///   (409 / replayed) or had not (applied now), never twice;
/// - no ledger entry exists that no client attempted, each wallet equals the sum of its entries, and the
///   ledger check passes (`GET /v1/admin/ledger/check` each round, `kakin ledger check` at the end).
/// With `--postgres URL`, `--processes` servers (default 2) share one PostgreSQL schema, the clients spread
/// over them; each round one of them (in turn) is SIGKILLed while the others keep serving, then restarted.
struct CrashTest {
    static let customersPerClient = 4
    static let violationsShownMax = 30
    static let ledgerPageEntries = 200
    static let ledgerPagesMax = 10_000

    let workspace: BenchWorkspace
    let options: BenchOptions

    func run() throws -> Bool {
        let config: URL, database: String
        if let cluster = options.postgresURL {
            database = try workspace.postgresSchema("crash", cluster: cluster)
            config = try workspace.writeConfig("crash", database: database)
        } else {
            let sqlite = try workspace.writeConfig("crash")
            (config, database) = (sqlite.config, "sqlite:\(sqlite.database.path)")
        }
        let serverCount = options.postgresURL == nil ? 1 : options.processes
        let log = { (n: Int, index: Int) in workspace.file("crash-serve-\(n)-\(index).log") }
        var servers = try (0..<serverCount).map { try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: log(0, $0)) }
        print("kakin-bench crash-test — \(ISO8601DateFormatter().string(from: Date()))")
        if serverCount == 1 {
            print(String(format: "%d clients buy and spend for %.1f–%d s, then kakin serve is SIGKILLed and restarted on the same database; %d rounds.",
                         options.clients, Double(options.loadSeconds) / 2, options.loadSeconds, options.rounds))
        } else {
            print(String(format: "%d clients buy and spend through %d kakin serve processes on one PostgreSQL database for %.1f–%d s, then one "
                         + "process (in turn) is SIGKILLed while the others keep serving, and restarted; %d rounds.",
                         options.clients, serverCount, Double(options.loadSeconds) / 2, options.loadSeconds, options.rounds))
        }
        var expected = ExpectedLedger()
        var totals = RoundSummary()
        var violations: [String] = []
        let transactionIds = TransactionIDs()
        do {
            for round in 1...options.rounds {
                let loadSeconds = Double.random(in: (Double(options.loadSeconds) / 2)...Double(options.loadSeconds))
                let victim = (round - 1) % serverCount
                guard let operations = load(round: round, ports: servers.map(\.port), transactionIds: transactionIds, servers: servers,
                                            victim: victim, after: loadSeconds) else {
                    let exited = servers.first { !$0.process.isRunning }!
                    violations.append("round \(round): kakin serve exited by itself before the kill (status \(exited.process.terminationStatus)): "
                                      + Subprocess.tail(of: exited.log))
                    break
                }
                servers[victim] = try KakinServerProcess.start(kakin: workspace.kakin, config: config, log: log(round, victim))
                // Settled and checked through another process than the restarted one, when there is one.
                let server = servers[(victim + 1) % serverCount]
                var summary = RoundSummary()
                for settled in settle(operations, port: server.port) {
                    summary.add(settled)
                    violations += settled.violations
                    expected.add(settled.effect)
                }
                let ledger = verifyLedgers(expected, port: server.port)
                violations += ledger.violations
                let checkAnswer = try HTTPConnection(port: server.port).request("GET", "/v1/admin/ledger/check")
                if !(checkAnswer.status == 200 && checkAnswer.json["ok"] == true) {
                    violations.append("round \(round): GET /v1/admin/ledger/check answered \(checkAnswer.status) \(String(decoding: checkAnswer.body, as: UTF8.self))")
                }
                print(String(format: "round %d: %@killed after %.1f s; ", round, serverCount > 1 ? "process \(victim) " : "", loadSeconds) + summary.description
                      + "; after restart: \(ledger.customers) ledgers, \(BenchResult.grouped(ledger.entries)) entries checked, "
                      + "ledger check \(checkAnswer.status == 200 ? "ok" : "FAILED"), violations so far: \(violations.count)")
                totals.merge(summary)
            }
            for server in servers where server.process.isRunning { try server.stop() }
        } catch {
            for server in servers { server.kill() }
            throw error
        }
        let report = try workspace.ledgerCheck(databaseArgument: database)
        if report["ok"] != true { violations.append("kakin ledger check failed: \(report.jsonString)") }

        print("\nSummary: \(totals.description)")
        print("kakin ledger check on the database after a clean stop: \(report["ok"] == true ? "passed" : "FAILED") "
              + "(\(report["customers"]?.intValue ?? 0) customers, \(BenchResult.grouped(report["entries"]?.intValue ?? 0)) entries)")
        if violations.isEmpty {
            print("crash-test PASSED: every acknowledged operation is in the ledger exactly once, nothing doubled, nothing invented.")
            return true
        }
        print("crash-test FAILED: \(violations.count) violations")
        for violation in violations.prefix(Self.violationsShownMax) { print("  \(violation)") }
        return false
    }

    // MARK: Load, then SIGKILL

    /// Runs the clients (client N against `ports[N % count]`) and SIGKILLs `servers[victim]` after `seconds`,
    /// then stops the clients; every operation they attempted, or nil when a server had exited by itself.
    func load(round: Int, ports: [Int], transactionIds: TransactionIDs, servers: [KakinServerProcess], victim: Int,
              after seconds: Double) -> [CrashOperation]? {
        let stop = StopFlag()
        let collected = Collected<CrashOperation>()
        let appStore = workspace.appStore
        let clients = startThreads(options.clients) { client in
            collected.append(contentsOf: CrashClient(client: client, round: round, port: ports[client % ports.count], appStore: appStore,
                                                     transactionIds: transactionIds).run(until: stop))
        }
        Thread.sleep(forTimeInterval: seconds)
        let exitedByItself = servers.contains { !$0.process.isRunning }
        servers[victim].kill()
        // The other processes' clients go on a little while the victim's see their requests cut off.
        if servers.count > 1 { Thread.sleep(forTimeInterval: 0.5) }
        stop.set()
        clients.wait()
        return exitedByItself ? nil : collected.all
    }

    // MARK: After the restart

    /// Replays or retries every operation on `clients` threads; what each proved.
    func settle(_ operations: [CrashOperation], port: Int) -> [Settled] {
        let settled = Collected<Settled>()
        let threads = options.clients
        startThreads(threads) { worker in
            let connection = HTTPConnection(port: port)
            for index in stride(from: worker, to: operations.count, by: threads) {
                settled.append(contentsOf: [operations[index].settle(connection)])
            }
        }.wait()
        return settled.all
    }

    /// Each customer's whole ledger, paged with its cursor, against what the settled operations say it holds.
    func verifyLedgers(_ expected: ExpectedLedger, port: Int) -> (customers: Int, entries: Int, violations: [String]) {
        let connection = HTTPConnection(port: port)
        var violations: [String] = []
        var entryCount = 0
        for customer in expected.customers {
            do {
                let entries = try ledgerEntries(customer, connection)
                entryCount += entries.count
                violations += expected.compare(customer: customer, entries: entries)
                let wallet = try connection.request("GET", "/v1/customers/\(customer)/wallet").json
                let paid = entries.reduce(0) { $0 + $1.paid }, free = entries.reduce(0) { $0 + $1.free }
                if wallet["paid"]?.int64Value != paid || wallet["free"]?.int64Value != free {
                    violations.append("\(customer): wallet \(wallet.jsonString) but its ledger entries sum to paid \(paid), free \(free)")
                }
            } catch {
                violations.append("\(customer): could not read the ledger: \(error)")
            }
        }
        return (expected.customers.count, entryCount, violations)
    }

    func ledgerEntries(_ customer: String, _ connection: HTTPConnection) throws -> [LedgerEntryRead] {
        var entries: [LedgerEntryRead] = []
        var cursor: String? = nil
        for _ in 0..<Self.ledgerPagesMax {
            let path = "/v1/customers/\(customer)/wallet/ledger?limit=\(Self.ledgerPageEntries)" + (cursor.map { "&cursor=\($0)" } ?? "")
            let answer = try connection.request("GET", path)
            guard answer.status == 200, let page = answer.json["entries"]?.arrayValue else {
                throw HTTPTransportError(description: "ledger page answered \(answer.status)")
            }
            entries += page.map { LedgerEntryRead(kind: $0["kind"]?.stringValue ?? "", reference: $0["reference"]?.stringValue ?? "",
                                                  paid: $0["paid"]?.int64Value ?? 0, free: $0["free"]?.int64Value ?? 0) }
            cursor = answer.json["nextCursor"]?.stringValue
            if cursor == nil { return entries }
        }
        throw HTTPTransportError(description: "the ledger has more than \(Self.ledgerPagesMax) pages")
    }
}

/// Apple-shaped transaction ids, unique across the clients and rounds of a run.
final class TransactionIDs: Sendable {
    private let last = Atomic<Int64>(2_000_000_000_000_000)
    func next() -> String { String(last.add(1, ordering: .relaxed).newValue) }
}

struct LedgerEntryRead {
    var kind: String
    var reference: String
    var paid: Int64
    var free: Int64
}
