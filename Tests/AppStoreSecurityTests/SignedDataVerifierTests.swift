import AppStoreSecurity
import KakinCore
@testable import KakinCrypto
import Synchronization
import Testing

/// Built once: three CAs' key generation is the slow part.
let sharedCatalogue: Result<VerificationCatalogue, any Error> = Result { try VerificationCatalogue() }

func catalogueCase(_ name: String) throws -> VerificationCase {
    let catalogue = try sharedCatalogue.get()
    return try #require(catalogue.cases.first { $0.name == name }, "no case \(name)")
}

/// Verifies a case twice on one verifier (a cache miss, then a hit) and checks both answers.
func expectCase(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let testCase = try catalogueCase(name)
    let verifier = try testCase.makeVerifier()
    for attempt in ["cold", "warm"] {
        let code = failureCode { _ = try verifier.verify(testCase.jws, as: testCase.kind) }
        #expect(
            code == testCase.expected, "\(name) (\(attempt) cache): got \(code?.rawValue ?? "valid")",
            sourceLocation: sourceLocation)
    }
}

/// Verifies `jws` on `verifier` until its leaf key is past `P256PublicKey.fixedKeyVerificationsMin` checks: the key's
/// checks from then on use its precomputed multiples (`P256FixedKeyVerifier`), as a busy server's do.
func warmPastPrecomputation(_ verifier: SignedDataVerifier, _ jws: String) {
    for _ in 0...P256PublicKey.fixedKeyVerificationsMin { _ = try? verifier.verify(jws) }
}

@Suite struct AppleVectorTests {
    /// Apple's signed vectors, and the same with a byte of the signature changed, answer the same once the leaf key's
    /// multiples are precomputed.
    @Test func appleVectorsAnswerTheSameWithTheLeafKeyPrecomputed() throws {
        for name in ["apple.transactionInfo", "apple.renewalInfo", "apple.testNotification"] {
            let testCase = try catalogueCase(name)
            let verifier = try testCase.makeVerifier()
            warmPastPrecomputation(verifier, testCase.jws)
            #expect(failureCode { _ = try verifier.verify(testCase.jws, as: testCase.kind) } == nil, "\(name)")
            var tampered = Array(testCase.jws.utf8)
            let signatureStart = tampered.lastIndex(of: UInt8(ascii: "."))! + 1
            tampered[signatureStart + 3] = tampered[signatureStart + 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            let code = failureCode { _ = try verifier.verify(String(decoding: tampered, as: UTF8.self), as: testCase.kind) }
            #expect(code == .invalidSignature, "\(name) with its signature changed")
        }
    }

    @Test func appleTransactionVectorIsValid() throws { try expectCase("apple.transactionInfo") }
    @Test func appleRenewalInfoVectorIsValid() throws { try expectCase("apple.renewalInfo") }
    @Test func appleTestNotificationVectorIsValid() throws { try expectCase("apple.testNotification") }
    @Test func appleWrongBundleIdVectorIsWrongBundleId() throws { try expectCase("apple.wrongBundleId") }
    @Test func appleMissingX5cVectorIsInvalidFormat() throws { try expectCase("apple.missingX5CHeaderClaim") }

    @Test func appleVectorsAreUntrustedUnderAppleRoot() throws {
        try expectCase("apple.transactionInfo.againstAppleRoot")
        try expectCase("apple.renewalInfo.againstAppleRoot")
        try expectCase("apple.testNotification.againstAppleRoot")
    }

    @Test func appleTransactionVectorDecodesItsFields() throws {
        let testCase = try catalogueCase("apple.transactionInfo")
        let verified = try testCase.makeVerifier().verify(testCase.jws, as: .transaction)
        #expect(verified.isAppleSigned)
        #expect(verified.signedDate == Fixtures.appleMockSignedDate)
        #expect(verified.environment == .sandbox)
        #expect(verified.payload["bundleId"] == "com.example")
        #expect(String(decoding: verified.payloadBytes, as: UTF8.self).contains("\"signedDate\":1672956154000"))
    }

    /// Apple's mock transaction lacks `transactionId`: the chain and the app checks pass, the typed
    /// view refuses it.
    @Test func typedHelperRefusesPayloadWithoutRequiredFields() throws {
        let testCase = try catalogueCase("apple.transactionInfo")
        let code = failureCode { _ = try testCase.makeVerifier().verifyTransaction(testCase.jws) }
        #expect(code == .invalidFormat)
    }

    @Test func xcodeDataIsRefusedUnlessXcodeIsListed() throws {
        for file in ["xcode-signed-transaction", "xcode-signed-renewal-info", "xcode-signed-app-transaction"] {
            try expectCase("xcode/\(file).refusedByDefault")
            try expectCase("xcode/\(file).xcodeListed")
        }
    }

    @Test func xcodeDataIsMarkedNotAppleSigned() throws {
        let testCase = try catalogueCase("xcode/xcode-signed-transaction.xcodeListed")
        let verifier = try testCase.makeVerifier()
        let verified = try verifier.verify(testCase.jws)
        #expect(verified.kind == .transaction)
        #expect(!verified.isAppleSigned)
        #expect(verified.environment == .xcode)
        #expect(verified.signedDate == 1_697_679_936_056)  // fractional ms truncated
        let transaction = try verifier.verifyTransaction(testCase.jws)
        #expect(transaction.productId == "pass.premium")
        #expect(transaction.purchaseDate == 1_697_679_936_049)
        let appTransaction = try verifier.verifyAppTransaction(try Fixtures.appleJWS("xcode/xcode-signed-app-transaction"))
        #expect(appTransaction.receiptType == .xcode)
    }

    @Test func xcodeDataNeedsTheRightBundleEvenWhenListed() throws {
        let verifier = try makeVerifier(roots: [], bundleId: "com.example", environments: [.xcode])
        let code = failureCode { _ = try verifier.verify(try! Fixtures.appleJWS("xcode/xcode-signed-transaction")) }
        #expect(code == .wrongBundleId)
    }
}

@Suite struct TestCAVerificationTests {
    @Test func signedTransactionIsValid() throws { try expectCase("ca.transaction") }
    @Test func signedRenewalInfoIsValid() throws { try expectCase("ca.renewalInfo") }
    @Test func signedNotificationIsValid() throws { try expectCase("ca.notification") }
    @Test func signedAppTransactionIsValid() throws { try expectCase("ca.appTransaction") }
    @Test func productionNotificationWithRightAppAppleIdIsValid() throws { try expectCase("ca.production.notification") }
    @Test func tamperedPayloadIsInvalidSignature() throws { try expectCase("ca.tamperedPayload") }
    @Test func tamperedSignatureIsInvalidSignature() throws { try expectCase("ca.tamperedSignature") }
    @Test func shortSignatureIsInvalidSignature() throws { try expectCase("ca.shortSignature") }
    @Test func signatureByAnotherKeyIsInvalidSignature() throws { try expectCase("ca.signedByAnotherKey") }
    @Test func leafWithoutAppleMarkerIsUntrusted() throws { try expectCase("ca.leafWithoutAppleMarker") }
    @Test func intermediateWithoutAppleMarkerIsUntrusted() throws { try expectCase("ca.intermediateWithoutAppleMarker") }
    @Test func leafExpiredAtSignedDateIsUntrusted() throws { try expectCase("ca.leafExpiredAtSignedDate") }
    @Test func expiredLeafIsValidForDataSignedInsideItsWindow() throws { try expectCase("ca.leafValidAtPastSignedDate") }
    @Test func rootExpiredAtSignedDateIsUntrusted() throws { try expectCase("ca.rootExpiredAtSignedDate") }
    @Test func unpinnedRootIsUntrusted() throws { try expectCase("ca.unpinnedRoot") }
    @Test func anyPinnedRootIsEnough() throws { try expectCase("ca.bothRootsPinned") }
    @Test func rootInX5cIsIgnored() throws { try expectCase("ca.x5cRootIgnored") }
    @Test func algNoneIsUnsupportedAlgorithm() throws { try expectCase("ca.algNone") }
    @Test func algHS256IsUnsupportedAlgorithm() throws { try expectCase("ca.algHS256") }
    @Test func algES384IsUnsupportedAlgorithm() throws { try expectCase("ca.algES384WithChain") }
    @Test func twoCertificateChainIsInvalidFormat() throws { try expectCase("ca.x5cTwoCertificates") }
    @Test func fourCertificateChainIsInvalidFormat() throws { try expectCase("ca.x5cFourCertificates") }
    @Test func missingX5cIsInvalidFormat() throws { try expectCase("ca.x5cMissing") }
    @Test func x5cOfNonCertificatesIsInvalidFormat() throws { try expectCase("ca.x5cNotCertificates") }
    @Test func payloadThatIsNotAnObjectIsInvalidFormat() throws { try expectCase("ca.payloadNotAnObject") }
    @Test func otherAppIsWrongBundleId() throws {
        try expectCase("ca.wrongBundleId")
        try expectCase("ca.notification.wrongBundleId")
    }
    @Test func otherEnvironmentIsWrongEnvironment() throws {
        try expectCase("ca.wrongEnvironment")
        try expectCase("ca.renewalInfo.wrongEnvironment")
        try expectCase("ca.appTransaction.wrongEnvironment")
    }
    @Test func productionDataOfAnotherAppAppleIdIsWrongAppAppleId() throws {
        try expectCase("ca.production.notification.wrongAppAppleId")
        try expectCase("ca.production.appTransaction.wrongAppAppleId")
    }
    @Test func notificationAppIsReadFromSummaryTokenAndAppData() throws {
        try expectCase("ca.notification.summary")
        try expectCase("ca.notification.sandboxExternalPurchaseToken")
        try expectCase("ca.notification.productionExternalPurchaseToken")
        try expectCase("ca.notification.appData")
    }
    @Test func garbageIsInvalidFormat() throws {
        for name in [
            "garbage.empty", "garbage.twoParts", "garbage.fourParts", "garbage.notBase64", "garbage.headerNotJSON",
            "garbage.headerNotObject", "garbage.huge", "garbage.hugeButWellFormed",
        ] {
            try expectCase(name)
        }
    }

    @Test func everyCatalogueCaseGivesItsExpectedCode() throws {
        for testCase in try sharedCatalogue.get().cases {
            let code = failureCode { _ = try testCase.makeVerifier().verify(testCase.jws, as: testCase.kind) }
            #expect(code == testCase.expected, "\(testCase.name): got \(code?.rawValue ?? "valid")")
        }
    }

    @Test func typedHelpersDecodeOurPayloads() throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER])
        let signer = catalogue.ca.signer()
        let transaction = try verifier.verifyTransaction(try signer.sign(transactionPayload()))
        #expect(transaction.transactionId == "2000000000000001")
        #expect(transaction.price == 120_000)
        let renewal = try verifier.verifyRenewalInfo(try signer.sign(renewalInfoPayload()))
        #expect(renewal.willAutoRenew)
        let notification = try verifier.verifyNotification(try signer.sign(notificationPayload()))
        #expect(notification.notificationType == .test)
        #expect(notification.appAppleId == 1234)
        let app = try verifier.verifyAppTransaction(try signer.sign(appTransactionPayload()))
        #expect(app.receiptType == .sandbox)
    }

    @Test func genericVerifyTellsTheKind() throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER])
        let signer = catalogue.ca.signer()
        #expect(try verifier.verify(try signer.sign(transactionPayload())).kind == .transaction)
        #expect(try verifier.verify(try signer.sign(renewalInfoPayload())).kind == .renewalInfo)
        #expect(try verifier.verify(try signer.sign(notificationPayload())).kind == .notification)
        #expect(try verifier.verify(try signer.sign(appTransactionPayload())).kind == .appTransaction)
        // Unknown kinds still need an accepted environment and, if they name one, the right bundle.
        #expect(
            try verifier.verify(try signer.sign(["environment": "Sandbox", "signedDate": .int(Fixtures.now)])).kind == .unknown)
        #expect(
            failureCode { _ = try verifier.verify(try! signer.sign(["signedDate": .int(Fixtures.now)])) } == .wrongEnvironment)
        #expect(
            failureCode {
                _ = try verifier.verify(
                    try! signer.sign(["environment": "Sandbox", "bundleId": "com.other", "signedDate": .int(Fixtures.now)]))
            } == .wrongBundleId)
    }

    @Test func anyAppPolicyAcceptsEveryBundle() throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER], bundleId: nil)
        let verified = try verifier.verify(try catalogue.ca.signer().sign(transactionPayload(bundleId: "com.anything")))
        #expect(verified.payload["bundleId"] == "com.anything")
    }

    @Test func severalAppsAreMatchedOneByOne() throws {
        let catalogue = try sharedCatalogue.get()
        let apps = [
            AppIdentity(bundleId: "com.example.a", appAppleId: 1, environments: [.production]),
            AppIdentity(bundleId: "com.example.b", appAppleId: 2, environments: [.sandbox]),
        ]
        let verifier = try SignedDataVerifier(trustedRoots: [catalogue.ca.rootDER], apps: apps, clock: { Fixtures.now })
        let signer = catalogue.ca.signer()
        func code(_ payload: JSONValue) -> VerificationCode? {
            failureCode { _ = try verifier.verify(try! signer.sign(payload)) }
        }
        #expect(code(transactionPayload(bundleId: "com.example.a", environment: "Production")) == nil)
        #expect(code(transactionPayload(bundleId: "com.example.b", environment: "Sandbox")) == nil)
        #expect(code(transactionPayload(bundleId: "com.example.a", environment: "Sandbox")) == .wrongEnvironment)
        #expect(code(transactionPayload(bundleId: "com.example.c", environment: "Sandbox")) == .wrongBundleId)
        #expect(
            code(notificationPayload(bundleId: "com.example.a", appAppleId: 2, environment: "Production")) == .wrongAppAppleId)
        #expect(code(notificationPayload(bundleId: "com.example.b", appAppleId: 99, environment: "Sandbox")) == nil)
    }

    @Test func reasonsNeverContainTheToken() throws {
        for testCase in try sharedCatalogue.get().cases where testCase.expected != nil && testCase.jws.count > 8 {
            let error = #expect(throws: VerificationFailure.self, "\(testCase.name) is expected to fail") {
                _ = try testCase.makeVerifier().verify(testCase.jws, as: testCase.kind)
            }
            for part in testCase.jws.split(separator: ".") where part.count > 16 {
                #expect(error?.reason.contains(part) == false, "\(testCase.name) leaks the JWS in its reason")
            }
        }
    }
}

@Suite struct ChainCacheTests {
    /// A leaf valid for one day in the past: data signed inside it passes, outside it fails, whether the
    /// chain is verified afresh or found in the cache.
    @Test func cacheHitsCheckTheSignedDateWindow() throws {
        let now = Fixtures.now
        var options = SigningCertificateAuthority.Options()
        let notBefore = now - 10 * Fixtures.dayMs
        let notAfter = now - 9 * Fixtures.dayMs
        options.leafValidity = CertificateValidity(notBeforeMs: notBefore, notAfterMs: notAfter)
        let ca = try SigningCertificateAuthority(nowMs: now, options: options)
        let signer = ca.signer()
        // Boundaries follow OpenSSL: valid when notBefore <= t < notAfter, at whole seconds.
        let dates: [(Int64, VerificationCode?)] = [
            (notBefore - 1000, .untrustedCertificate), (notBefore - 1, .untrustedCertificate), (notBefore, nil),
            (notBefore + 1, nil), (notAfter - 1, nil), (notAfter, .untrustedCertificate), (notAfter + 999, .untrustedCertificate),
            (now, .untrustedCertificate),
        ]
        let warm = try makeVerifier(roots: [ca.rootDER])
        _ = try warm.verify(try signer.sign(transactionPayload(signedDate: notBefore + 5000)))
        for (date, expected) in dates {
            let jws = try signer.sign(transactionPayload(signedDate: date))
            let cold = failureCode { _ = try makeVerifier(roots: [ca.rootDER]).verify(jws) }
            let hit = failureCode { _ = try warm.verify(jws) }
            #expect(cold == expected, "cold at \(date - notBefore) ms after notBefore")
            #expect(hit == expected, "cached at \(date - notBefore) ms after notBefore")
        }
    }

    @Test func payloadWithoutSignedDateUsesTheClock() throws {
        let now = Fixtures.now
        var options = SigningCertificateAuthority.Options()
        options.leafValidity = CertificateValidity(notBeforeMs: now - Fixtures.dayMs, notAfterMs: now + Fixtures.dayMs)
        let ca = try SigningCertificateAuthority(nowMs: now, options: options)
        let jws = try ca.signer().sign(["environment": "Sandbox", "bundleId": "com.example"])
        #expect(failureCode { _ = try makeVerifier(roots: [ca.rootDER], now: now).verify(jws) } == nil)
        #expect(
            failureCode { _ = try makeVerifier(roots: [ca.rootDER], now: now + 2 * Fixtures.dayMs).verify(jws) }
                == .untrustedCertificate)
    }

    @Test func evictedChainsAreVerifiedAgain() throws {
        let catalogue = try sharedCatalogue.get()
        let cas = [catalogue.ca, catalogue.otherCA]
        let verifier = try SignedDataVerifier(
            trustedRoots: cas.map(\.rootDER), apps: [AppIdentity(bundleId: "com.example")], clock: { Fixtures.now },
            chainCacheEntriesMax: 1)
        for round in 0..<4 {
            for ca in cas {
                #expect(
                    failureCode { _ = try verifier.verify(try! ca.signer().sign(transactionPayload())) } == nil, "round \(round)")
            }
        }
    }

    @Test func concurrentVerificationsAgree() async throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER], cacheEntries: 2)
        let good = try catalogue.ca.signer().sign(transactionPayload())
        let bad = try catalogue.otherCA.signer().sign(transactionPayload())
        let codes = await withTaskGroup(of: [VerificationCode?].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    (0..<50).map { i in failureCode { _ = try verifier.verify(i.isMultiple(of: 2) ? good : bad) } }
                }
            }
            var all: [[VerificationCode?]] = []
            for await codes in group { all.append(codes) }
            return all
        }
        for list in codes {
            for (i, code) in list.enumerated() { #expect(code == (i.isMultiple(of: 2) ? nil : .untrustedCertificate)) }
        }
    }
}

@Suite struct ForgeryTests {
    /// Thousands of random edits of a genuine JWS: none verifies unless what was signed is untouched
    /// (base64 has spare bits, so an edit of the signature's last character can decode to the same bytes).
    @Test(arguments: [false, true]) func randomEditsOfAGenuineJWSNeverVerify(leafKeyPrecomputed: Bool) throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER])
        let original = try catalogue.ca.signer().sign(transactionPayload())
        if leafKeyPrecomputed { warmPastPrecomputation(verifier, original) }
        let bytes = Array(original.utf8)
        let signingInputCount = bytes.lastIndex(of: UInt8(ascii: "."))!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/ {}\"".utf8)
        var random = SeededRandom(seed: 2026)
        for round in 0..<3000 {
            var edited = bytes
            switch round % 4 {
            case 0: edited[Int.random(in: 0..<edited.count, using: &random)] = alphabet.randomElement(using: &random)!
            case 1: edited.remove(at: Int.random(in: 0..<edited.count, using: &random))
            case 2: edited.insert(alphabet.randomElement(using: &random)!, at: Int.random(in: 0...edited.count, using: &random))
            default: edited = Array(edited.prefix(Int.random(in: 0..<edited.count, using: &random)))
            }
            guard edited != bytes else { continue }
            let text = String(decoding: edited, as: UTF8.self)
            do {
                _ = try verifier.verify(text)
                #expect(
                    edited.count >= signingInputCount
                        && Array(edited.prefix(signingInputCount)) == Array(bytes.prefix(signingInputCount)),
                    "round \(round): an edited JWS verified")
            } catch {
                #expect(error.code != .wrongBundleId && error.code != .wrongEnvironment, "round \(round): reached the app checks")
            }
        }
    }

    @Test func deeplyNestedPayloadIsInvalidFormat() throws {
        let catalogue = try sharedCatalogue.get()
        let verifier = try makeVerifier(roots: [catalogue.ca.rootDER])
        let nested = Array((String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)).utf8)
        let jws = try catalogue.ca.signer().sign(payloadBytes: nested, header: catalogue.ca.signer().header)
        #expect(failureCode { _ = try verifier.verify(jws) } == .invalidFormat)
    }
}
