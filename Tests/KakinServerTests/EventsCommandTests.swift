import Foundation
import KakinCore
import KakinEvents
import KakinSQLite
import KakinStorage
import KakinSystem
import Synchronization
import Testing
@testable import KakinServer

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct EventsConfiguration {
    static let app = #"{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]}"#
    static let env = ["KAKIN_WEBHOOK_SECRET": "whsec_new_0123456789abcdef,whsec_old_0123456789abcdef"]

    func parse(_ events: String, env: [String: String] = Self.env) throws -> Configuration {
        try Configuration.parse(try JSONParser.parse(#"{"apps": [\#(Self.app)], "events": \#(events)}"#), baseDirectory: "/tmp", environment: env)
    }

    func error(_ events: String, env: [String: String] = Self.env) -> String {
        do {
            _ = try parse(events, env: env)
            return "no error"
        } catch {
            return "\(error)"
        }
    }

    @Test func theContractsEventsSectionParses() throws {
        let c = try parse(#"""
            {"webhooks": [{"id": "backend", "url": "https://backend.example.com/hooks/kakin", "secretEnv": "KAKIN_WEBHOOK_SECRET", "types": ["*"]},
                          {"id": "crm", "url": "http://127.0.0.1:9000/", "secretEnv": "KAKIN_WEBHOOK_SECRET", "types": ["subscription.*", "coins.spent"]}],
             "retentionDays": 45}
            """#)
        let events = try #require(c.events)
        #expect(events.retentionDays == 45)
        #expect(events.webhooks.map(\.id) == ["backend", "crm"])
        #expect(events.webhooks[0].secrets.count == 2 && events.webhooks[0].types == .all)
        #expect(events.webhooks[1].types.admits(.subscriptionRenewed) && events.webhooks[1].types.admits(.coinsSpent))
        #expect(!events.webhooks[1].types.admits(.coinsCredited))
        // Without types: every type; without retentionDays: 30.
        let plain = try #require(try parse(#"{"webhooks": [{"id": "b", "url": "https://b.example/h", "secretEnv": "KAKIN_WEBHOOK_SECRET"}]}"#).events)
        #expect(plain.retentionDays == 30 && plain.webhooks[0].types == .all)
    }

    @Test func deliveryTuningIsAnOptionalAddition() throws {
        let ok = #"{"webhooks": [{"id": "b", "url": "https://b.example/h", "secretEnv": "KAKIN_WEBHOOK_SECRET"}]"#
        #expect(try #require(try parse(ok + "}").events).delivery == nil)
        let tuned = try #require(try parse(ok + #", "delivery": {"timeoutMs": 300, "leaseMs": 1500, "retryFirstDelayMs": 10, "retryMaxDelayMs": 200, "#
                                             + #""retryWindowHours": 1, "concurrencyPerEndpoint": 2, "pollIntervalMs": 20}}"#).events?.delivery)
        var options = WebhookDeliveryWorker.Options()
        tuned.apply(to: &options)
        #expect(options.timeoutMs == 300 && options.leaseMs == 1_500 && options.concurrencyPerEndpoint == 2 && options.pollIntervalMs == 20)
        #expect(options.schedule == RetrySchedule(firstDelayMs: 10, delayMaxMs: 200, windowMs: 3_600_000))
        #expect(error(ok + #", "delivery": {"timeoutMs": 5000, "leaseMs": 4000}}"#) == "events.delivery: leaseMs must be longer than timeoutMs (5000)")
        #expect(error(ok + #", "delivery": {"timeoutMs": 5}}"#) == "events.delivery.timeoutMs: must be between 100 and 60000")
        #expect(error(ok + #", "delivery": {"timeout": 5}}"#) == "events.delivery.timeout: unknown key")
    }

    @Test func everyEventsErrorIsOneLineNamingTheKey() {
        let ok = #""id": "b", "url": "https://b.example/h", "secretEnv": "KAKIN_WEBHOOK_SECRET""#
        #expect(error(#"{"webhooks": [], "colour": 1}"#) == "events.colour: unknown key")
        #expect(error(#"{"retentionDays": 0}"#) == "events.retentionDays: must be between 1 and 3650")
        #expect(error(#"{"webhooks": [{\#(ok), "secret": "x"}]}"#) == "events.webhooks[0].secret: unknown key")
        #expect(error(#"{"webhooks": [{"id": "b", "url": "http://b.example/h", "secretEnv": "KAKIN_WEBHOOK_SECRET"}]}"#)
                == "events.webhooks[0].url: must be https:// (http:// only for a loopback host or in local mode)")
        #expect(error(#"{"webhooks": [{"id": "a b", "url": "https://b.example/h", "secretEnv": "KAKIN_WEBHOOK_SECRET"}]}"#).hasPrefix("events.webhooks[0].id: "))
        #expect(error(#"{"webhooks": [{\#(ok)}, {\#(ok)}]}"#) == "events.webhooks[1].id: duplicates another webhook's id")
        #expect(error(#"{"webhooks": [{"id": "b", "url": "https://b.example/h", "secretEnv": "NOPE"}]}"#)
                == "events.webhooks[0].secretEnv: environment variable NOPE is not set")
        #expect(error(#"{"webhooks": [{\#(ok)}]}"#, env: ["KAKIN_WEBHOOK_SECRET": "short"])
                == "events.webhooks[0].secretEnv: environment variable KAKIN_WEBHOOK_SECRET each secret must be 16 to 1024 bytes")
        #expect(error(#"{"webhooks": [{\#(ok), "types": ["coins.spent", "coins.spend"]}]}"#)
                == "events.webhooks[0].types[1]: coins.spend is not an event type (exact names, a prefix ending in .*, or *)")
        #expect(error(#"{"webhooks": [{\#(ok), "types": []}]}"#) == #"events.webhooks[0].types: must list at least one event type (or "*")"#)
        #expect(error(#"{"webhooks": [{\#(ok), "types": ["wallet.*"]}]}"#) == "events.webhooks[0].types[0]: wallet.* matches no event type")
    }
}

@Suite(.serialized) struct EventsCommands {
    static let secret = "whsec_cli_0123456789abcdef"

    /// Runs the built `kakin` with `arguments`; its exit code, standard output and standard error.
    func kakin(_ arguments: [String], in directory: URL, environment: [String: String] = [:]) async throws -> (status: Int32, out: String, err: String) {
        let out = directory.appendingPathComponent("out-\(UUID().uuidString)"), err = directory.appendingPathComponent("err-\(UUID().uuidString)")
        let child = try ChildProcess.spawn(try KakinProcesses.binary.path, arguments, output: out.path, errors: err.path, environment: environment)
        let status = await child.exit()
        return (status, (try? String(contentsOf: out, encoding: .utf8)) ?? "", (try? String(contentsOf: err, encoding: .utf8)) ?? "")
    }

    func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-events-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test func listenChecksSignaturesAndPrintsEachEventOnce() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("listen.out"), err = dir.appendingPathComponent("listen.err")
        let child = try ChildProcess.spawn(try KakinProcesses.binary.path, ["events", "listen", "--port", "0", "--secret", Self.secret],
                                           output: out.path, errors: err.path)
        var port: Int?
        // A process starting on a loaded machine: a generous deadline.
        _ = try await eventually(timeoutSeconds: 60) {
            let text = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
            if let range = text.range(of: "http://127.0.0.1:"), let end = text[range.upperBound...].firstIndex(of: "/") {
                port = Int(text[range.upperBound..<end])
            }
            return port != nil || !child.isRunning
        }
        let listening = try #require(port)
        let endpoint = WebhookEndpoint(id: "backend", url: "http://127.0.0.1:\(listening)/hooks", secrets: [Array(Self.secret.utf8)])
        let sender = HTTPWebhookSender()
        let now = Int64(Date().timeIntervalSince1970)
        let event = #"{"customerId":"u1","id":"evt_1","sequence":1,"type":"coins.credited"}"#
        let first = await sender.send(WebhookRequest(endpoint: endpoint, eventId: "evt_1", payload: event, nowSeconds: now, timeoutMs: 5_000))
        let again = await sender.send(WebhookRequest(endpoint: endpoint, eventId: "evt_1", payload: event, nowSeconds: now, timeoutMs: 5_000))
        let stranger = WebhookEndpoint(id: "x", url: endpoint.url, secrets: [Array("whsec_someone_else_0123456".utf8)])
        let forged = await sender.send(WebhookRequest(endpoint: stranger, eventId: "evt_2", payload: event, nowSeconds: now, timeoutMs: 5_000))
        child.signal(SIGTERM)
        #expect(await child.exit() == 0)
        #expect(first.isDelivered && again.isDelivered)
        guard case .answered(400, _) = forged else { Issue.record("forged: \(forged)"); return }
        #expect(try String(contentsOf: out, encoding: .utf8) == event + "\n")
        #expect(try String(contentsOf: err, encoding: .utf8).contains("1 events printed, 1 redeliveries, 0 failed on purpose, 1 refused"))
    }

    @Test func listenRefusesBadFlags() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(try await kakin(["events", "listen", "--port", "0"], in: dir).status == 2)
        #expect(try await kakin(["events", "listen", "--port", "0", "--secret", "short"], in: dir).status == 2)
        #expect(try await kakin(["events", "listen", "--port", "0", "--secret", Self.secret, "--fail-rate", "1.5"], in: dir).status == 2)
        #expect(try await kakin(["events", "wat"], in: dir).status == 2)
    }

    @Test func replayQueuesAnEndpointsEventsAgainAgainstTheDatabase() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        // The secret goes in the children's environment, never `setenv` here: the test process runs other tests' children
        // at the same time, and `setenv` moving `environ` under a concurrent `Process.run()` crashed the suite once.
        let env = ["KAKIN_TEST_REPLAY_SECRET": Self.secret]
        let database = dir.appendingPathComponent("kakin.db").path
        let config = dir.appendingPathComponent("kakin.json")
        try Data(#"""
            {"database": "sqlite:\#(database)", "apps": [\#(EventsConfiguration.app)],
             "events": {"webhooks": [{"id": "backend", "url": "https://backend.example.com/h", "secretEnv": "KAKIN_TEST_REPLAY_SECRET", "types": ["coins.*"]}]}}
            """#.utf8).write(to: config)
        let db = try SQLiteDatabase(path: database)
        let store = KakinStore(database: db, ids: RandomIDGenerator(), clock: SystemClock())
        try await store.migrate()
        let events = try await db.write { conn in
            try EventOutbox.append(conn, customerId: "u1", drafts: [EventDraft(type: .coinsCredited), EventDraft(type: .subscriptionStarted),
                                                                  EventDraft(type: .coinsSpent)],
                                   customerStatus: ["customerId": "u1"], nowMs: 1_790_000_000_000, ids: RandomIDGenerator())
        }
        await db.close()

        let since = try await kakin(["events", "replay", "--config", config.path, "--webhook", "backend", "--since", "2026-09-21T00:00:00Z"], in: dir, environment: env)
        #expect(since.status == 0, "\(since.err)")
        #expect(since.out == #"{"queued": 2}"# + "\n")
        let named = try await kakin(["events", "replay", "--config", config.path, "--webhook", "backend", "--event", events[2].id, "--event", "evt_gone"], in: dir, environment: env)
        #expect(named.out == #"{"queued": 1}"# + "\n")
        #expect(try await kakin(["events", "replay", "--config", config.path, "--webhook", "nope", "--since", "2026-09-21T00:00:00Z"], in: dir, environment: env).status == 2)
        #expect(try await kakin(["events", "replay", "--config", config.path, "--webhook", "backend", "--since", "2026-09-21T00:00:00Z",
                                 "--event", "evt_1"], in: dir, environment: env).status == 2)
        #expect(try await kakin(["events", "replay", "--config", config.path, "--webhook", "backend", "--since", "yesterday"], in: dir, environment: env).status == 2)

        let check = try SQLiteDatabase(path: database)
        let pending = try await KakinStore(database: check, ids: RandomIDGenerator(), clock: SystemClock())
            .webhookDeliveries(endpointId: "backend", state: .pending, limit: 10)
        await check.close()
        #expect(Set(pending.map(\.eventId)) == [events[0].id, events[2].id])
    }
}
