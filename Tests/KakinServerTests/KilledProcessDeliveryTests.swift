import Foundation
import KakinCore
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinServer

#if canImport(Glibc)
    import Glibc
#endif

/// The built `kakin serve` delivering webhooks is SIGKILLed while requests to the receiver are in flight, and started
/// again on the same database: what it was sending is sent again (its claims come back when their lease runs out),
/// every event arrives, is processed once (deduplicated by id) and in `sequence` order per customer. On PostgreSQL three
/// processes deliver side by side and one of them is killed. The receiver fails 30 % (seeded) and holds a fifth of
/// first attempts past the deadline; `events.delivery` shortens the deadline, retries and lease for the test.
@Suite(.serialized) struct KilledProcessDelivery {
    static let secret = "whsec_killed_0123456789abcdef"
    static let secretVariable = "KAKIN_TEST_KILLED_SECRET"

    @Test(.timeLimit(.minutes(3)), arguments: Backend.available)
    func whatAKilledProcessWasSendingArrivesAfterItsRestart(_ backend: Backend) async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-killed-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        switch backend {
        case .sqlite: try await run(database: "sqlite:" + dir.appendingPathComponent("kakin.db").path, processes: 1, in: dir)
        case .postgresql: try await TestPostgres.withSchema { schema in try await run(database: schema.url, processes: 3, in: dir) }
        }
    }

    /// Customer chains (each with its oldest undone delivery) claimed by the `kakin serve` of process `pid` (its claims
    /// are named host/pid/suffix).
    static func deliveriesHeld(by pid: pid_t, database: String) async throws -> Int {
        let db: any SQLDatabase = database.hasPrefix("sqlite:") ? try SQLiteDatabase(path: String(database.dropFirst(7)))
            : try PostgresDatabase(url: database, options: .init(writerConnections: 1, readerConnections: 1))
        do {
            let n = try await db.read { c in
                try c.queryOne("SELECT COUNT(*) AS n FROM webhook_chains WHERE claimed_by LIKE ?", [.text("%/\(pid)/%")])?.int("n") ?? 0
            }
            await db.close()
            return Int(n)
        } catch {
            await db.close()
            throw error
        }
    }

    final class Server {
        var child: ChildProcess
        var port = 0
        init(_ child: ChildProcess) { self.child = child }
    }

    func launch(config: URL, in dir: URL) async throws -> Server {
        let log = dir.appendingPathComponent("serve-\(UUID().uuidString.prefix(6)).log")
        let server = Server(try ChildProcess.spawn(try KakinProcesses.binary.path, ["serve", "--config", config.path], errors: log.path,
                                                   environment: [Self.secretVariable: Self.secret]))
        for _ in 0..<3_000 {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.contains("kakin listening") {
                if let url = (try? JSONParser.parse(String(line)))?["http.url"]?.stringValue, let colon = url.lastIndex(of: ":"),
                   let port = Int(url[url.index(after: colon)...]) {
                    server.port = port
                    return server
                }
            }
            guard server.child.isRunning else { throw ProcessFailure(description: "kakin serve exited: \(text.suffix(800))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        server.child.signal(SIGKILL)
        throw ProcessFailure(description: "kakin serve did not start")
    }

    func run(database: String, processes count: Int, in dir: URL) async throws {
        let receiver = try WebhookReceiver(secret: Self.secret, failRate: 0.3, seed: 99, faults: WebhookReceiver.Faults(hangShare: 0.2, hangMs: 800))
        defer { Task { await receiver.stop() } }
        let config = dir.appendingPathComponent("kakin.json")
        let json: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string(database),
            "apps": [["bundleId": "com.example.kakin.tests", "environments": ["Sandbox"], "products": [
                ["productId": "coins.100", "type": "consumable", "coins": 100, "price": 120, "currency": "JPY"],
            ]]],
            "events": [
                "webhooks": [["id": "backend", "url": .string(receiver.url), "secretEnv": .string(Self.secretVariable)]],
                "delivery": ["timeoutMs": 300, "leaseMs": 1_500, "retryFirstDelayMs": 10, "retryMaxDelayMs": 200, "pollIntervalMs": 20],
            ],
        ]
        try Data(json.serialized(pretty: true)).write(to: config)
        var servers: [Server] = []
        // Started one after another: the first registers the endpoint's cursor before any event is written.
        for _ in 0..<count { servers.append(try await launch(config: config, in: dir)) }
        defer { for s in servers { s.child.signal(SIGKILL) } }

        let customers = (1...8).map { "k\($0)" }
        var inFlightAtKill = 0, heldByKilled = 0
        let faults = WebhookReceiver.Faults(hangShare: 0.2, hangMs: 800)
        for round in 0..<6 {
            // From round 2 until the kill every attempt is held (3 s, past the deadline), so deliveries stay in flight.
            if round == 2 { receiver.setFaults(.init(hangShare: 1, hangMs: 3_000, hangEveryAttempt: true)) }
            for (i, c) in customers.enumerated() {
                let base = "http://127.0.0.1:\(servers[(i + round) % servers.count].port)"
                let r = try await LocalModeEvents.call(base, "POST", "/v1/customers/\(c)/wallet/grants", json: ["amount": 5, "reason": "day"],
                                                       headers: ["Idempotency-Key": "r\(round)-\(c)"])
                #expect(r.status == 201)
            }
            if round == 2 {
                // SIGKILL a process holding a claim on an undone delivery (one it is sending: claims are named by process
                // id, read from the database) while the receiver holds requests, then start it again.
                var victim = 0
                search: for _ in 0..<1_200 {
                    for (i, server) in servers.enumerated() {
                        // The figures the test asserts are the ones that ended the search (a request held 3 s may end before a
                        // second reading).
                        heldByKilled = try await Self.deliveriesHeld(by: server.child.pid, database: database)
                        inFlightAtKill = receiver.inFlight
                        if heldByKilled > 0, inFlightAtKill > 0 {
                            victim = i
                            break search
                        }
                    }
                    try await Task.sleep(for: .milliseconds(25))
                }
                servers[victim].child.signal(SIGKILL)
                #expect(await servers[victim].child.exit() == 128 + SIGKILL)
                receiver.setFaults(faults)
                servers[victim] = try await launch(config: config, in: dir)
            }
        }

        // The feed (from any process); every event of it reaches the receiver.
        // (On PostgreSQL an event enters the feed once every older write transaction on the cluster has ended: read on
        // until the last grant's is there.)
        var feed: [JSONValue] = []
        var after = ""
        for _ in 0..<600 where feed.count < customers.count * 7 {
            let page = try await LocalModeEvents.call("http://127.0.0.1:\(servers[0].port)", "GET", "/v1/events?limit=500" + (after.isEmpty ? "" : "&after=\(after)"))
            let list = page.json["events"]?.arrayValue ?? []
            feed += list
            after = page.json["nextCursor"]?.stringValue ?? after
            if list.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        let feedIds = Set(feed.compactMap { $0["id"]?.stringValue })
        #expect(feedIds.count == customers.count * 7, "created + 6 grants each")
        let arrived = try await receiver.wait(timeoutSeconds: 60) { Set($0.compactMap { $0["id"]?.stringValue }).isSuperset(of: feedIds) }
        for s in servers { s.child.signal(SIGTERM) }
        for s in servers { _ = await s.child.exit() }
        #expect(arrived)
        #expect(heldByKilled > 0 && inFlightAtKill > 0, "the process was killed in the middle of a delivery")

        let printed = receiver.printedEvents
        let ids = printed.compactMap { $0["id"]?.stringValue }
        #expect(ids.count == Set(ids).count && Set(ids) == feedIds, "each event processed once, none missing")
        for c in customers {
            #expect(printed.filter { $0["customerId"]?.stringValue == c }.map { $0["sequence"]?.int64Value ?? 0 } == Array(1...7), "\(c) in order")
        }
        #expect(receiver.listener.counts.failed > 0 && receiver.hangs > 0 && receiver.listener.counts.rejected == 0)
        print("killed process: \(count) processes, \(feedIds.count) events, \(receiver.requests) requests, \(receiver.listener.counts.failed) failed on purpose, "
              + "\(receiver.hangs) held past the deadline, \(receiver.listener.counts.duplicates) redeliveries deduplicated, "
              + "\(inFlightAtKill) requests in flight when SIGKILLed, \(heldByKilled) of the killed process's")
    }
}
