import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import Testing
@testable import KakinServer

#if canImport(Glibc)
    import Glibc
#endif

/// The README's "See events": local mode (`kakin serve`, no config) with a webhook from the environment, and
/// `kakin events listen` printing what arrives — both the binaries this test run built.
@Suite(.serialized) struct LocalModeEvents {
    static let secret = "whsec_readme_0123456789abcdef"

    @Test func theWebhookComesFromTheEnvironmentWithASecretGivenOrGenerated() throws {
        #expect(try LocalWebhook.fromEnvironment([:]) == nil)
        let given = try #require(try LocalWebhook.fromEnvironment(["KAKIN_WEBHOOK_URL": "http://192.168.1.20:9000/hooks",
                                                                   "KAKIN_WEBHOOK_SECRET": "\(Self.secret),whsec_old_0123456789abcdef"]))
        #expect(given.url == "http://192.168.1.20:9000/hooks" && given.secret == Self.secret && given.secrets.count == 2 && !given.generated)
        #expect(given.listenPort == 9000 && given.endpoint.id == "local" && given.endpoint.types == .all)
        let generated = try #require(try LocalWebhook.fromEnvironment(["KAKIN_WEBHOOK_URL": "http://127.0.0.1:9100/"]))
        #expect(generated.generated && generated.secret.hasPrefix("whsec_") && generated.secret.utf8.count == 54)
        #expect(try LocalWebhook.fromEnvironment(["KAKIN_WEBHOOK_URL": "http://127.0.0.1/"])?.secret != generated.secret)
        #expect(throws: ConfigurationError("KAKIN_WEBHOOK_URL", "must be an absolute http:// or https:// URL")) {
            try LocalWebhook.fromEnvironment(["KAKIN_WEBHOOK_URL": "ftp://example.com/"])
        }
        #expect(throws: ConfigurationError("KAKIN_WEBHOOK_SECRET", "each secret must be 16 to 1024 bytes")) {
            try LocalWebhook.fromEnvironment(["KAKIN_WEBHOOK_URL": "http://127.0.0.1:9000/", "KAKIN_WEBHOOK_SECRET": "short"])
        }

        var config = LocalMode.configuration()
        _ = try LocalWebhook.apply(to: &config, environment: ["KAKIN_WEBHOOK_URL": "http://127.0.0.1:9000/", "KAKIN_WEBHOOK_SECRET": Self.secret])
        #expect(config.events?.webhooks.map(\.url) == ["http://127.0.0.1:9000/"])
        // The startup text says how to listen, with the secret to check (the generated one too).
        let text = LocalWebhook.banner(generated, base: "http://127.0.0.1:8080")
        #expect(text.contains("kakin events listen --port 9100 --secret \(generated.secret)") && text.contains("generated for this run"))
        let none = LocalWebhook.banner(nil, base: "http://127.0.0.1:8080")
        #expect(none.contains("kakin events listen --port 9000 --secret \(LocalWebhook.suggestedSecret)"))
        #expect(none.contains("KAKIN_WEBHOOK_URL=http://127.0.0.1:9000/ KAKIN_WEBHOOK_SECRET=\(LocalWebhook.suggestedSecret)"))
    }

    func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-local-events-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Waits until `file` holds `marker` followed by a port number and answers that port.
    func port(in file: URL, after marker: String, child: ChildProcess) async throws -> Int {
        for _ in 0..<3_000 {
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            if let range = text.range(of: marker) {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits), !digits.isEmpty, text[range.upperBound...].dropFirst(digits.count).first != nil { return port }
            }
            guard child.isRunning else { throw ProcessFailure(description: "exited early: \(text.suffix(800))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessFailure(description: "no \(marker)… in \(file.lastPathComponent)")
    }

    static func call(_ base: String, _ method: String, _ path: String, json: JSONValue? = nil,
                     headers: [String: String] = [:]) async throws -> TestKakin.Response {
        var req = URLRequest(url: URL(string: base + path)!)
        req.httpMethod = method
        if let json {
            req.httpBody = Data(json.serialized())
            req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (k, v) in headers { req.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await TestKakin.session.data(for: req)
        return TestKakin.Response(status: (response as! HTTPURLResponse).statusCode, headers: [:], body: [UInt8](data))
    }

    /// The README's local-mode flow with the "See events" part: the listener prints the events of a coin purchase, a
    /// spend and a subscription renewal, each once, signatures checked, each customer's in sequence order — the same
    /// events the feed answers.
    @Test func followingTheReadmeTheListenerPrintsAPurchaseASpendAndARenewal() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let binary = try KakinProcesses.binary.path
        let listenOut = dir.appendingPathComponent("listen.out"), listenErr = dir.appendingPathComponent("listen.err")
        let listen = try ChildProcess.spawn(binary, ["events", "listen", "--port", "0", "--secret", Self.secret], output: listenOut.path, errors: listenErr.path)
        defer { listen.signal(SIGKILL) }
        let listenPort = try await port(in: listenErr, after: "http://127.0.0.1:", child: listen)

        let serveOut = dir.appendingPathComponent("serve.out")
        let serve = try ChildProcess.spawn(binary, ["serve", "--port", "0", "--database", "sqlite:" + dir.appendingPathComponent("kakin.db").path],
                                           output: serveOut.path, errors: dir.appendingPathComponent("serve.err").path,
                                           environment: ["KAKIN_WEBHOOK_URL": "http://127.0.0.1:\(listenPort)/", "KAKIN_WEBHOOK_SECRET": Self.secret])
        defer { serve.signal(SIGKILL) }
        let kakinPort = try await port(in: serveOut, after: "Kakin is running in local mode on http://127.0.0.1:", child: serve)
        let B = "http://127.0.0.1:\(kakinPort)"
        let banner = try String(contentsOf: serveOut, encoding: .utf8)
        #expect(banner.contains("kakin events listen --port \(listenPort) --secret \(Self.secret)"), "\(banner)")

        // The README's commands, in order.
        let T = try #require(try await Self.call(B, "GET", "/v1/customers/u1").json["appAccountToken"]?.stringValue)
        let coins = try await Self.call(B, "POST", "/simulator/v1/purchases", json: ["productId": "coins.500", "appAccountToken": .string(T)])
        let jws = try #require(coins.json["signedTransaction"]?.stringValue)
        let handed = try await Self.call(B, "POST", "/v1/customers/u1/transactions", json: ["signedTransaction": .string(jws)])
        #expect(handed.status == 201 || handed.status == 409)
        let spend = try await Self.call(B, "POST", "/v1/customers/u1/wallet/spend", json: ["amount": 120, "item": "stamp.heart", "recipient": "program:1"],
                                        headers: ["Idempotency-Key": "stamp-1"])
        #expect(spend.status == 201)
        _ = try await Self.call(B, "POST", "/simulator/v1/purchases", json: ["productId": "premium.monthly", "appAccountToken": .string(T)])
        _ = try await Self.call(B, "POST", "/simulator/v1/clock", json: ["advanceSeconds": 3_024_000])
        let status = try await Self.call(B, "GET", "/v1/customers/u1").json
        #expect(status["status"] == "active")
        let version = try #require(status["version"]?.int64Value)

        // Every event of u1 arrives at the listener: 1…version.
        func printed() -> [JSONValue] {
            ((try? String(contentsOf: listenOut, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        }
        var lines: [JSONValue] = []
        for _ in 0..<1_500 {
            lines = printed()
            if lines.filter({ $0["customerId"] == "u1" }).count >= Int(version) { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        let mine = lines.filter { $0["customerId"] == "u1" }
        #expect(mine.map { $0["sequence"]?.int64Value ?? 0 } == Array(1...version))
        let types = mine.compactMap { $0["type"]?.stringValue }
        for expected in ["customer.created", "coins.credited", "coins.spent", "subscription.started", "entitlement.granted", "subscription.renewed"] {
            #expect(types.contains(expected), "\(expected) in \(types)")
        }
        #expect(types.filter { $0 == "coins.credited" }.count == 1, "the purchase is credited once (the app's POST and the notification)")
        let credited = try #require(mine.first { $0["type"] == "coins.credited" })
        #expect(credited["bundleId"]?.stringValue == Catalog.demoBundleId && credited["environment"] == "Sandbox")
        #expect(mine.last?["data"]?["customer"]?["version"]?.int64Value == version)
        // The feed holds the same events.
        let feed = try await Self.call(B, "GET", "/v1/events?limit=500").json["events"]?.arrayValue ?? []
        #expect(feed.compactMap { $0["id"]?.stringValue } == mine.compactMap { $0["id"]?.stringValue })
        #expect(lines.count == mine.count)

        serve.signal(SIGTERM)
        #expect(await serve.exit() == 0)
        listen.signal(SIGTERM)
        #expect(await listen.exit() == 0)
        let summary = try String(contentsOf: listenErr, encoding: .utf8)
        #expect(summary.contains("\(lines.count) events printed") && summary.contains(" 0 refused"), "\(summary)")
    }

    @Test func localModeRefusesAWebhookItCannotUse() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let err = dir.appendingPathComponent("serve.err")
        let serve = try ChildProcess.spawn(try KakinProcesses.binary.path, ["serve", "--port", "0", "--database", "sqlite:" + dir.appendingPathComponent("k.db").path],
                                           errors: err.path, environment: ["KAKIN_WEBHOOK_URL": "ftp://127.0.0.1/"])
        #expect(await serve.exit() == 2)
        #expect(try String(contentsOf: err, encoding: .utf8).contains("KAKIN_WEBHOOK_URL: must be an absolute http:// or https:// URL"))
    }
}
