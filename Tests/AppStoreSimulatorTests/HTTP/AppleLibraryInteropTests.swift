@testable import AppStoreSimulator
import Foundation
import KakinCore
import Testing

/// Apple's Python `app-store-server-library` (3.1.2) verifies the simulator's transactions, renewal info
/// and notifications with the simulator's root, online checks off, strict X.509 checks on. CI runs it;
/// it needs the virtual environment at the package root (see `failureHowTo`). `KAKIN_SKIP_INTEROP=1`
/// skips it where Python is not available.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KAKIN_SKIP_INTEROP"] != "1", "KAKIN_SKIP_INTEROP=1"))
struct AppleLibraryInterop {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../..").standardizedFileURL
    static let python = packageRoot.appendingPathComponent(".venv/bin/python")
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../Interop/verify_with_apple_library.py").standardizedFileURL
    static let failureHowTo = """
        Apple's library is missing. From the package root run:
          python3 -m venv .venv && .venv/bin/pip install app-store-server-library==3.1.2
        or set KAKIN_SKIP_INTEROP=1 to skip this test.
        """

    /// Every kind of notification the simulator produces, with its transactions and renewal info.
    func scenario(_ environment: AppStoreEnvironment) async throws -> (AppStoreSimulator, ScriptedSink, RetentionEndpoint) {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink, graceDays: 3, environment: environment, catalog: CommitmentTests.catalog())
        func post(_ path: String, _ body: JSONValue) async -> Reply { await call(sim, "POST", path, body) }
        // External purchase tokens nobody reports: EXTERNAL_PURCHASE_TOKEN/UNREPORTED when the clock passes their deadlines.
        _ = await post("/simulator/v1/external-purchase-tokens", ["api": "externalPurchase", "appAccountToken": .string(tokenA)])
        _ = await post("/simulator/v1/external-purchase-tokens", ["api": "customLink", "tokenType": "SERVICES", "appAccountToken": .string(tokenA)])
        // Apple's 2026 additions: a 12-month commitment billed monthly (cancelled in its second month), the cancel
        // flow's signed Get Retention Message request, and RESCIND_CONSENT.
        let endpoint = RetentionEndpoint(answer: ["message": ["messageIdentifier": "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"]])
        sim.setRetentionMessageTransport(endpoint)
        try sim.configureRealtimeURL("https://retention.example/v1/apple/retention-message/com.example.app")
        let committed = await post("/simulator/v1/purchases", ["productId": "Y", "appAccountToken": "5b0c5a5e-4c1e-4a36-9a5b-1b8f4a3a2c10",
                                                               "billingPlanType": "MONTHLY"])
        let committedId = committed.json["originalTransactionId"]!.stringValue!
        _ = await post("/simulator/v1/accounts/5b0c5a5e-4c1e-4a36-9a5b-1b8f4a3a2c10/rescind-consent", [:])
        let sub = await post("/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenA)])
        let otid = sub.json["originalTransactionId"]!.stringValue!
        func act(_ body: JSONValue) async { _ = await post("/simulator/v1/subscriptions/\(otid)/actions", body) }
        await act(["action": "applyPromotionalOffer", "offerId": "6m"])
        await act(["action": "changeProduct", "productId": "L"])
        await act(["action": "changeProduct", "productId": "P"])
        await act(["action": "disableAutoRenew"])
        await act(["action": "enableAutoRenew"])
        await act(["action": "failBilling"])
        _ = await post("/simulator/v1/clock", ["advanceSeconds": .int(35 * 86_400)])
        await act(["action": "recoverBilling"])
        _ = await post("/simulator/v1/subscriptions/\(committedId)/actions", ["action": "disableAutoRenew"])
        await act(["action": "priceIncrease", "price": 12.99])
        await act(["action": "requestRefund"])
        await act(["action": "declineRefund"])
        await act(["action": "refund"])
        await act(["action": "reverseRefund"])
        let coins = await post("/simulator/v1/purchases", ["productId": "coins", "quantity": 3])
        _ = await post("/simulator/v1/transactions/\(coins.json["transactionId"]!.stringValue!)/refund", [:])
        let family = await post("/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenB), "familyShared": true])
        _ = await post("/simulator/v1/subscriptions/\(family.json["originalTransactionId"]!.stringValue!)/actions", ["action": "revokeFamilySharing"])
        _ = await call(sim, "PUT", "/inApps/v1/subscriptions/extend/\(otid)", ["extendByDays": 5, "extendReasonCode": 1, "requestIdentifier": "x"],
                       bearer: try apiToken(sim))
        _ = await call(sim, "POST", "/inApps/v1/subscriptions/extend/mass", ["extendByDays": 2, "extendReasonCode": 0, "requestIdentifier": "m", "productId": "P"],
                       bearer: try apiToken(sim))
        _ = await call(sim, "POST", "/inApps/v1/notifications/test", bearer: try apiToken(sim))
        await act(["action": "disableAutoRenew"])
        let failing = await post("/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenB)])
        _ = await post("/simulator/v1/subscriptions/\(failing.json["originalTransactionId"]!.stringValue!)/actions", ["action": "failBilling"])
        _ = await post("/simulator/v1/purchases", ["productId": "Q"])
        _ = await post("/simulator/v1/clock", ["advanceSeconds": .int(3 * 365 * 86_400)])
        _ = await post("/simulator/v1/purchases", ["productId": "P", "appAccountToken": .string(tokenA),
                                                   "offer": ["type": "promotional", "id": "1y", "signature": try OfferSigning.legacy(sim, "P", "1y", token: tokenA)]])
        return (sim, sink, endpoint)
    }

    @Test(arguments: [AppStoreEnvironment.sandbox, .production])
    func applesLibraryVerifiesEverythingTheSimulatorSigns(_ environment: AppStoreEnvironment) async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            Issue.record(Comment(rawValue: Self.failureHowTo))
            return
        }
        let (sim, sink, endpoint) = try await scenario(environment)
        #expect(endpoint.requests.count >= 1, "each cancel asked the realtime URL")
        let (transactions, renewals) = sim.core.withLock { c in
            (c.engine.store.transactions.values.map(\.jws), c.engine.store.subscriptions.values.map(\.renewalJWS))
        }
        let kinds = Set(sim.core.withLock { $0.engine.store.notifications.map { $0.notificationType + "/" + ($0.subtype ?? "") } })
        #expect(kinds.count >= 20, "\(kinds.sorted())")
        #expect(kinds.contains("EXTERNAL_PURCHASE_TOKEN/UNREPORTED"))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(sim.rootCertificateDER).write(to: directory.appendingPathComponent("root.der"))
        let cases: JSONValue = [
            "environment": .string(environment.rawValue), "bundleId": "com.example.app", "appAppleId": 1234,
            "transactions": .array(transactions.map { .string($0) }), "renewals": .array(renewals.map { .string($0) }),
            "notifications": .array(sink.received.map { .string($0) }),
            "realtimeRequests": .array(endpoint.requests.map { .string($0) }),
        ]
        try Data(cases.serialized()).write(to: directory.appendingPathComponent("cases.json"))
        let (status, output) = try await run(Self.python.path, [Self.script.path, directory.path])
        #expect(status == 0, Comment(rawValue: output))
        #expect(output.contains("verified"), Comment(rawValue: output))
    }

    /// Runs a process on a thread of its own (waiting must not block Swift's cooperative pool).
    func run(_ executable: String, _ arguments: [String]) async throws -> (Int32, String) {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let process = Process()
                    process.executableURL = URL(fileURLWithPath: executable)
                    process.arguments = arguments
                    let pipe = Pipe()
                    process.standardOutput = pipe
                    process.standardError = pipe
                    try process.run()
                    let data = pipe.fileHandleForReading.readDataToEndOfFile()
                    process.waitUntilExit()
                    continuation.resume(returning: (process.terminationStatus, String(decoding: data, as: UTF8.self)))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }
}

/// The app's Get Retention Message endpoint as a test stands it up: records each signed request, answers
/// with a fixed `RealtimeResponseBody` (or nothing, as a timeout).
final class RetentionEndpoint: RetentionMessageTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var signedPayloads: [String] = []
    private var urls: [String] = []
    var answer: JSONValue?
    var status = 200

    init(answer: JSONValue?) { self.answer = answer }

    var requests: [String] { lock.withLock { signedPayloads } }
    var calledURLs: [String] { lock.withLock { urls } }

    func post(url: String, body: [UInt8], timeoutMs: Int) async -> (status: Int, body: [UInt8])? {
        let payload = (try? JSONParser.parse(body))?["signedPayload"]?.stringValue ?? ""
        let (answer, status) = lock.withLock { () -> (JSONValue?, Int) in
            signedPayloads.append(payload)
            urls.append(url)
            return (self.answer, self.status)
        }
        return answer.map { (status, $0.serialized()) }
    }
}
