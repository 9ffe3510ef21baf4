import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// Kakin and Apple's own App Store Server Library (Python) must give the same answer for the same
/// signed data. The library lives in `<package root>/.venv`:
///     python3 -m venv .venv && .venv/bin/pip install app-store-server-library==3.1.2
/// `KAKIN_SKIP_INTEROP=1` skips these tests (they fail, with those instructions, when the venv is missing).
@Suite struct InteropTests {
    static let python = Fixtures.packageRoot.appendingPathComponent(".venv/bin/python3")
    static let script = Fixtures.packageRoot.appendingPathComponent("Tests/AppStoreSecurityTests/Interop/apple_interop.py")
    static let skipped = ProcessInfo.processInfo.environment["KAKIN_SKIP_INTEROP"] == "1"

    /// Apple's statuses that match a Kakin answer.
    static func appleStatuses(for code: VerificationCode?) -> Set<String> {
        switch code {
        case nil: return ["OK"]
        case .wrongBundleId?, .wrongAppAppleId?: return ["INVALID_APP_IDENTIFIER"]
        case .wrongEnvironment?: return ["INVALID_ENVIRONMENT"]
        case .retryableFailure?: return ["RETRYABLE_VERIFICATION_FAILURE"]
        default: return ["VERIFICATION_FAILURE", "INVALID_CHAIN_LENGTH", "INVALID_CERTIFICATE"]
        }
    }

    @Test(.enabled(if: !skipped, "KAKIN_SKIP_INTEROP=1"))
    func kakinAndApplesLibraryAgree() throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            Issue.record(
                """
                Apple's Python library is needed for the interop tests. Create it in the package root: \
                python3 -m venv .venv && .venv/bin/pip install app-store-server-library==3.1.2 \
                (or set KAKIN_SKIP_INTEROP=1 to skip)
                """)
            return
        }
        let catalogue = try sharedCatalogue.get()
        let cases = catalogue.cases.filter(\.interop)

        // Kakin's answers first.
        var kakin: [String: Result<VerifiedSignedData, VerificationFailure>] = [:]
        for testCase in cases {
            let verifier = try testCase.makeVerifier()
            do {
                kakin[testCase.name] = .success(try verifier.verify(testCase.jws, as: testCase.kind))
            } catch {
                kakin[testCase.name] = .failure(error)
            }
        }

        // The same questions to Apple's library.
        let keyPEM = String(decoding: try Fixtures.appleFile("certs/testSigningKey.p8"), as: UTF8.self)
        let key = try P256PrivateKey(pemPKCS8: keyPEM)
        let offer = PromotionalOfferSignature(
            bundleId: "com.example", keyIdentifier: "L256SYR32L", productIdentifier: "premium.monthly",
            offerIdentifier: "winback.6months", appAccountToken: "A2E1C0E4-7E7B-4A4B-9C32-55C3D9F4B1AA",
            nonce: "0E4A4B8E-1C51-4B1B-8DDA-0F0C1D8E9A10", timestampMs: 1_780_272_000_123)
        let request: JSONValue = [
            "cases": .array(
                cases.map { c in
                    [
                        "name": .string(c.name), "jws": .string(c.jws), "method": .string(c.kind.rawValue),
                        "roots": .array(c.roots.map { .string(Base64.encode($0)) }), "bundleId": .string(c.bundleId),
                        "appAppleId": .int(c.appAppleId), "environment": .string(c.environment.rawValue),
                        "strict": .bool(c.strictChain),
                    ]
                }),
            "offers": [
                "keyPEM": .string(keyPEM), "kakinSignature": .string(try offer.signature(key: key)),
                "fields": [
                    "bundleId": .string(offer.bundleId), "keyIdentifier": .string(offer.keyIdentifier),
                    "productIdentifier": .string(offer.productIdentifier), "offerIdentifier": .string(offer.offerIdentifier),
                    "appAccountToken": .string(offer.appAccountToken), "nonce": .string(offer.nonce),
                    "timestampMs": .int(offer.timestampMs),
                ],
            ],
            "apiToken": ["keyPEM": .string(keyPEM), "keyId": "L256SYR32L", "issuerId": "issuer-1", "bundleId": "com.example"],
        ]
        let answer = try Self.askApple(request)

        // Case by case.
        #expect(answer["cases"]?.objectValue?.count == cases.count)
        for testCase in cases {
            let apple = try #require(answer["cases"]?[testCase.name], "no answer for \(testCase.name)")
            let status = apple["status"]?.stringValue ?? "?"
            let ours = kakin[testCase.name]!
            var code: VerificationCode? = nil
            if case .failure(let failure) = ours { code = failure.code }
            #expect(
                Self.appleStatuses(for: code).contains(status),
                "\(testCase.name): Kakin \(code?.rawValue ?? "valid"), Apple \(status)")
            if case .success(let verified) = ours, status == "OK" {
                #expect(verified.payload == apple["payload"], "\(testCase.name): decoded payloads differ")
            }
        }

        // Legacy offer signatures, both ways.
        #expect(answer["offers"]?["kakinSignatureValid"] == true, "Apple's library refuses Kakin's offer signature")
        let pythonSignature = try #require(answer["offers"]?["pythonSignature"]?.stringValue)
        #expect(offer.isValidSignature(pythonSignature, publicKey: key.publicKey), "Kakin refuses Apple's offer signature")
        var otherOffer = offer
        otherOffer.offerIdentifier = "another.offer"
        #expect(!otherOffer.isValidSignature(pythonSignature, publicKey: key.publicKey))

        // Apple's API client token passes the simulator's check.
        let token = try #require(answer["apiToken"]?["token"]?.stringValue)
        let now = try #require(answer["apiToken"]?["nowSeconds"]?.int64Value)
        let tokenVerifier = AppStoreServerAPITokenVerifier(
            keys: ["L256SYR32L": .init(publicKey: key.publicKey, issuerId: "issuer-1")], bundleId: "com.example")
        #expect(throws: Never.self) { try tokenVerifier.verify(token, nowSeconds: now) }
    }

    /// Runs a Python script of `Interop/` (default: apple_interop.py) on a request file and parses its answer.
    static func askApple(_ request: JSONValue, script: URL = script) throws -> JSONValue {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-interop-\(UUID().uuidString)")
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
            Issue.record("\(script.lastPathComponent) failed (\(process.terminationStatus)): \(errorText)")
            throw InteropFailed()
        }
        return try JSONParser.parse([UInt8](data), depthMax: 64)
    }

    struct InteropFailed: Error {}
}
