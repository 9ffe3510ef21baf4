import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// Kakin's offer signatures and Apple's own (`app-store-server-library` 3.1.2, Python), made with the same
/// In-App Purchase key, verify the same way and say the same things: the legacy promotional offer signature,
/// the promotional offer V2 JWS and the introductory offer eligibility JWS. Each side checks the other's.
@Suite struct OfferSignatureInteropTests {
    static let script = Fixtures.packageRoot.appendingPathComponent("Tests/AppStoreSecurityTests/Interop/apple_offer_signatures.py")
    static let keyId = "L256SYR32L"
    static let issuerId = "68f8b4a4-8f4e-4b3f-9a57-54c1b0f6a101"
    static let bundleId = "com.example"

    /// Every claim Apple's creators write, and Kakin must write too.
    static let promotionalClaims: Set<String> = ["iss", "bid", "aud", "iat", "nonce", "productId", "offerIdentifier", "transactionId"]
    static let eligibilityClaims: Set<String> = ["iss", "bid", "aud", "iat", "nonce", "productId", "allowIntroductoryOffer", "transactionId"]

    static func isLowercaseUUID(_ s: String?) -> Bool {
        guard let s, UUID(uuidString: s) != nil else { return false }
        return s == s.lowercased()
    }

    @Test(.enabled(if: !InteropTests.skipped, "KAKIN_SKIP_INTEROP=1"))
    func allThreeOfferSignaturesAgreeWithApplesLibrary() throws {
        guard FileManager.default.isExecutableFile(atPath: InteropTests.python.path) else {
            Issue.record("Apple's Python library is needed: python3 -m venv .venv && .venv/bin/pip install app-store-server-library==3.1.2")
            return
        }
        let keyPEM = String(decoding: try Fixtures.appleFile("certs/testSigningKey.p8"), as: UTF8.self)
        let privateKey = try P256PrivateKey(pemPKCS8: keyPEM)
        let key = SignedRequestJWS.Key(privateKey: privateKey, keyId: Self.keyId, issuerId: Self.issuerId)
        let now = Int64(Date().timeIntervalSince1970)

        // Legacy: with a customer's token (upper case on purpose: it is signed lower-cased) and with none (the
        // empty string seed 002 learned about).
        let legacy = [
            PromotionalOfferSignature(bundleId: Self.bundleId, keyIdentifier: Self.keyId, productIdentifier: "premium.monthly",
                                      offerIdentifier: "promo.6m.free", appAccountToken: "A2E1C0E4-7E7B-4A4B-9C32-55C3D9F4B1AA",
                                      nonce: "0e4a4b8e-1c51-4b1b-8dda-0f0c1d8e9a10", timestampMs: now * 1000),
            PromotionalOfferSignature(bundleId: Self.bundleId, keyIdentifier: Self.keyId, productIdentifier: "premium.yearly",
                                      offerIdentifier: "promo.yearly.1m.free", appAccountToken: nil,
                                      nonce: "9b1d3c55-0a7e-4d0f-8b7c-3e2f1a6d5c44", timestampMs: now * 1000 + 1),
        ]
        let kakinV2 = try SignedRequestJWS.promotionalOffer(
            productId: "premium.monthly", offerIdentifier: "promo.1y.free", transactionId: "2000000123456789", bundleId: Self.bundleId,
            key: key, nonce: "5d0c3f7e-6a2b-4c1d-9e8f-7a6b5c4d3e2f", issuedAtSeconds: now)
        let kakinIntro = try SignedRequestJWS.introductoryOfferEligibility(
            productId: "premium.monthly", allowIntroductoryOffer: false, transactionId: "2000000123456789", bundleId: Self.bundleId,
            key: key, nonce: "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", issuedAtSeconds: now)
        // The same JWS with its offer changed after signing.
        var parts = kakinV2.split(separator: ".").map(String.init)
        var claims = try #require(StoredJWS.payload(kakinV2)?.objectValue)
        claims["offerIdentifier"] = "promo.forever.free"
        parts[1] = Base64.urlEncode(JSONValue.object(claims).serialized())
        let tampered = parts.joined(separator: ".")

        let request: JSONValue = [
            "key": ["keyPEM": .string(keyPEM), "keyId": .string(Self.keyId), "issuerId": .string(Self.issuerId), "bundleId": .string(Self.bundleId)],
            "legacy": .array(try legacy.map { o in
                [
                    "productId": .string(o.productIdentifier), "offerId": .string(o.offerIdentifier), "appAccountToken": .string(o.appAccountToken),
                    "nonce": .string(o.nonce), "timestampMs": .int(o.timestampMs), "kakinSignature": .string(try o.signature(key: privateKey)),
                ]
            }),
            "promotionalOfferV2": ["productId": "premium.monthly", "offerId": "promo.1y.free", "transactionId": "2000000123456789",
                                   "kakinJWS": .string(kakinV2)],
            "introductoryOfferEligibility": ["productId": "premium.monthly", "allowIntroductoryOffer": false, "transactionId": "2000000123456789",
                                             "kakinJWS": .string(kakinIntro)],
            "tamperedKakinJWS": .string(tampered),
        ]
        let answer = try InteropTests.askApple(request, script: Self.script)

        // 1. Legacy: Apple's library accepts Kakin's signatures, and Kakin accepts Apple's for the same seven fields.
        let legacyAnswers = try #require(answer["legacy"]?.arrayValue)
        #expect(legacyAnswers.count == legacy.count)
        for (fields, apple) in zip(legacy, legacyAnswers) {
            #expect(apple["kakinSignatureValid"] == true, "Apple's side refuses Kakin's legacy signature for \(fields.offerIdentifier)")
            let pythonSignature = try #require(apple["pythonSignature"]?.stringValue)
            #expect(fields.isValidSignature(pythonSignature, publicKey: privateKey.publicKey), "Kakin refuses Apple's legacy signature")
            var otherToken = fields
            otherToken.appAccountToken = fields.appAccountToken == nil ? "a2e1c0e4-7e7b-4a4b-9c32-55c3d9f4b1aa" : nil
            #expect(!otherToken.isValidSignature(pythonSignature, publicKey: privateKey.publicKey), "the token is part of what is signed")
        }

        // 2 and 3. JWS: each side verifies the other's, and both carry the same header and claims.
        let verifier = SignedRequestVerifier(keys: [Self.keyId: .init(publicKey: privateKey.publicKey, issuerId: Self.issuerId)],
                                             bundleId: Self.bundleId)
        for (name, audience, expectedClaims, fixed) in [
            ("promotionalOfferV2", SignedRequestJWS.Audience.promotionalOffer, Self.promotionalClaims,
             ["productId": "premium.monthly", "offerIdentifier": "promo.1y.free", "transactionId": "2000000123456789"] as [String: JSONValue]),
            ("introductoryOfferEligibility", .introductoryOfferEligibility, Self.eligibilityClaims,
             ["productId": "premium.monthly", "allowIntroductoryOffer": false, "transactionId": "2000000123456789"]),
        ] {
            let side = try #require(answer[name])
            let pythonJWS = try #require(side["pythonJWS"]?.stringValue)
            let ours = try verifier.verify(pythonJWS, audience: audience)  // Kakin verifies Apple's.
            #expect(side["kakin"]?["valid"] == true, "\(name): PyJWT refuses Kakin's JWS: \(side["kakin"]?["error"]?.stringValue ?? "")")
            #expect(side["python"]?["valid"] == true)
            let appleClaims = try #require(side["python"]?["claims"]?.objectValue)
            let kakinClaims = try #require(side["kakin"]?["claims"]?.objectValue)
            #expect(Set(appleClaims.keys) == expectedClaims, "\(name): Apple's claims")
            #expect(Set(kakinClaims.keys) == expectedClaims, "\(name): Kakin's claims")
            #expect(ours.claims.objectValue.map { Set($0.keys) } == expectedClaims)
            #expect(side["kakin"]?["header"] == side["python"]?["header"], "\(name): headers differ")
            #expect(side["kakin"]?["header"] == ["alg": "ES256", "kid": .string(Self.keyId), "typ": "JWT"])
            for claims in [appleClaims, kakinClaims] {
                #expect(claims["iss"] == .string(Self.issuerId))
                #expect(claims["bid"] == .string(Self.bundleId))
                #expect(claims["aud"] == .string(audience.rawValue))
                #expect(Self.isLowercaseUUID(claims["nonce"]?.stringValue), "\(name): nonce \(claims["nonce"] ?? .null)")
                #expect(abs((claims["iat"]?.int64Value ?? 0) - now) <= 300, "\(name): iat is seconds, now")
                for (k, v) in fixed { #expect(claims[k] == v, "\(name): \(k)") }
            }
        }

        // Tampering shows on both sides.
        #expect(answer["tamperedKakinJWS"]?["valid"] == false)
        #expect(throws: SignedRequestFailure(.invalidSignature)) { try verifier.verify(tampered, audience: .promotionalOffer) }
    }
}
