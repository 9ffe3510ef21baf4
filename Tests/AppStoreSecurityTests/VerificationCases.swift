import AppStoreSecurity
import KakinCore
import KakinCrypto

/// One signed-data verification scenario with Kakin's expected answer. The same list drives the Swift
/// tests and the interop test against Apple's Python library, so both sides see identical inputs.
struct VerificationCase: Sendable {
    var name: String
    var jws: String
    /// Which of Apple's `verify_and_decode_*` methods (and Kakin's `verify(_:as:)` kind) applies.
    var kind: SignedPayloadKind
    var roots: [[UInt8]]
    var bundleId: String
    var appAppleId: Int64? = nil
    /// One environment, as Apple's verifier is configured with exactly one.
    var environment: AppStoreEnvironment
    /// Apple's library runs X509_STRICT unless told otherwise; Apple's own testCA lacks AKI/SKI.
    var strictChain = true
    /// nil: valid.
    var expected: VerificationCode?
    /// Whether Apple's library can be asked the same question (false where Kakin refuses by policy).
    var interop = true

    var apps: [AppIdentity] { [AppIdentity(bundleId: bundleId, appAppleId: appAppleId, environments: [environment])] }

    func makeVerifier(clock: Int64 = Fixtures.now) throws -> SignedDataVerifier {
        try SignedDataVerifier(trustedRoots: roots, apps: apps, clock: { clock })
    }
}

/// Builds every scenario: Apple's vectors and a test CA's good and broken tokens.
struct VerificationCatalogue: Sendable {
    let ca: SigningCertificateAuthority
    let otherCA: SigningCertificateAuthority
    let cases: [VerificationCase]

    init() throws {
        let now = Fixtures.now
        let year: Int64 = 365 * Fixtures.dayMs
        let ca = try SigningCertificateAuthority(nowMs: now)
        let otherCA = try SigningCertificateAuthority(nowMs: now)
        var options = SigningCertificateAuthority.Options()
        options.leafHasAppleMarker = false
        let noLeafMarker = try SigningCertificateAuthority(nowMs: now, options: options)
        options = .init()
        options.intermediateHasAppleMarker = false
        let noIntermediateMarker = try SigningCertificateAuthority(nowMs: now, options: options)
        options = .init()
        options.leafValidity = CertificateValidity(notBeforeMs: now - 2 * year, notAfterMs: now - year)
        let pastLeaf = try SigningCertificateAuthority(nowMs: now, options: options)
        options = .init()
        options.rootValidity = CertificateValidity(notBeforeMs: now - 3 * year, notAfterMs: now - year)
        let pastRoot = try SigningCertificateAuthority(nowMs: now, options: options)

        let testCA = try Fixtures.appleFile("certs/testCA.der")
        let appleRoot = try AppleRootCertificates.rootCAG3()
        let signer = ca.signer()
        var list: [VerificationCase] = []

        func apple(_ name: String, _ file: String, _ kind: SignedPayloadKind, _ expected: VerificationCode?) throws {
            list.append(
                VerificationCase(
                    name: name, jws: try Fixtures.appleJWS(file), kind: kind, roots: [testCA], bundleId: "com.example",
                    environment: .sandbox, strictChain: false, expected: expected))
        }
        try apple("apple.transactionInfo", "mock_signed_data/transactionInfo", .transaction, nil)
        try apple("apple.renewalInfo", "mock_signed_data/renewalInfo", .renewalInfo, nil)
        try apple("apple.testNotification", "mock_signed_data/testNotification", .notification, nil)
        try apple("apple.wrongBundleId", "mock_signed_data/wrongBundleId", .notification, .wrongBundleId)
        try apple("apple.missingX5CHeaderClaim", "mock_signed_data/missingX5CHeaderClaim", .notification, .invalidFormat)

        for (file, kind) in [
            ("mock_signed_data/transactionInfo", SignedPayloadKind.transaction),
            ("mock_signed_data/renewalInfo", .renewalInfo), ("mock_signed_data/testNotification", .notification),
        ] {
            list.append(
                VerificationCase(
                    name: "apple.\(file.split(separator: "/").last!).againstAppleRoot", jws: try Fixtures.appleJWS(file),
                    kind: kind, roots: [appleRoot], bundleId: "com.example", environment: .sandbox,
                    expected: .untrustedCertificate))
        }

        let xcodeBundle = "com.example.naturelab.backyardbirds.example"
        for (file, kind) in [
            ("xcode/xcode-signed-transaction", SignedPayloadKind.transaction),
            ("xcode/xcode-signed-renewal-info", .renewalInfo), ("xcode/xcode-signed-app-transaction", .appTransaction),
        ] {
            let jws = try Fixtures.appleJWS(file)
            list.append(
                VerificationCase(
                    name: "\(file).xcodeListed", jws: jws, kind: kind, roots: [testCA], bundleId: xcodeBundle,
                    environment: .xcode, expected: nil))
            // Apple's library, configured for Sandbox, would try the 1-certificate chain instead: Kakin
            // refuses Xcode data by policy before that, so the question is Kakin's alone.
            list.append(
                VerificationCase(
                    name: "\(file).refusedByDefault", jws: jws, kind: kind, roots: [testCA], bundleId: xcodeBundle,
                    environment: .sandbox, expected: .wrongEnvironment, interop: false))
        }

        func ours(
            _ name: String, _ jws: String, _ kind: SignedPayloadKind, _ expected: VerificationCode?,
            roots: [[UInt8]]? = nil, environment: AppStoreEnvironment = .sandbox, appAppleId: Int64? = nil
        ) {
            list.append(
                VerificationCase(
                    name: name, jws: jws, kind: kind, roots: roots ?? [ca.rootDER], bundleId: "com.example",
                    appAppleId: appAppleId, environment: environment, expected: expected))
        }

        let transaction = try signer.sign(transactionPayload())
        ours("ca.transaction", transaction, .transaction, nil)
        ours("ca.renewalInfo", try signer.sign(renewalInfoPayload()), .renewalInfo, nil)
        ours("ca.notification", try signer.sign(notificationPayload()), .notification, nil)
        ours("ca.appTransaction", try signer.sign(appTransactionPayload()), .appTransaction, nil)
        ours(
            "ca.production.notification", try signer.sign(notificationPayload(environment: "Production")), .notification, nil,
            environment: .production, appAppleId: 1234)
        ours(
            "ca.production.appTransaction", try signer.sign(appTransactionPayload(receiptType: "Production")),
            .appTransaction, nil, environment: .production, appAppleId: 1234)

        // Tampering.
        let parts = transaction.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        var changed = transactionPayload()
        if case .object(var fields) = changed {
            fields["quantity"] = 100
            changed = .object(fields)
        }
        let forgedPayload = Base64.urlEncode(changed.serialized())
        ours("ca.tamperedPayload", "\(parts[0]).\(forgedPayload).\(parts[2])", .transaction, .invalidSignature)
        var signature = Base64.decode(parts[2])!
        signature[10] ^= 0x01
        ours("ca.tamperedSignature", "\(parts[0]).\(parts[1]).\(Base64.urlEncode(signature))", .transaction, .invalidSignature)
        ours(
            "ca.shortSignature", "\(parts[0]).\(parts[1]).\(Base64.urlEncode(signature.prefix(63)))", .transaction,
            .invalidSignature)
        let strangerSignature = try JWSSigner(key: otherCA.leafKey, x5c: ca.x5c).sign(transactionPayload())
        ours("ca.signedByAnotherKey", strangerSignature, .transaction, .invalidSignature)

        // Chains.
        ours(
            "ca.leafWithoutAppleMarker", try noLeafMarker.signer().sign(transactionPayload()), .transaction,
            .untrustedCertificate, roots: [noLeafMarker.rootDER])
        ours(
            "ca.intermediateWithoutAppleMarker", try noIntermediateMarker.signer().sign(transactionPayload()),
            .transaction, .untrustedCertificate, roots: [noIntermediateMarker.rootDER])
        ours(
            "ca.leafExpiredAtSignedDate", try pastLeaf.signer().sign(transactionPayload()), .transaction,
            .untrustedCertificate, roots: [pastLeaf.rootDER])
        ours(
            "ca.leafValidAtPastSignedDate", try pastLeaf.signer().sign(transactionPayload(signedDate: now - year - year / 2)),
            .transaction, nil, roots: [pastLeaf.rootDER])
        ours(
            "ca.rootExpiredAtSignedDate", try pastRoot.signer().sign(transactionPayload()), .transaction,
            .untrustedCertificate, roots: [pastRoot.rootDER])
        ours("ca.unpinnedRoot", try otherCA.signer().sign(transactionPayload()), .transaction, .untrustedCertificate)
        ours(
            "ca.bothRootsPinned", try otherCA.signer().sign(transactionPayload()), .transaction, nil,
            roots: [ca.rootDER, otherCA.rootDER])
        // x5c[2] is ignored: a chain naming another root still reaches the pinned one.
        let foreignRoot = JWSSigner(key: ca.leafKey, x5c: [ca.x5c[0], ca.x5c[1], otherCA.x5c[2]])
        ours("ca.x5cRootIgnored", try foreignRoot.sign(transactionPayload()), .transaction, nil)

        // Header shapes.
        let body = transactionPayload().serialized()
        ours(
            "ca.algNone", Base64.urlEncode(#"{"alg":"none"}"#.utf8) + "." + Base64.urlEncode(body) + ".", .transaction,
            .unsupportedAlgorithm)
        ours(
            "ca.algHS256", try signer.sign(payloadBytes: body, header: ["alg": "HS256", "typ": "JWT"]), .transaction,
            .unsupportedAlgorithm)
        ours(
            "ca.algES384WithChain",
            try signer.sign(payloadBytes: body, header: ["alg": "ES384", "x5c": .array(ca.x5c.map(JSONValue.string))]),
            .transaction, .unsupportedAlgorithm)
        ours(
            "ca.x5cTwoCertificates",
            try signer.sign(payloadBytes: body, header: ["alg": "ES256", "x5c": .array(ca.x5c.prefix(2).map(JSONValue.string))]),
            .transaction, .invalidFormat)
        ours(
            "ca.x5cFourCertificates",
            try signer.sign(
                payloadBytes: body, header: ["alg": "ES256", "x5c": .array((ca.x5c + [ca.x5c[2]]).map(JSONValue.string))]),
            .transaction, .invalidFormat)
        ours("ca.x5cMissing", try signer.sign(payloadBytes: body, header: ["alg": "ES256"]), .transaction, .invalidFormat)
        ours(
            "ca.x5cNotCertificates",
            try signer.sign(payloadBytes: body, header: ["alg": "ES256", "x5c": ["AAAA", "AAAA", "AAAA"]]),
            .transaction, .invalidFormat)
        ours(
            "ca.payloadNotAnObject", try signer.sign(payloadBytes: Array("[1,2]".utf8), header: signer.header), .transaction,
            .invalidFormat)

        // App checks.
        ours("ca.wrongBundleId", try signer.sign(transactionPayload(bundleId: "com.example.other")), .transaction, .wrongBundleId)
        ours(
            "ca.wrongEnvironment", try signer.sign(transactionPayload(environment: "Production")), .transaction, .wrongEnvironment
        )
        ours(
            "ca.renewalInfo.wrongEnvironment", try signer.sign(renewalInfoPayload(environment: "Production")), .renewalInfo,
            .wrongEnvironment)
        ours(
            "ca.notification.wrongBundleId", try signer.sign(notificationPayload(bundleId: "com.example.other")), .notification,
            .wrongBundleId)
        ours(
            "ca.production.notification.wrongAppAppleId",
            try signer.sign(notificationPayload(appAppleId: 9999, environment: "Production")), .notification, .wrongAppAppleId,
            environment: .production, appAppleId: 1234)
        ours(
            "ca.production.appTransaction.wrongAppAppleId",
            try signer.sign(appTransactionPayload(appAppleId: 9999, receiptType: "Production")), .appTransaction,
            .wrongAppAppleId, environment: .production, appAppleId: 1234)
        ours(
            "ca.appTransaction.wrongEnvironment", try signer.sign(appTransactionPayload(receiptType: "Production")),
            .appTransaction, .wrongEnvironment)
        let summary: JSONValue = [
            "notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY",
            "notificationUUID": "0e1b4a3c-1111-4222-8333-944455556666",
            "signedDate": .int(now),
            "summary": [
                "environment": "Sandbox", "appAppleId": 1234, "bundleId": "com.example", "productId": "premium.monthly",
                "requestIdentifier": "b6c3c7c0-0000-4000-8000-000000000001", "succeededCount": 5, "failedCount": 0,
            ],
        ]
        ours("ca.notification.summary", try signer.sign(summary), .notification, nil)
        func token(_ id: String) -> JSONValue {
            [
                "notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED",
                "notificationUUID": "0e1b4a3c-1111-4222-8333-944455556667", "signedDate": .int(now),
                "externalPurchaseToken": [
                    "externalPurchaseId": .string(id), "tokenCreationDate": .int(now - 1000),
                    "appAppleId": 1234, "bundleId": "com.example",
                ],
            ]
        }
        ours(
            "ca.notification.sandboxExternalPurchaseToken",
            try signer.sign(token("SANDBOX_b2158121-7af9-49d4-9561-1f588205523e")),
            .notification, nil)
        ours(
            "ca.notification.productionExternalPurchaseToken", try signer.sign(token("b2158121-7af9-49d4-9561-1f588205523e")),
            .notification, .wrongEnvironment)
        let appData: JSONValue = [
            "notificationType": "RESCIND_CONSENT", "notificationUUID": "0e1b4a3c-1111-4222-8333-944455556668",
            "signedDate": .int(now),
            "appData": [
                "appAppleId": 1234, "bundleId": "com.example", "environment": "Sandbox",
                "signedAppTransactionInfo": "e30.e30.e30",
            ],
        ]
        ours("ca.notification.appData", try signer.sign(appData), .notification, nil)

        // Garbage.
        ours("garbage.empty", "", .transaction, .invalidFormat)
        ours("garbage.twoParts", "eyJhbGciOiJFUzI1NiJ9.e30", .transaction, .invalidFormat)
        ours("garbage.fourParts", "\(transaction).e30", .transaction, .invalidFormat)
        ours("garbage.notBase64", "!!!.###.$$$", .transaction, .invalidFormat)
        ours("garbage.headerNotJSON", Base64.urlEncode("not json".utf8) + ".e30.AAAA", .transaction, .invalidFormat)
        ours("garbage.headerNotObject", Base64.urlEncode("[1]".utf8) + ".e30.AAAA", .transaction, .invalidFormat)
        ours("garbage.huge", String(repeating: "A", count: 300_000) + ".e30.AAAA", .transaction, .invalidFormat)
        ours(
            "garbage.hugeButWellFormed", parts[0] + "." + String(repeating: "A", count: 400_000) + "." + parts[2],
            .transaction, .invalidFormat)
        self.cases = list
        self.ca = ca
        self.otherCA = otherCA
    }
}
