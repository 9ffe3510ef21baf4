import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// Apple's signed Get Retention Message request, verified by the same chain rules as every other signed
/// payload with Apple's app checks for it, and the response body Kakin signs back.
@Suite struct RetentionMessagingTests {
    static func request(environment: String = "Production", appAppleId: Int64 = 1234, signedDate: Int64 = Fixtures.now) -> JSONValue {
        ["originalTransactionId": "2000000000000001", "appAppleId": .int(appAppleId), "productId": "premium.monthly",
         "userLocale": "en-US", "requestIdentifier": "3db5c98d-8acf-4e29-831e-8e1f82f9f6e9", "signedDate": .int(signedDate),
         "environment": .string(environment)]
    }

    static let ca = try! SigningCertificateAuthority(nowMs: Fixtures.now)

    @Test func aSignedRequestVerifiesAndDecodes() throws {
        let verifier = try makeVerifier(roots: [Self.ca.rootDER], appAppleId: 1234, environments: [.production, .sandbox])
        let r = try verifier.verifyRealtimeRequest(try Self.ca.signer().sign(Self.request()))
        #expect(r.originalTransactionId == "2000000000000001" && r.productId == "premium.monthly" && r.environment == .production)
        // Told apart from other payloads by its fields.
        #expect(try verifier.verify(try Self.ca.signer().sign(Self.request())).kind == .realtimeRequest)
    }

    @Test func applesAppChecksApply() throws {
        let verifier = try makeVerifier(roots: [Self.ca.rootDER], appAppleId: 1234, environments: [.production])
        let sign = { (p: JSONValue) in try Self.ca.signer().sign(p) }
        #expect(failureCode { _ = try verifier.verifyRealtimeRequest(try sign(Self.request(appAppleId: 999))) } == .wrongAppAppleId)
        #expect(failureCode { _ = try verifier.verifyRealtimeRequest(try sign(Self.request(environment: "Sandbox"))) } == .wrongEnvironment)
        // Sandbox requests carry no checked App Apple ID (as Apple's library checks it in Production only).
        let sandbox = try makeVerifier(roots: [Self.ca.rootDER], appAppleId: 1234, environments: [.sandbox])
        #expect(failureCode { _ = try sandbox.verifyRealtimeRequest(try sign(Self.request(environment: "Sandbox", appAppleId: 999))) } == nil)
        // Another CA: untrusted.
        let other = try SigningCertificateAuthority(nowMs: Fixtures.now)
        #expect(failureCode { _ = try verifier.verifyRealtimeRequest(try other.signer().sign(Self.request())) } == .untrustedCertificate)
        // A payload missing a required field: invalid format.
        guard case .object(var o) = Self.request() else { return }
        o["userLocale"] = nil
        #expect(failureCode { _ = try verifier.verifyRealtimeRequest(try sign(.object(o))) } == .invalidFormat)
    }

    @Test func applesLocalTestingVectorIsReadWhereLocalTestingIsAccepted() throws {
        let json = try JSONParser.parse(try Fixtures.appleFile("models/decodedRealtimeRequest.json"))
        let jws = try Self.ca.signer().sign(json)
        let local = try makeVerifier(roots: [Self.ca.rootDER], appAppleId: 531412, environments: [.localTesting])
        #expect(try local.verifyRealtimeRequest(jws).requestIdentifier == "3db5c98d-8acf-4e29-831e-8e1f82f9f6e9")
        let production = try makeVerifier(roots: [Self.ca.rootDER], appAppleId: 531412)
        #expect(failureCode { _ = try production.verifyRealtimeRequest(jws) } == .wrongEnvironment)
    }

    @Test func responseBodiesAreApplesShapesAndTheOfferNamesTheOriginalTransaction() throws {
        let request = try RealtimeRequestPayload(json: Self.request())
        let key = SignedRequestJWS.Key(privateKey: try P256PrivateKey(), keyId: "KEY123", issuerId: "issuer-1")
        func body(_ a: RetentionAnswer, key k: SignedRequestJWS.Key? = key) throws(RetentionResponseError) -> JSONValue? {
            try RetentionMessageResponse.body(a, request: request, bundleId: "com.example", key: k, nonce: "5c1c6a1e-7d4b-4b53-9a1f-0c0d4c3b2a19",
                                              issuedAtSeconds: Fixtures.now / 1000)
        }
        let messageId = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
        #expect(try body(.message(messageId: messageId)) == ["message": ["messageIdentifier": .string(messageId)]])
        #expect(try body(.alternateProduct(productId: "premium.yearly", messageId: nil)) == ["alternateProduct": ["productId": "premium.yearly"]])
        #expect(try body(.none) == nil)
        let offer = try #require(try body(.promotionalOffer(productId: "premium.monthly", offerId: "promo.3m.half", messageId: messageId)))
        #expect(offer["promotionalOffer"]?["messageIdentifier"] == .string(messageId))
        let jws = try #require(offer["promotionalOffer"]?["promotionalOfferSignatureV2"]?.stringValue)
        let verified = try SignedRequestVerifier(keys: ["KEY123": .init(publicKey: key.privateKey.publicKey, issuerId: "issuer-1")], bundleId: "com.example")
            .verify(jws, audience: .promotionalOffer)
        #expect(verified.claims["transactionId"] == "2000000000000001", "required in retention-messaging replies: the request's originalTransactionId")
        #expect(verified.claims["productId"] == "premium.monthly" && verified.claims["offerIdentifier"] == "promo.3m.half")
        #expect(throws: RetentionResponseError.noSigningKey) { _ = try body(.promotionalOffer(productId: "p", offerId: "o", messageId: nil), key: nil) }
    }
}
