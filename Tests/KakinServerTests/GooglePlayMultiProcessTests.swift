import Foundation
import GooglePlaySimulator
import HTTPServer
import KakinCore
import KakinPostgreSQL
import KakinStorage
import KakinSystem
import KakinTestPostgres
import Synchronization
import Testing

/// Google Play's exactly-once across processes: two `kakin serve` on one PostgreSQL database, configured with a Play app
/// whose Developer API, token endpoint and push keys are the Play simulator's (on a loopback port, on the real clock the
/// processes run on). The app's POSTs and Play's pushes of one purchase land on both processes at once.
@Suite(.serialized, .postgreSQL) struct GooglePlayMultiProcessTests {
    static let processes = 2
    static let package = "dev.kakin.demo"
    static let audience = "https://kakin.test/v1/notifications/googleplay"

    /// The Play simulator over HTTP: its pushes kept for the test to deliver (answered 200, as Pub/Sub's endpoint would
    /// be), and the acknowledge and consume calls it received counted.
    final class PlayOverHTTP: Sendable {
        struct Push: Sendable {
            var body: [UInt8]
            var authorization: String
        }

        final class Kept: PlayPushSink {
            let pushes = Mutex<[Push]>([])
            func push(body: [UInt8], authorization: String) async -> Int {
                pushes.withLock { $0.append(Push(body: body, authorization: authorization)) }
                return 200
            }
        }

        let simulator: GooglePlaySimulator
        let server: HTTPServer
        let kept: Kept
        let acknowledgements: Tally
        var root: String { "http://127.0.0.1:\(server.port)/play-simulator/" }

        init() throws {
            let kept = Kept()
            self.kept = kept
            let simulator = try GooglePlaySimulator(configuration: .demo(seed: 11), clock: SystemClock(), wall: SystemClock(),
                                                    push: .init(sink: kept, audience: GooglePlayMultiProcessTests.audience))
            self.simulator = simulator
            var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
            configuration.threadCount = 4
            let acknowledgements = Tally()
            self.acknowledgements = acknowledgements
            server = HTTPServer(configuration: configuration, handler: { request in
                if request.path.hasSuffix(":acknowledge") || request.path.hasSuffix(":consume") { acknowledgements.add() }
                return await simulator.handle(request)
            }, rejectionResponder: { rejection, _ in HTTPResponse(status: rejection.suggestedStatus) })
            try server.start()
        }

        /// The `apps[]` entry Kakin is configured with, and the service-account key file it names.
        func app() -> (entry: JSONValue, files: [String: [UInt8]]) {
            let entry: JSONValue = [
                "store": "googlePlay", "packageName": .string(GooglePlayMultiProcessTests.package), "serviceAccountFile": "play.json",
                "apiRoot": .string(root),
                "rtdn": ["audience": .string(GooglePlayMultiProcessTests.audience), "serviceAccountEmail": .string(simulator.pushSettings.serviceAccountEmail),
                         "certsUrl": .string(root + "oauth2/v3/certs")],
                "products": [["productId": "coins_500", "type": "consumable", "coins": 500, "bonusCoins": 50]],
            ]
            return (entry, ["play.json": simulator.serviceAccountFile(tokenURI: root + "token")])
        }

        func control(_ method: String, _ path: String, _ body: JSONValue) async throws -> JSONValue {
            let response = await simulator.handle(HTTPRequest(method: method, path: "/play-simulator" + path, body: body.serialized(), requestId: "req_test"))
            try #require((200...299).contains(response.status), "\(String(decoding: response.body, as: UTF8.self))")
            return try JSONParser.parse(response.body)
        }

        func stop() async { await server.shutdown(gracePeriodSeconds: 0) }
    }

    @Test func theSameTokenSent64TimesAtOnceAndByRTDNTwiceAcrossTwoProcessesCreditsAndAcknowledgesOnce() async throws {
        let play = try PlayOverHTTP()
        defer { Task { await play.stop() } }
        let (entry, files) = play.app()
        try await KakinProcesses.with(Self.processes, apps: [entry], files: files) { k in
            let account = try #require(try await k.request(0, "GET", "/v1/customers/u1").json["appAccountToken"]?.stringValue)
            let bought = try await play.control("POST", "/v1/purchases", ["productId": "coins_500", "obfuscatedAccountId": .string(account)])
            let token = try #require(bought["purchaseToken"]?.stringValue), order = try #require(bought["orderId"]?.stringValue)
            _ = try await eventually(timeoutSeconds: 60) { !play.kept.pushes.withLock { $0.isEmpty } }
            let push = try #require(play.kept.pushes.withLock { $0.first })
            // The same notification under another message id (Play published it twice), besides Pub/Sub's redelivery.
            var again = try JSONParser.parse(push.body)
            if case .object(var o) = again, case .object(var m) = o["message"] {
                m["messageId"] = "another-message"
                o["message"] = .object(m)
                again = .object(o)
            }
            let deliveries: [(process: Int, body: JSONValue)] = [(0, try JSONParser.parse(push.body)), (1, try JSONParser.parse(push.body)), (1, again)]

            // 64 POSTs of the app and the pushes, all at once, spread over both processes.
            let answers = try await withThrowingTaskGroup(of: (String, Int).self) { group in
                for n in 0..<64 {
                    group.addTask {
                        let r = try await k.request(n % Self.processes, "POST", "/v1/customers/u1/transactions",
                                                    json: ["store": "googlePlay", "packageName": .string(Self.package), "productId": "coins_500",
                                                           "purchaseToken": .string(token)])
                        return ("app", r.status)
                    }
                }
                for d in deliveries {
                    group.addTask {
                        let r = try await k.request(d.process, "POST", "/v1/notifications/googleplay", json: d.body,
                                                    headers: ["Authorization": push.authorization])
                        if r.status != 200 { Issue.record("push to process \(d.process): \(r.status) \(String(decoding: r.body, as: UTF8.self))") }
                        return ("push", r.status)
                    }
                }
                return try await group.reduce(into: [String: [Int]]()) { $0[$1.0, default: []].append($1.1) }
            }
            let app = answers["app"] ?? []
            // One 201 unless a push was applied first (then none): every other answer is 409 with the same grant.
            #expect(app.count == 64 && app.filter { $0 == 201 }.count <= 1 && app.allSatisfy { $0 == 201 || $0 == 409 }, "\(app.sorted())")
            #expect(answers["push"] == [200, 200, 200], "\(answers["push"] ?? [])")

            let database = try PostgresDatabase(url: k.schema.url, options: .init(writerConnections: 1, readerConnections: 1))
            defer { Task { await database.close() } }
            func counts() async throws -> SQLRow? {
                try await database.read { db in
                    try db.queryOne("""
                        SELECT (SELECT COUNT(*) FROM play_notifications) AS stored,
                               (SELECT COUNT(*) FROM play_notifications WHERE state = 'applied') AS applied,
                               (SELECT COUNT(*) FROM ledger_entries WHERE reference = ?) AS credited,
                               (SELECT COUNT(*) FROM play_acknowledgements) AS jobs,
                               (SELECT COUNT(*) FROM play_acknowledgements WHERE state = 'done' AND attempts = 1) AS acknowledged
                        """, .text(order))
                }
            }
            var row: SQLRow?
            // Applied and acknowledged by the processes: a generous deadline on a loaded machine.
            _ = try await eventually(timeoutSeconds: 60) {
                row = try await counts()
                return row?.int("applied") == 2 && row?.int("acknowledged") == 1
            }
            // Two notifications stored (the redelivery is the same message), both applied; one credit; one acknowledgement.
            #expect(row?.int("stored") == 2 && row?.int("applied") == 2, "\(String(describing: row))")
            #expect(row?.int("credited") == 1 && row?.int("jobs") == 1 && row?.int("acknowledged") == 1, "\(String(describing: row))")
            #expect(play.acknowledgements.count == 1, "Play was asked to consume \(play.acknowledgements.count) times")
            let wallet = try await k.request(1, "GET", "/v1/customers/u1/wallet").json
            #expect(wallet["paid"]?.int64Value == 500 && wallet["free"]?.int64Value == 50)
            #expect(try await k.ledgerCheck().status == 0)
            print("Play exactly-once on 2 processes: app \(app.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }), pushes \(answers["push"] ?? []), "
                  + "notifications stored \(row?.int("stored") ?? -1) applied \(row?.int("applied") ?? -1), credits \(row?.int("credited") ?? -1), "
                  + "acknowledgements \(row?.int("acknowledged") ?? -1) done in 1 attempt, consume calls at Play \(play.acknowledgements.count)")
        }
    }
}
