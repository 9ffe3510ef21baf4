import AppStoreClient
import AppStoreSecurity
import AppStoreSimulator
import Foundation
import KakinCore
import KakinCrypto
@testable import KakinServer
import Testing

/// Issue 19's scenario: a yearly subscription with a 12-month commitment billed monthly, cancelled in month 4, stays
/// active until month 12 and then expires. At each step Kakin's status (`GET /v1/customers/u1`), the support desk's
/// customer page and Apple's own Python library (`app-store-server-library`, verifying every signed payload: the
/// subscription's latest transaction and renewal info from Get All Subscription Statuses, and every notification
/// Kakin was sent with what it nests) agree. Needs `.venv` (`./scripts/setup --with-python`); `KAKIN_SKIP_INTEROP=1`
/// skips it where Python is not available.
@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: ProcessInfo.processInfo.environment["KAKIN_SKIP_INTEROP"] != "1", "KAKIN_SKIP_INTEROP=1"))
struct CommitmentScenarioTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
    static let python = packageRoot.appendingPathComponent(".venv/bin/python")

    /// What Kakin and the desk said at one step.
    struct Step {
        var month: Int
        var nowMs: Int64
        var transaction: String
        var renewal: String
        var kakin: JSONValue
        var deskFacts: String
    }

    @Test func aCommitmentCancelledInMonthFourStaysActiveUntilMonthTwelveThenExpiresAndAllThreeAgree() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            Issue.record("Apple's library is missing: run ./scripts/setup --with-python (or set KAKIN_SKIP_INTEROP=1)")
            return
        }
        let notifications = NotificationCopies()
        try await SimulatedKakin.with(deliveries: { inner in
            let tap = NotificationSwitch(inner)
            tap.copy(to: { notifications.add($0) })
            return tap
        }) { sk in
            let start = sk.nowMs
            let bought = try await sk.sim("POST", "/simulator/v1/purchases", ["productId": "premium.yearly", "appAccountToken": .string(try await sk.token("u1")),
                                                                               "billingPlanType": "MONTHLY"])
            let otid = try #require(bought["originalTransactionId"]?.stringValue)
            let key = sk.simulator.apiKey
            var configuration = AppStoreServerAPIConfiguration(
                issuerId: key.issuerId, keyId: key.keyId, privateKey: try P256PrivateKey(pemPKCS8: key.privateKeyPEM),
                bundleId: Catalog.demoBundleId, server: .baseURL("http://127.0.0.1:\(sk.runtime.port)/simulator", environment: .sandbox))
            configuration.retriesMax = 0
            let client = try AppStoreServerAPIClient(configuration: configuration, clock: sk.simulator.clock)
            let admin = AdminClient(sk.app)

            var steps: [Step] = []
            for month in 1...13 {
                if month > 1 { try await sk.advance(to: ISOPeriod("P\(month - 1)M")!.added(to: start) + 3_600_000) }
                if month == 4 { try await sk.action(otid, "disableAutoRenew") }
                await sk.app.services.notifications.drain()
                let latest = try #require(try await client.allSubscriptionStatuses(transactionId: otid).data.first?.lastTransactions.first)
                let page = await admin.get("/admin/customers/u1")
                let facts = page.text.components(separatedBy: "<section").first { $0.contains("id=\"sub-\(otid)\"") } ?? ""
                steps.append(Step(month: month, nowMs: sk.nowMs, transaction: latest.signedTransactionInfo, renewal: latest.signedRenewalInfo,
                                  kakin: try await sk.subscription("u1"), deskFacts: facts))
            }

            // Apple's library verifies and decodes every step's signed data and every notification.
            let decoded = try Self.runAppleLibrary(sk, steps: steps, notifications: notifications.all)
            let commitmentEnd = ISOPeriod("P1Y")!.added(to: start)
            for (step, apple) in zip(steps, decoded) {
                let m = step.month
                let kakin = step.kakin
                let appleActive = (apple["expiresDate"]?.int64Value ?? 0) > step.nowMs && (apple["revocationDate"]?.isNull ?? true)
                let appleWillRenew = apple["commitmentAutoRenewStatus"]?.int64Value == 1
                let line = "month \(m): Kakin \(kakin["state"]?.stringValue ?? "?") commitment \(kakin["commitment"]?["billingPeriod"]?.int64Value ?? 0)/12 "
                    + "willRenew \(kakin["commitment"]?["willRenew"]?.boolValue.map(String.init) ?? "-") · Apple period \(apple["billingPeriodNumber"]?.int64Value ?? 0) "
                    + "active \(appleActive) commitmentAutoRenew \(appleWillRenew) · desk \(Self.deskSummary(step.deskFacts))"
                print(line)
                if m <= 12 {
                    #expect(kakin["state"] == "subscribed", "\(line)")
                    #expect(appleActive, "\(line)")
                    #expect(kakin["commitment"]?["billingPeriod"]?.int64Value == Int64(m), "\(line)")
                    #expect(apple["billingPeriodNumber"]?.int64Value == Int64(m), "\(line)")
                    #expect(apple["commitmentExpiresDate"]?.int64Value == commitmentEnd, "\(line)")
                    #expect(kakin["commitment"]?["endsAt"]?.stringValue == Timestamp.rfc3339(commitmentEnd), "\(line)")
                    #expect(kakin["commitment"]?["willRenew"]?.boolValue == (m < 4), "\(line)")
                    #expect(appleWillRenew == (m < 4), "\(line)")
                    #expect(step.deskFacts.contains(">subscribed<"), "\(line)")
                    #expect(step.deskFacts.contains("month \(m) of 12, until \(Timestamp.rfc3339(commitmentEnd))"), "\(line)")
                    #expect(step.deskFacts.contains(m < 4 ? "renews at its end" : "cancelled: ends then"), "\(line)")
                } else {
                    #expect(kakin["state"] == "expired", "\(line)")
                    #expect(kakin["expirationReason"] == "voluntary", "\(line)")
                    #expect(!appleActive, "\(line)")
                    #expect(apple["expiresDate"]?.int64Value == commitmentEnd, "\(line)")
                    #expect(step.deskFacts.contains(">expired<"), "\(line)")
                }
            }
            let status = try await sk.status("u1")
            #expect(status["status"] == "inactive")
        }
    }

    static func deskSummary(_ html: String) -> String {
        for state in ["subscribed", "expired", "inGracePeriod", "inBillingRetryPeriod", "revoked"] where html.contains(">\(state)<") {
            guard let r = html.range(of: "billed monthly, month ") else { return state }
            return state + ", " + String(html[r.lowerBound...].prefix(while: { $0 != "<" }))
        }
        return "?"
    }

    /// Runs Apple's library over the steps' signed data and the notifications; returns one decoded object per step.
    static func runAppleLibrary(_ sk: SimulatedKakin, steps: [Step], notifications: [String]) throws -> [JSONValue] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-commitment-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data(sk.simulator.rootCertificateDER).write(to: directory.appendingPathComponent("root.der"))
        let cases: JSONValue = [
            "environment": "Sandbox", "bundleId": .string(Catalog.demoBundleId), "appAppleId": .int(Catalog.demoAppAppleId),
            "steps": .array(steps.map { ["transaction": .string($0.transaction), "renewal": .string($0.renewal)] }),
            "notifications": .array(notifications.map { .string($0) }),
        ]
        try Data(cases.serialized()).write(to: directory.appendingPathComponent("cases.json"))
        let script = directory.appendingPathComponent("steps.py")
        try Data(Self.script.utf8).write(to: script)
        let process = Process()
        process.executableURL = python
        process.arguments = [script.path, directory.path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        print(text.split(separator: "\n").filter { !$0.hasPrefix("{") }.joined(separator: "\n"))
        #expect(process.terminationStatus == 0, Comment(rawValue: text))
        let decoded = text.split(separator: "\n").filter { $0.hasPrefix("{") }.compactMap { try? JSONParser.parse(Array($0.utf8)) }
        #expect(decoded.count == steps.count, Comment(rawValue: text))
        return decoded
    }

    /// Verifies everything with Apple's `SignedDataVerifier` (the simulator's root only, online checks off) and prints one
    /// JSON line per step with what Apple's models decode; exits 1 on any failure.
    static let script = #"""
        import json, os, sys
        from appstoreserverlibrary.models.Environment import Environment
        from appstoreserverlibrary.signed_data_verifier import SignedDataVerifier

        d = sys.argv[1]
        root = open(os.path.join(d, "root.der"), "rb").read()
        cases = json.load(open(os.path.join(d, "cases.json")))
        v = SignedDataVerifier([root], False, Environment(cases["environment"]), cases["bundleId"], cases["appAppleId"])
        failures, verified = [], 0
        def check(what, f, jws):
            global verified
            try:
                out = f(jws)
                verified += 1
                return out
            except Exception as e:
                failures.append(f"{what}: {type(e).__name__}: {e}")
        for n_jws in cases["notifications"]:
            n = check("notification", v.verify_and_decode_notification, n_jws)
            if n is not None and n.data is not None:
                if n.data.signedTransactionInfo:
                    check("notification transaction", v.verify_and_decode_signed_transaction, n.data.signedTransactionInfo)
                if n.data.signedRenewalInfo:
                    check("notification renewal info", v.verify_and_decode_renewal_info, n.data.signedRenewalInfo)
        for i, s in enumerate(cases["steps"]):
            t = check(f"step {i + 1} transaction", v.verify_and_decode_signed_transaction, s["transaction"])
            r = check(f"step {i + 1} renewal info", v.verify_and_decode_renewal_info, s["renewal"])
            if t is None or r is None:
                print(json.dumps({}))
                continue
            c, rc = t.commitmentInfo, r.commitmentInfo
            print(json.dumps({
                "billingPlanType": t.rawBillingPlanType, "expiresDate": t.expiresDate, "revocationDate": t.revocationDate,
                "billingPeriodNumber": c.billingPeriodNumber if c else None, "totalBillingPeriods": c.totalBillingPeriods if c else None,
                "commitmentExpiresDate": c.commitmentExpiresDate if c else None,
                "autoRenewStatus": r.rawAutoRenewStatus,
                "commitmentAutoRenewStatus": rc.rawCommitmentAutoRenewStatus if rc else None,
            }))
        for f in failures:
            print("FAIL " + f)
        print(f"Apple's library verified {verified} signed payloads ({len(cases['notifications'])} notifications and what they nest, "
              f"{len(cases['steps'])} steps' latest transaction and renewal info)")
        sys.exit(1 if failures else 0)
        """#
}

/// The notifications Kakin was sent, copied as they are delivered.
final class NotificationCopies: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ s: String) { lock.withLock { items.append(s) } }
    var all: [String] { lock.withLock { items } }
}
