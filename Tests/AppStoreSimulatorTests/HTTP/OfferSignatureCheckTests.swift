import AppStoreSecurity
@testable import AppStoreSimulator
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// Signed offers, signed the way a backend signs them (`AppStoreSecurity`, the same code Kakin uses).
enum OfferSigning {
    static func key(_ sim: AppStoreSimulator) throws -> SignedRequestJWS.Key {
        let k = sim.apiKey
        return SignedRequestJWS.Key(privateKey: try P256PrivateKey(pemPKCS8: k.privateKeyPEM), keyId: k.keyId, issuerId: k.issuerId)
    }

    /// `offer.signature` for a purchase: the legacy fields StoreKit takes.
    static func legacy(_ sim: AppStoreSimulator, _ productId: String, _ offerId: String, token: String?, atMs: Int64? = nil,
                       nonce: String = UUID().uuidString.lowercased(), key: SignedRequestJWS.Key? = nil) throws -> JSONValue {
        let k = try key ?? Self.key(sim)
        let timestamp = atMs ?? sim.clock.nowMs()
        let fields = PromotionalOfferSignature(bundleId: sim.configuration.bundleId, keyIdentifier: k.keyId, productIdentifier: productId,
                                               offerIdentifier: offerId, appAccountToken: token, nonce: nonce, timestampMs: timestamp)
        return ["keyIdentifier": .string(k.keyId), "nonce": .string(nonce), "timestamp": .int(timestamp),
                "signature": .string(try fields.signature(key: k.privateKey))]
    }

    static func jws(_ sim: AppStoreSimulator, _ productId: String, _ offerId: String, transactionId: String? = nil, atMs: Int64? = nil,
                    bundleId: String? = nil) throws -> String {
        try SignedRequestJWS.promotionalOffer(productId: productId, offerIdentifier: offerId, transactionId: transactionId,
                                              bundleId: bundleId ?? sim.configuration.bundleId, key: try key(sim),
                                              nonce: UUID().uuidString.lowercased(), issuedAtSeconds: (atMs ?? sim.clock.nowMs()) / 1000)
    }

    static func eligibility(_ sim: AppStoreSimulator, _ productId: String, allow: Bool, transactionId: String = "704999999999999999") throws -> String {
        try SignedRequestJWS.introductoryOfferEligibility(productId: productId, allowIntroductoryOffer: allow, transactionId: transactionId,
                                                         bundleId: sim.configuration.bundleId, key: try key(sim),
                                                         nonce: UUID().uuidString.lowercased(), issuedAtSeconds: sim.clock.nowMs() / 1000)
    }
}

/// A purchase with a promotional offer is honoured only with a valid signature from one of the app's In-App
/// Purchase keys, fresh, used once, for this product and offer — otherwise refused with StoreKit's error.
@Suite struct OfferSignatureCheckTests {
    func buy(_ sim: AppStoreSimulator, _ body: JSONValue) async -> Reply { await call(sim, "POST", "/simulator/v1/purchases", body) }

    func promo(_ productId: String, _ offerId: String, token: String? = tokenA, signature: JSONValue? = nil, jws: String? = nil,
               extra: [String: JSONValue] = [:]) -> JSONValue {
        var offer: [String: JSONValue] = ["type": "promotional", "id": .string(offerId)]
        if let signature { offer["signature"] = signature }
        if let jws { offer["jws"] = .string(jws) }
        var body: [String: JSONValue] = ["productId": .string(productId), "offer": .object(offer)]
        if let token { body["appAccountToken"] = .string(token) }
        for (k, v) in extra { body[k] = v }
        return .object(body)
    }

    /// A subscriber of B who let it lapse (the usual audience of a promotional offer).
    func lapsed(_ sim: AppStoreSimulator) async throws -> String {
        let otid = try #require(await buy(sim, ["productId": "B", "appAccountToken": .string(tokenA)]).json["originalTransactionId"]?.stringValue)
        _ = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(40 * 86_400)])
        return otid
    }

    func expectRefused(_ reply: Reply, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(reply.status == 422, sourceLocation: sourceLocation)
        #expect(reply.json["error"]?["id"] == .string(id), "\(String(decoding: reply.body, as: UTF8.self))", sourceLocation: sourceLocation)
    }

    @Test func lapsedSubscriberBuysWithALegacySignatureAndResubscribesUnderTheOffer() async throws {
        let sim = try makeSimulator()
        let otid = try await lapsed(sim)
        let reply = await buy(sim, promo("B", "6m", signature: try OfferSigning.legacy(sim, "B", "6m", token: tokenA)))
        #expect(reply.status == 201)
        #expect(reply.json["outcome"] == "resubscribed")
        #expect(reply.json["originalTransactionId"] == .string(otid))
        let tx = decodeJWS(try #require(reply.json["signedTransaction"]?.stringValue))
        #expect(tx["offerType"] == 2)
        #expect(tx["offerIdentifier"] == "6m")
        #expect(tx["appAccountToken"] == .string(tokenA))
    }

    @Test func aV2JWSNamingTheCustomersTransactionBuysTheOfferToo() async throws {
        let sim = try makeSimulator()
        let otid = try await lapsed(sim)
        let reply = await buy(sim, promo("B", "1y", jws: try OfferSigning.jws(sim, "B", "1y", transactionId: otid)))
        #expect(reply.status == 201)
        #expect(decodeJWS(reply.json["signedTransaction"]!.stringValue!)["offerIdentifier"] == "1y")
        // A customer who never bought names their app transaction, which the simulator has never seen: fine.
        let first = await buy(sim, promo("B", "6m", token: tokenB, jws: try OfferSigning.jws(sim, "B", "6m", transactionId: "704123")))
        #expect(first.status == 201)
    }

    @Test func aSignedOfferForASubscriberOfTheSameProductWaitsForTheRenewal() async throws {
        let sim = try makeSimulator()
        _ = await buy(sim, ["productId": "B", "appAccountToken": .string(tokenA)])
        let reply = await buy(sim, promo("B", "6m", signature: try OfferSigning.legacy(sim, "B", "6m", token: tokenA)))
        #expect(reply.json["outcome"] == "offerPending")
        #expect(reply.json["notifications"]?.arrayValue?.first?["notificationType"] == "OFFER_REDEEMED")
    }

    @Test func promotionalOfferWithoutASignatureIsMissingOfferParameters() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        expectRefused(await buy(sim, promo("B", "6m")), "KKN-6014")
        let both = await buy(sim, promo("B", "6m", signature: try OfferSigning.legacy(sim, "B", "6m", token: tokenA),
                                        jws: try OfferSigning.jws(sim, "B", "6m")))
        #expect(both.status == 400)
    }

    @Test func tamperedSignaturesAreRefusedAndChangeNothing() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        let before = sim.core.withLock { $0.engine.store }
        let good = try OfferSigning.legacy(sim, "B", "6m", token: tokenA)
        var flipped = try #require(good.objectValue)
        var bytes = try #require(Base64.decode(flipped["signature"]!.stringValue!))
        bytes[bytes.count - 1] ^= 1
        flipped["signature"] = .string(Base64.encode(bytes))
        var otherTime = try #require(good.objectValue)
        otherTime["timestamp"] = .int(good["timestamp"]!.int64Value! + 1)
        let cases: [(String, JSONValue)] = [
            ("a flipped bit", promo("B", "6m", signature: .object(flipped))),
            ("another offer than signed", promo("B", "1y", signature: good)),
            ("another product than signed", promo("P", "6m", signature: good)),
            ("another timestamp than signed", promo("B", "6m", signature: .object(otherTime))),
            ("another customer's token", promo("B", "6m", token: tokenB, signature: good)),
            ("no token though one was signed", promo("B", "6m", token: nil, signature: good)),
            ("a token though none was signed", promo("B", "6m", signature: try OfferSigning.legacy(sim, "B", "6m", token: nil))),
            ("an unknown key", promo("B", "6m", signature: try OfferSigning.legacy(
                sim, "B", "6m", token: tokenA, key: .init(privateKey: try P256PrivateKey(), keyId: sim.apiKey.keyId, issuerId: "x")))),
            ("a JWS for another offer", promo("B", "1y", jws: try OfferSigning.jws(sim, "B", "6m"))),
            ("a JWS for another app", promo("B", "6m", jws: try OfferSigning.jws(sim, "B", "6m", bundleId: "com.example.other"))),
            ("a JWS naming another customer's transaction", promo("B", "6m", token: tokenB, jws: try OfferSigning.jws(
                sim, "B", "6m", transactionId: sim.core.withLock { $0.engine.store.transactions.keys.first! }))),
        ]
        for (name, body) in cases {
            let reply = await buy(sim, body)
            #expect(reply.status == 422, "\(name)")
            #expect(reply.json["error"]?["code"] == "invalid_offer_signature", "\(name): \(String(decoding: reply.body, as: UTF8.self))")
        }
        var jwsParts = try OfferSigning.jws(sim, "B", "6m").split(separator: ".").map(String.init)
        var claims = try #require(StoredJWS.payload(jwsParts.joined(separator: "."))?.objectValue)
        claims["offerIdentifier"] = "1y"
        jwsParts[1] = Base64.urlEncode(JSONValue.object(claims).serialized())
        expectRefused(await buy(sim, promo("B", "1y", jws: jwsParts.joined(separator: "."))), "KKN-6010")
        #expect(sim.core.withLock { $0.engine.store } == before)
    }

    @Test func aSignatureIsUsedOnceAndOnlyWithin24HoursOfTheAppStoresClock() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        let signature = try OfferSigning.legacy(sim, "B", "6m", token: tokenA)
        let stale = try OfferSigning.legacy(sim, "B", "1y", token: tokenA)
        #expect(await buy(sim, promo("B", "6m", signature: signature)).status == 201)
        expectRefused(await buy(sim, promo("B", "6m", signature: signature)), "KKN-6012")
        let jws = try OfferSigning.jws(sim, "B", "12m")
        #expect(await buy(sim, promo("B", "12m", jws: jws)).status == 201)
        expectRefused(await buy(sim, promo("B", "12m", jws: jws)), "KKN-6012")
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(24 * 3600 + 1)])
        expectRefused(await buy(sim, promo("B", "1y", signature: stale)), "KKN-6011")
        let future = try OfferSigning.legacy(sim, "B", "1y", token: tokenA, atMs: sim.clock.nowMs() + 25 * 3_600_000)
        expectRefused(await buy(sim, promo("B", "1y", signature: future)), "KKN-6011")
        #expect(await buy(sim, promo("B", "1y", signature: try OfferSigning.legacy(sim, "B", "1y", token: tokenA))).status == 201)
    }

    @Test func absurdSigningTimesAreRefusedAsStaleNotACrash() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        for ms in [Int64.max, Int64.min + 1, -1, 0] {
            expectRefused(await buy(sim, promo("B", "6m", signature: try OfferSigning.legacy(sim, "B", "6m", token: tokenA, atMs: ms))), "KKN-6011")
        }
        for seconds in [Int64.max, Int64.min + 1] {
            let jws = try SignedRequestJWS.sign(["productId": "B", "offerIdentifier": "6m"], audience: .promotionalOffer, bundleId: "com.example.app",
                                                key: try OfferSigning.key(sim), nonce: UUID().uuidString.lowercased(), issuedAtSeconds: seconds)
            expectRefused(await buy(sim, promo("B", "6m", jws: jws)), "KKN-6011")
        }
    }

    @Test func aKeyRegisteredWithTheSimulatorSignsOffersToo() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        let own = try P256PrivateKey()
        let spki = Base64.encode(own.publicKey.spkiDER)
        let pem = "-----BEGIN PUBLIC KEY-----\n\(spki)\n-----END PUBLIC KEY-----\n"
        #expect(await call(sim, "POST", "/simulator/v1/api-keys", ["keyId": "MYKEY12345", "publicKeyPEM": .string(pem)]).status == 201)
        let signature = try OfferSigning.legacy(sim, "B", "6m", token: tokenA, key: .init(privateKey: own, keyId: "MYKEY12345", issuerId: "me"))
        #expect(await buy(sim, promo("B", "6m", signature: signature)).status == 201)
    }

    @Test func unknownOfferIsInvalidOfferIdentifier() async throws {
        let sim = try makeSimulator()
        expectRefused(await buy(sim, promo("B", "nope", signature: try OfferSigning.legacy(sim, "B", "nope", token: tokenA))), "KKN-6013")
    }

    @Test func signedEligibilityOverridesTheAppStoresOwnBothWays() async throws {
        let sim = try makeSimulator()
        // Eligible by the App Store's count, but the server says no: no trial, a paid first month.
        let denied = await buy(sim, ["productId": "A", "appAccountToken": .string(tokenA),
                                     "introductoryOfferEligibility": .string(try OfferSigning.eligibility(sim, "A", allow: false))])
        #expect(denied.status == 201)
        #expect(decodeJWS(denied.json["signedTransaction"]!.stringValue!)["offerType"] == nil)
        #expect(decodeJWS(denied.json["signedTransaction"]!.stringValue!)["price"] == 4_990)
        let explicit = await buy(sim, ["productId": "Q", "appAccountToken": .string(tokenB), "offer": ["type": "introductory"],
                                       "introductoryOfferEligibility": .string(try OfferSigning.eligibility(sim, "Q", allow: false))])
        expectRefused(explicit, "KKN-6002")
        // tokenB used no intro yet… then lapses after a trial; the App Store says "used", the server says yes.
        let otid = try #require(await buy(sim, ["productId": "A", "appAccountToken": .string(tokenB)]).json["originalTransactionId"]?.stringValue)
        _ = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(40 * 86_400)])
        let again = await buy(sim, ["productId": "A", "appAccountToken": .string(tokenB),
                                    "introductoryOfferEligibility": .string(try OfferSigning.eligibility(sim, "A", allow: true, transactionId: otid))])
        #expect(again.status == 201)
        #expect(decodeJWS(again.json["signedTransaction"]!.stringValue!)["offerType"] == 1)
        // For another product, or naming another customer's transaction: refused.
        expectRefused(await buy(sim, ["productId": "B", "appAccountToken": .string(tokenB),
                                      "introductoryOfferEligibility": .string(try OfferSigning.eligibility(sim, "A", allow: true))]), "KKN-6015")
        expectRefused(await buy(sim, ["productId": "Q", "appAccountToken": .string(tokenA),
                                      "introductoryOfferEligibility": .string(try OfferSigning.eligibility(sim, "Q", allow: true, transactionId: otid))]),
                      "KKN-6015")
        expectRefused(await buy(sim, ["productId": "Q", "appAccountToken": .string(tokenA), "introductoryOfferEligibility": "x.y.z"]), "KKN-6015")
    }

    @Test func usedNoncesSurviveSavingAndLoadingTheState() async throws {
        let sim = try makeSimulator()
        _ = try await lapsed(sim)
        let signature = try OfferSigning.legacy(sim, "B", "6m", token: tokenA)
        #expect(await buy(sim, promo("B", "6m", signature: signature)).status == 201)
        let copy = try AppStoreSimulator(stateFile: sim.snapshot(), sink: nil)
        expectRefused(await buy(copy, promo("B", "6m", signature: signature)), "KKN-6012")
    }
}
