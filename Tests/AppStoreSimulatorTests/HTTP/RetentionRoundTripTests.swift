import AppStoreSecurity
@testable import AppStoreSimulator
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// The retention-message round trip with every piece Kakin's route will call: the simulator's cancel action
/// asks "Kakin" (here a transport doing exactly what the route will: verify Apple's signed request, evaluate
/// the customer's status, let the app's `retentionMessaging` rules choose, sign the answer); the simulator
/// applies the promotional offer; the status then shows it pending.
@Suite struct RetentionRoundTripTests {
    /// Kakin's side of Get Retention Message, without the server.
    final class KakinSide: RetentionMessageTransport, @unchecked Sendable {
        let sim: AppStoreSimulator
        let verifier: SignedDataVerifier
        let config = RetentionMessagingConfig(rules: [
            .init(productIds: ["premium.monthly"], messageId: "6b6d5e2a-1c3f-4d7e-9a0b-2f4c6e8a0d1b", offerId: "promo.3m.half"),
        ])
        let offerRules = ["promo.3m.half": OfferRule(offerId: "promo.3m.half", eligibility: .current)]

        init(_ sim: AppStoreSimulator) throws {
            self.sim = sim
            let clock = sim.clock
            verifier = try SignedDataVerifier(trustedRoots: [sim.rootCertificateDER],
                                              apps: [AppIdentity(bundleId: "com.example.app", appAppleId: 1234)], clock: { clock.nowMs() })
        }

        /// What the customer's stored history would hold (Kakin got it from notifications).
        func history() throws -> CustomerHistory {
            let (transactions, renewals) = sim.core.withLock { c in
                (c.engine.store.transactions.values.map(\.jws), c.engine.store.subscriptions.values.map(\.renewalJWS))
            }
            return CustomerHistory(transactions: try transactions.map { try verifier.verifyTransaction($0) },
                                   renewalInfos: try renewals.map { try verifier.verifyRenewalInfo($0) })
        }

        func post(url: String, body: [UInt8], timeoutMs: Int) async -> (status: Int, body: [UInt8])? {
            do {
                let jws = try #require((try JSONParser.parse(body))["signedPayload"]?.stringValue)
                let request = try verifier.verifyRealtimeRequest(jws)
                let history = try history()
                let status = StatusEngine.evaluate(history, catalog: .demo, nowMs: request.signedDate)
                let (answer, _) = RetentionMessaging.choose(config, facts: .init(
                    productId: request.productId, originalTransactionId: request.originalTransactionId, status: status, history: history,
                    catalog: .demo, offerRules: offerRules))
                let k = sim.apiKey
                let key = SignedRequestJWS.Key(privateKey: try P256PrivateKey(pemPKCS8: k.privateKeyPEM), keyId: k.keyId, issuerId: k.issuerId)
                let reply = try RetentionMessageResponse.body(answer, request: request, bundleId: "com.example.app", key: key,
                                                              nonce: UUID().uuidString.lowercased(), issuedAtSeconds: sim.clock.nowMs() / 1000)
                return (200, (reply ?? [:]).serialized())
            } catch {
                Issue.record("Kakin's side failed: \(error)")
                return (500, [])
            }
        }
    }

    @Test func kakinsRulePicksTheOfferTheSimulatorAppliesItAndStatusShowsItPending() async throws {
        let sim = try makeSimulator(catalog: .demo)
        let kakin = try KakinSide(sim)
        sim.setRetentionMessageTransport(kakin)
        try sim.configureRealtimeURL("http://127.0.0.1:8080/v1/apple/retention-message/com.example.app")
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "premium.monthly", "appAccountToken": .string(tokenA)])
        let otid = bought.json["originalTransactionId"]!.stringValue!
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(10 * 86_400)])  // the free week is over: a paid month

        let cancel = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew", "acceptRetentionOffer": true])
        #expect(cancel.json["outcome"] == "offerPending", "\(cancel.json)")
        #expect(cancel.json["retentionMessage"]?["offerIdentifier"] == "promo.3m.half")

        let status = StatusEngine.evaluate(try kakin.history(), catalog: .demo, nowMs: sim.clock.nowMs())
        let sub = try #require(status.subscriptions.first)
        #expect(sub.state == .subscribed && sub.willAutoRenew)
        #expect(sub.pendingOffer == StatusOffer(type: .promotional, id: "promo.3m.half", period: "P3M"))

        // The same customer cancelling again: the offer already waits, Kakin's rule offers nothing, the cancel goes on.
        let again = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"])
        #expect(again.json["outcome"] == "autoRenewDisabled")
        #expect(again.json["retentionMessage"]?["outcome"] == "none")
    }

    /// The yearly subscriber billed monthly: cancelled in month 4, the status says subscribed to month 12,
    /// then expired; Kakin's status engine reads the simulator's signed data at every step.
    @Test func commitmentCancelledInMonthFourStaysActiveUntilMonthTwelveThenExpires() async throws {
        let sim = try makeSimulator(catalog: .demo)
        let kakin = try KakinSide(sim)
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "premium.yearly", "appAccountToken": .string(tokenA),
                                                                          "billingPlanType": "MONTHLY"])
        let otid = bought.json["originalTransactionId"]!.stringValue!
        let end = plus("P1Y", startMs)
        for month in 1...13 {
            if month > 1 { _ = await call(sim, "POST", "/simulator/v1/clock", ["to": .string(Timestamp.rfc3339(plus("P\(month - 1)M", startMs) + 3_600_000))]) }
            if month == 4 { #expect(await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"]).status == 200) }
            let status = StatusEngine.evaluate(try kakin.history(), catalog: .demo, nowMs: sim.clock.nowMs())
            let sub = try #require(status.subscriptions.first)
            if month <= 12 {
                #expect(sub.state == .subscribed, "month \(month)")
                #expect(sub.commitment?.billingPeriod == month)
                #expect(sub.commitment?.endsAtMs == end)
                #expect(sub.commitment?.willRenew == (month < 4))
            } else {
                #expect(sub.state == .expired)
                #expect(sub.expirationReason == .voluntary)
            }
        }
    }
}
