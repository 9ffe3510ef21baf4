import Foundation
import KakinCore
import KakinCrypto
import KakinExternal
import Testing

/// Stripe's own Python library is the independent peer of Kakin's `Stripe-Signature` code: it accepts the
/// events Kakin signs (and refuses tampered ones), and Kakin accepts the headers it makes. The library lives in
/// `<package root>/.venv` (`./scripts/setup --with-python`); `KAKIN_SKIP_INTEROP=1` skips this suite.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["KAKIN_SKIP_INTEROP"] != "1", "KAKIN_SKIP_INTEROP=1"))
struct StripeInteropTests {
    typealias F = StripeFixtures
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
    static let python = packageRoot.appendingPathComponent(".venv/bin/python")
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Interop/stripe_interop.py")

    /// The handled event types, Stripe-shaped.
    static func events(created: Int64) -> [(String, JSONValue)] {
        [
            ("checkoutPayment", F.event("checkout.session.completed", id: "evt_1Pay", created: created, object: F.checkoutSessionPayment())),
            ("checkoutSubscription", F.event("checkout.session.completed", id: "evt_1Sub", created: created,
                                             object: F.checkoutSessionSubscription(created: created))),
            ("invoicePaid", F.event("invoice.paid", id: "evt_1Inv", created: created,
                                    object: F.invoice(id: "in_1Renew", periodStart: created - 10, periodEnd: created + 2_592_000))),
            ("subscriptionUpdated", F.event("customer.subscription.updated", id: "evt_1Upd", created: created,
                                            object: F.subscription(status: "active", periodStart: created, periodEnd: created + 2_592_000,
                                                                   cancelAtPeriodEnd: true))),
            ("subscriptionDeleted", F.event("customer.subscription.deleted", id: "evt_1Del", created: created,
                                            object: F.subscription(status: "canceled", periodStart: created - 10, periodEnd: created,
                                                                   endedAt: created))),
            ("chargeRefunded", F.event("charge.refunded", id: "evt_1Ref", created: created, object: F.charge(refunded: 120))),
        ]
    }

    @Test func stripesLibraryAndKakinAcceptEachOthersSignatures() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            Issue.record("Stripe's Python library is missing: run ./scripts/setup --with-python (or set KAKIN_SKIP_INTEROP=1).")
            return
        }
        let now = Int64(Date().timeIntervalSince1970)
        let secret = Array(F.secret.utf8)
        let events = Self.events(created: now - 5)
        var signed: [JSONValue] = []
        var tampered: [JSONValue] = []
        var toSign: [JSONValue] = []
        for (name, event) in events {
            let payload = event.serialized()
            let header = TimestampedSignature.header(body: payload, timestamp: now, secrets: [secret])
            let text = String(decoding: payload, as: UTF8.self)
            signed.append(["name": .string(name), "payload": .string(text), "header": .string(header)])
            toSign.append(["name": .string(name), "payload": .string(text), "timestamp": .int(now)])
            // Another amount in the body under the same header; a header from another secret; an old timestamp.
            tampered.append(["name": .string(name + ".body"), "payload": .string(text.replacingOccurrences(of: "\"livemode\":false", with: "\"livemode\":true")),
                             "header": .string(header)])
            tampered.append(["name": .string(name + ".secret"), "payload": .string(text),
                             "header": .string(TimestampedSignature.header(body: payload, timestamp: now, secrets: [Array("whsec_other".utf8)]))])
            tampered.append(["name": .string(name + ".old"), "payload": .string(text),
                             "header": .string(TimestampedSignature.header(body: payload, timestamp: now - 3_600, secrets: [secret]))])
        }
        // During a roll Stripe puts two v1 signatures in one header: the peer takes Kakin's two-secret header too.
        let rolled = events[0].1.serialized()
        signed.append(["name": "rolledSecret", "payload": .string(String(decoding: rolled, as: UTF8.self)),
                       "header": .string(TimestampedSignature.header(body: rolled, timestamp: now, secrets: [Array("whsec_old".utf8), secret]))])
        let answer = try Self.askStripe(["secret": .string(F.secret), "events": .array(signed), "tampered": .array(tampered), "toSign": .array(toSign)])

        // Stripe's library accepts every event Kakin signed, reading the same id, type and object.
        #expect(answer["refused"]?.objectValue?.isEmpty == true, "\(answer["refused"]?.jsonString ?? "")")
        for (name, event) in events {
            let accepted = answer["accepted"]?[name]
            #expect(accepted?["id"] == event["id"] && accepted?["type"] == event["type"], "\(name)")
            #expect(accepted?["objectType"] == event["data"]?["object"]?["object"], "\(name)")
        }
        #expect(answer["accepted"]?["rolledSecret"] != nil)
        // …and refuses every tampered one.
        for case let name? in tampered.map({ $0["name"]?.stringValue }) {
            #expect(answer["tamperedRefused"]?[name] == true, "\(name) was accepted by stripe")
        }

        // The reverse: headers made by Stripe's library pass Kakin's verifier, and Kakin reads the events.
        let verifier = StripeWebhookVerifier(configuration: F.configuration)
        for (name, event) in events {
            let header = try #require(answer["signed"]?[name]?.stringValue)
            let body = event.serialized()
            #expect(try verifier.verify(signatureHeader: header, body: body, nowSeconds: now) == now)
            let facts = try StripeEventFacts(event: try StripeEvent(body: body), configuration: F.configuration, nowMs: now * 1000)
            #expect(facts.ignoredReason == nil && (facts.purchase != nil || facts.subscription != nil || facts.refund != nil), "\(name)")
            var tamperedBody = body
            tamperedBody.append(0x20)
            #expect(throws: KakinError.self) { try verifier.verify(signatureHeader: header, body: tamperedBody, nowSeconds: now) }
        }
    }

    /// Runs the script on a request file, on a thread of its own (waiting must not block the cooperative pool).
    static func askStripe(_ request: JSONValue) throws -> JSONValue {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-stripe-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let requestURL = directory.appendingPathComponent("request.json")
        let answerURL = directory.appendingPathComponent("answer.json")
        try Data(request.serialized()).write(to: requestURL)
        let process = Process()
        process.executableURL = python
        process.arguments = [script.path, requestURL.path, answerURL.path]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0, let data = FileManager.default.contents(atPath: answerURL.path) else {
            Issue.record("stripe_interop.py failed (\(process.terminationStatus)): \(errorText)")
            throw CancellationError()
        }
        return try JSONParser.parse([UInt8](data))
    }
}
