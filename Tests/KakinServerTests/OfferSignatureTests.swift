import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
@testable import KakinServer
import KakinService
import Testing

/// The app asks Kakin for an offer signature; Kakin decides by the app's offer rules, signs with the In-App
/// Purchase key (local mode: the simulator's own), and the simulator honours it — the whole flow StoreKit
/// would run: app → Kakin (signature) → App Store (checks) → Kakin (notification).
@Suite(.serialized) struct OfferSignatureTests {
    static let product = "premium.monthly"

    func sign(_ k: SimulatedKakin, _ customer: String, _ offerId: String, format: String = "legacy", product: String = product,
              appTransactionId: String? = nil) async -> (status: Int, json: JSONValue) {
        var body: [String: JSONValue] = ["productId": .string(product), "offerId": .string(offerId), "format": .string(format)]
        if let appTransactionId { body["appTransactionId"] = .string(appTransactionId) }
        return await k.kakin("POST", "/v1/customers/\(customer)/offers/signatures", .object(body))
    }

    /// Buys in the simulator with what Kakin signed, as the app passes it to StoreKit.
    @discardableResult
    func buy(_ k: SimulatedKakin, _ customer: String, _ offerId: String, with signed: JSONValue, product: String = product) async throws -> JSONValue {
        var offer: [String: JSONValue] = ["type": "promotional", "id": .string(offerId)]
        if let jws = signed["jws"] {
            offer["jws"] = jws
        } else {
            offer["signature"] = ["keyIdentifier": signed["keyIdentifier"]!, "nonce": signed["nonce"]!, "timestamp": signed["timestamp"]!,
                                  "signature": signed["signature"]!]
        }
        return try await k.sim("POST", "/simulator/v1/purchases", ["productId": .string(product),
                                                                   "appAccountToken": .string(try await k.token(customer)), "offer": .object(offer)])
    }

    /// Subscribed (the free week, then a paid month), cancelled, and lapsed.
    @discardableResult
    func lapse(_ k: SimulatedKakin, _ customer: String, product: String = product) async throws -> String {
        let ot = try #require(try await k.buy(customer, product)["originalTransactionId"]?.stringValue)
        try await k.advance(days: 10)
        try await k.action(ot, "disableAutoRenew")
        try await k.advance(days: 40)
        #expect(try await k.subscription(customer)["state"] == "expired")
        return ot
    }

    func expectError(_ answer: (status: Int, json: JSONValue), _ status: Int, _ id: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.status == status, sourceLocation: sourceLocation)
        #expect(answer.json["error"]?["id"] == .string(id), "\(answer.json)", sourceLocation: sourceLocation)
    }

    @Test func lapsedSubscriberGetsALegacySignatureAndBuysTheOfferWithIt() async throws {
        try await SimulatedKakin.with { k in
            let ot = try await lapse(k, "u1")
            let signed = await sign(k, "u1", "promo.6m.free")
            #expect(signed.status == 201)
            #expect(k.app.metrics.value(.offersSigned) == 1)
            let token = try await k.token("u1")
            let key = k.simulator.apiKey
            #expect(signed.json["keyIdentifier"] == .string(key.keyId), "local mode signs with the simulator's In-App Purchase key")
            #expect(signed.json["appAccountToken"] == .string(token))
            #expect(signed.json["timestamp"] == .int(k.nowMs), "Kakin's clock is the simulator's")
            let nonce = try #require(signed.json["nonce"]?.stringValue)
            #expect(UUID(uuidString: nonce) != nil && nonce == nonce.lowercased())
            let fields = PromotionalOfferSignature(bundleId: Catalog.demoBundleId, keyIdentifier: key.keyId, productIdentifier: Self.product,
                                                   offerIdentifier: "promo.6m.free", appAccountToken: token, nonce: nonce,
                                                   timestampMs: k.nowMs)
            #expect(fields.isValidSignature(signed.json["signature"]!.stringValue!, publicKey: try P256PrivateKey(pemPKCS8: key.privateKeyPEM).publicKey))

            let bought = try await buy(k, "u1", "promo.6m.free", with: signed.json)
            #expect(bought["outcome"] == "resubscribed")
            #expect(bought["originalTransactionId"] == .string(ot))
            let sub = try await k.subscription("u1")
            #expect(sub["state"] == "subscribed")
            #expect(sub["offer"] == ["type": "promotional", "id": "promo.6m.free"])
            // StoreKit would refuse the same signature twice.
            await #expect(throws: SimulatedKakin.SimulatorRefused.self) { try await buy(k, "u1", "promo.6m.free", with: signed.json) }
        }
    }

    @Test func jwsSignatureNamesTheCustomersLatestTransactionInTheGroup() async throws {
        try await SimulatedKakin.with { k in
            let first = try await k.buy("u1", Self.product)
            try await k.advance(days: 10)  // the trial renewed into a paid month: a newer transaction
            let latest = try #require(try await k.sim("GET", "/simulator/v1/subscriptions/\(first["originalTransactionId"]!.stringValue!)")["latestTransactionId"])
            let signed = await sign(k, "u1", "promo.1y.free", format: "jws")
            #expect(signed.status == 201)
            let jws = try #require(signed.json["jws"]?.stringValue)
            let claims = try #require(StoredJWS.payload(jws))
            #expect(claims["transactionId"] == latest)
            #expect(claims["iss"] == .string(k.simulator.apiKey.issuerId))
            #expect(claims["aud"] == "promotional-offer")
            #expect(claims["offerIdentifier"] == "promo.1y.free")
            let header = try #require(jws.split(separator: ".").first.flatMap { Base64.decode(String($0)) }.flatMap { try? JSONParser.parse($0) })
            #expect(header["kid"] == .string(k.simulator.apiKey.keyId))
            let bought = try await buy(k, "u1", "promo.1y.free", with: signed.json)
            #expect(bought["outcome"] == "offerPending")
            #expect(try await k.subscription("u1")["pendingOffer"]?["id"] == "promo.1y.free")
            // The same offer waiting for the renewal is not signed again.
            expectError(await sign(k, "u1", "promo.1y.free", format: "jws"), 403, "KKN-5003")
        }
    }

    @Test func theAppsOfferRulesDecideWhoIsSigned() async throws {
        let rules = [OfferRule(offerId: "promo.3m.half", eligibility: .current), OfferRule(offerId: "promo.6m.free", eligibility: .lapsed, maxRedemptions: 1),
                     OfferRule(offerId: "promo.1y.free", eligibility: .anyone)]
        try await SimulatedKakin.with(offerRules: rules) { k in
            // A customer who never subscribed: only `anyone` offers; a JWS names their app transaction.
            expectError(await sign(k, "new", "promo.3m.half"), 403, "KKN-5001")
            expectError(await sign(k, "new", "promo.6m.free"), 403, "KKN-5001")
            expectError(await sign(k, "new", "promo.yearly.1m.free", product: "premium.yearly"), 403, "KKN-5001")  // no rule: has or had one
            let anyone = await sign(k, "new", "promo.1y.free", format: "jws", appTransactionId: "704000000000123456")
            #expect(anyone.status == 201)
            #expect(StoredJWS.payload(anyone.json["jws"]!.stringValue!)?["transactionId"] == "704000000000123456")

            // A current subscriber: current and default offers, not the lapsed one.
            _ = try await k.buy("cur", Self.product)
            #expect(await sign(k, "cur", "promo.3m.half").status == 201)
            #expect(await sign(k, "cur", "promo.yearly.1m.free", product: "premium.yearly").status == 201)
            let notLapsed = await sign(k, "cur", "promo.6m.free")
            expectError(notLapsed, 403, "KKN-5001")
            #expect(notLapsed.json["error"]?["code"] == "offer_not_eligible")

            // A lapsed one: the win-back offer, once.
            try await lapse(k, "gone")
            expectError(await sign(k, "gone", "promo.3m.half"), 403, "KKN-5001")
            try await buy(k, "gone", "promo.6m.free", with: await sign(k, "gone", "promo.6m.free").json)
            let ot = try #require(try await k.subscription("gone")["originalTransactionId"]?.stringValue)
            try await k.action(ot, "disableAutoRenew")
            try await k.advance(days: 200)
            #expect(try await k.subscription("gone")["state"] == "expired")
            expectError(await sign(k, "gone", "promo.6m.free"), 403, "KKN-5002")
        }
    }

    @Test func badRequestsAreRefusedWithTheirOwnIds() async throws {
        try await SimulatedKakin.with { k in
            try await lapse(k, "u1")
            expectError(await sign(k, "u1", "promo.nope"), 422, "KKN-5004")
            expectError(await sign(k, "u1", "promo.6m.free", product: "nope"), 422, "KKN-3002")
            expectError(await sign(k, "u1", "promo.6m.free", product: "coins.100"), 400, "KKN-1002")
            expectError(await sign(k, "u1", "promo.6m.free", format: "pem"), 400, "KKN-1002")
            expectError(await sign(k, "u1", "promo.6m.free", format: "jws", appTransactionId: "abc"), 400, "KKN-1002")
            expectError(await k.kakin("POST", "/v1/customers/u1/offers/signatures", ["productId": "premium.monthly", "offerId": "promo.6m.free",
                                                                                       "format": "legacy", "colour": "red"]), 400, "KKN-1002")
            expectError(await k.kakin("POST", "/v1/customers/u1/offers/introductory-eligibility", ["productId": "coins.100"]), 400, "KKN-1002")
        }
    }

    @Test func introductoryEligibilityIsKakinsOwnAndTheSimulatorHonoursIt() async throws {
        try await SimulatedKakin.with { k in
            // Never bought: eligible, named by the app transaction the app sends.
            let fresh = await k.kakin("POST", "/v1/customers/u1/offers/introductory-eligibility",
                                      ["productId": "premium.monthly", "appTransactionId": "704000000000000007"])
            #expect(fresh.status == 201)
            let claims = try #require(StoredJWS.payload(fresh.json["jws"]!.stringValue!))
            #expect(claims["allowIntroductoryOffer"] == true)
            #expect(claims["transactionId"] == "704000000000000007")
            #expect(claims["aud"] == "introductory-offer-eligibility")
            expectError(await k.kakin("POST", "/v1/customers/u1/offers/introductory-eligibility", ["productId": "premium.monthly"]), 400, "KKN-1002")

            // A paid subscription without an intro, lapsed: the App Store's own count would still give the trial;
            // Kakin says no (the contract's decision), and with its JWS the simulator charges the first month.
            try await lapse(k, "u2", product: "premium.plus.monthly")
            let denied = await k.kakin("POST", "/v1/customers/u2/offers/introductory-eligibility", ["productId": "premium.monthly"])
            let deniedClaims = try #require(StoredJWS.payload(denied.json["jws"]!.stringValue!))
            #expect(deniedClaims["allowIntroductoryOffer"] == false)
            #expect(try await k.status("u2")["eligibility"]?["introductoryOffer"]?["premium"] == false)
            let bought = try await k.sim("POST", "/simulator/v1/purchases", ["productId": "premium.monthly", "appAccountToken": .string(try await k.token("u2")),
                                                                           "introductoryOfferEligibility": denied.json["jws"]!])
            #expect(StoredJWS.payload(bought["signedTransaction"]!.stringValue!)?["offerType"] == nil)
            #expect(try await k.subscription("u2")["offer"] == .null)
        }
    }

    @Test func withoutAKeyOffersAreNotSignedAndOfferSigningChoosesTheKey() async throws {
        try await using(try await TestKakin.start(), stop: { await $0.stop() }) { k in
            let r = try await k.request("POST", "/v1/customers/u1/offers/signatures", json: ["productId": "premium.monthly", "offerId": "x", "format": "legacy"])
            #expect(r.errorId == "KKN-5004")  // an unknown offer is refused before the key is needed
        }
        let offerKey = try P256PrivateKey()
        let catalog = Catalog([Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1),
                                       promotionalOffers: [SubscriptionOffer(id: "p", type: .promotional, mode: .freeTrial, period: ISOPeriod(months: 1))])])
        func app(_ c: inout Configuration) {
            c.apps = [Configuration.App(bundleId: TestAppStore.bundleId, appAppleId: 1, environments: [.sandbox], catalog: catalog,
                                        offerRules: ["p": OfferRule(offerId: "p", eligibility: .anyone)])]
        }
        try await using(try await TestKakin.start(configure: app), stop: { await $0.stop() }) { k in
            let body: JSONValue = ["productId": "premium.monthly", "offerId": "p", "format": "legacy"]
            let r = try await k.request("POST", "/v1/customers/u1/offers/signatures", json: body)
            #expect(r.status == 501)
            #expect(r.errorId == "KKN-5005")
            let e = try await k.request("POST", "/v1/customers/u1/offers/introductory-eligibility",
                                        json: ["productId": "premium.monthly", "appTransactionId": "1"])
            #expect(e.errorId == "KKN-5005")
        }
        let pem = try offerKey.pemPKCS8()
        try await using(try await TestKakin.start(configure: { c in
            app(&c)
            c.offerSigning = Configuration.OfferSigning(issuerId: nil, keyId: "OFFERKEY01", privateKeyPEM: pem)
        }), stop: { await $0.stop() }) { k in
            let r = try await k.request("POST", "/v1/customers/u1/offers/signatures", json: ["productId": "premium.monthly", "offerId": "p", "format": "legacy"])
            #expect(r.status == 201)
            #expect(r.json["keyIdentifier"] == "OFFERKEY01")
            let fields = PromotionalOfferSignature(bundleId: TestAppStore.bundleId, keyIdentifier: "OFFERKEY01", productIdentifier: "premium.monthly",
                                                   offerIdentifier: "p", appAccountToken: r.json["appAccountToken"]?.stringValue,
                                                   nonce: r.json["nonce"]!.stringValue!, timestampMs: r.json["timestamp"]!.int64Value!)
            #expect(fields.isValidSignature(r.json["signature"]!.stringValue!, publicKey: offerKey.publicKey))
            // A JWS needs an issuer: none configured here.
            let jws = try await k.request("POST", "/v1/customers/u1/offers/signatures", json: ["productId": "premium.monthly", "offerId": "p", "format": "jws"])
            #expect(jws.errorId == "KKN-5005")
        }
    }
}
