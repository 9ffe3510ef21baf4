@testable import AppStoreSimulator
import AppStoreSecurity
import Foundation
import KakinCore
import Testing

/// Finish Transaction, the Retention Messaging API (configuration and the cancel flow's realtime call),
/// RESCIND_CONSENT, and monthly commitments over the simulator's HTTP surfaces.
@Suite struct Apple2026APITests {
    static let messageId = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"

    @Test func finishTransactionTakesTheTransactionOutOfTheDevicesQueue() async throws {
        let sim = try makeSimulator()
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        let tid = bought.json["transactionId"]!.stringValue!
        // Bearer token checked like every other Server API route.
        #expect(await call(sim, "POST", "/inApps/v1/transactions/\(tid)/finish").status == 401)
        let before = await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/transactions")
        #expect(before.json["transactions"]?.arrayValue?.first?["finished"] == false)
        let token = try apiToken(sim)
        #expect(await call(sim, "POST", "/inApps/v1/transactions/\(tid)/finish", bearer: token).status == 200)
        #expect(await call(sim, "POST", "/inApps/v1/transactions/\(tid)/finish", bearer: token).status == 200, "again: no change")
        let unknown = await call(sim, "POST", "/inApps/v1/transactions/2999999999999999/finish", bearer: token)
        #expect(unknown.status == 404 && unknown.json["errorCode"] == 4_040_010)
        #expect(await call(sim, "POST", "/inApps/v1/transactions/abc/finish", bearer: token).json["errorCode"] == 4_000_006)

        let finished = await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/finished")
        #expect(finished.json["finished"]?.arrayValue?.map { $0["transactionId"] } == [.string(tid)])
        #expect(finished.json["headSeq"] == 1)
        #expect(await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/finished", query: [("after", "1")]).json["finished"] == [])
        let after = await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/transactions")
        #expect(after.json["transactions"]?.arrayValue?.first?["finished"] == true)
        // A finished consumable leaves the legacy receipt, as finishTransaction() makes it.
        let receipt = await call(sim, "GET", "/simulator/v1/receipt", query: [("appAccountToken", tokenA)])
        #expect(receipt.json["transactionIds"] == [])
    }

    @Test func rescindConsentSendsAppDataWithTheAccountsAppTransaction() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink)
        let reply = await call(sim, "POST", "/simulator/v1/accounts/\(tokenA)/rescind-consent", [:])
        #expect(reply.status == 200)
        #expect(reply.json["outcome"] == "consentRescinded")
        #expect(reply.json["notifications"]?.arrayValue?.first?["notificationType"] == "RESCIND_CONSENT", "\(reply.json)")
        let verifier = try SignedDataVerifier(trustedRoots: [sim.rootCertificateDER], apps: [AppIdentity(bundleId: "com.example.app", appAppleId: 1234)],
                                              clock: { startMs })
        let n = try verifier.verifyNotification(try #require(sink.received.last))
        #expect(n.isRescindConsent && n.data == nil)
        let appData = try #require(n.appData)
        #expect(appData.bundleId == "com.example.app" && appData.appAppleId == 1234 && appData.environment == .sandbox)
        let app = try verifier.verifyAppTransaction(try #require(appData.signedAppTransactionInfo))
        let accountApp = await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/app-transaction")
        #expect(app.raw["appTransactionId"] == accountApp.json["appTransactionId"])
        #expect(await call(sim, "GET", "/simulator/v1/accounts/\(tokenA)/rescind-consent").status == 405)
    }

    @Test func retentionMessagingConfigurationAtApplesPaths() async throws {
        let sim = try makeSimulator()
        let token = try apiToken(sim)
        let image = "a1b2c3d4-e5f6-7890-a1b2-c3d4e5f67890"
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13]
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/image/\(image)", query: [("imageSize", "FULL_SIZE")], bearer: token, rawBody: png).status == 200)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/image/\(image)", bearer: token, rawBody: png).json["errorCode"] == 4_090_000)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/image/b1b2c3d4-e5f6-7890-a1b2-c3d4e5f67890", bearer: token, rawBody: [1, 2, 3]).json["errorCode"] == 4_000_161)
        #expect(await call(sim, "GET", "/inApps/v1/messaging/image/list", bearer: token).json == [
            "imageIdentifiers": [["imageIdentifier": .string(image), "imageState": "APPROVED", "imageSize": "FULL_SIZE"]]])

        let long = String(repeating: "x", count: 67)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/message/\(Self.messageId)", ["header": .string(long), "body": "b"], bearer: token).json["errorCode"] == 4_000_162)
        let message: JSONValue = ["header": "Stay a while", "body": "Half price for three months.", "image": ["imageIdentifier": .string(image), "altText": "A cat"]]
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/message/\(Self.messageId)", message, bearer: token).status == 200)
        #expect(await call(sim, "GET", "/inApps/v1/messaging/message/list", bearer: token).json == [
            "messageIdentifiers": [["messageIdentifier": .string(Self.messageId), "messageState": "APPROVED"]]])
        #expect(await call(sim, "DELETE", "/inApps/v1/messaging/image/\(image)", bearer: token).json["errorCode"] == 4_030_019, "in use")

        #expect(await call(sim, "GET", "/inApps/v1/messaging/default/A/en-US", bearer: token).json["errorCode"] == 4_040_020)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/default/A/en_US", ["messageIdentifier": .string(Self.messageId)], bearer: token).json["errorCode"] == 4_000_164)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/default/A/en-US", ["messageIdentifier": .string(Self.messageId)], bearer: token).status == 200)
        #expect(await call(sim, "GET", "/inApps/v1/messaging/default/A/en-US", bearer: token).json == ["messageIdentifier": .string(Self.messageId)])
        #expect(await call(sim, "DELETE", "/inApps/v1/messaging/default/A/en-US", bearer: token).status == 200)

        #expect(await call(sim, "GET", "/inApps/v1/messaging/realtime/url", bearer: token).json["errorCode"] == 4_040_021)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/realtime/url", ["realtimeURL": "http://example.com/x"], bearer: token).json["errorCode"] == 4_000_215)
        #expect(await call(sim, "PUT", "/inApps/v1/messaging/realtime/url", ["realtimeURL": "https://example.com/retention"], bearer: token).status == 200)
        #expect(await call(sim, "GET", "/inApps/v1/messaging/realtime/url", bearer: token).json == ["realtimeURL": "https://example.com/retention"])
        #expect(await call(sim, "GET", "/simulator/v1/retention").json["realtimeURL"] == "https://example.com/retention")
        #expect(await call(sim, "DELETE", "/inApps/v1/messaging/realtime/url", bearer: token).status == 200)
        #expect(await call(sim, "GET", "/simulator/v1/retention").json["realtimeURL"] == .null)
        #expect(await call(sim, "PUT", "/simulator/v1/retention", ["realtimeURL": "http://127.0.0.1:8080/v1/apple/retention-message/com.example.app"]).status == 200)
        #expect(await call(sim, "PUT", "/simulator/v1/retention", ["realtimeURL": "ftp://x"]).status == 400)
        #expect(await call(sim, "GET", "/inApps/v1/messaging/message/list").status == 401)
    }

    /// Subscribes to A and points the realtime URL at a test endpoint answering `answer`.
    func cancelFlow(answer: JSONValue?) async throws -> (AppStoreSimulator, RetentionEndpoint, String) {
        let sim = try makeSimulator()
        let endpoint = RetentionEndpoint(answer: answer)
        sim.setRetentionMessageTransport(endpoint)
        #expect(await call(sim, "PUT", "/simulator/v1/retention", ["realtimeURL": "https://kakin.example/v1/apple/retention-message/com.example.app"]).status == 200)
        let sub = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        return (sim, endpoint, sub.json["originalTransactionId"]!.stringValue!)
    }

    @Test func anOfferTheCustomerAcceptsAtCancelBecomesThePendingOfferAndNothingIsCancelled() async throws {
        let (sim, endpoint, otid) = try await cancelFlow(answer: nil)
        endpoint.answer = ["promotionalOffer": ["messageIdentifier": .string(Self.messageId),
                                                "promotionalOfferSignatureV2": .string(try OfferSigning.jws(sim, "B", "6m", transactionId: otid))]]
        let reply = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew", "acceptRetentionOffer": true])
        #expect(reply.status == 200, "\(reply.json)")
        #expect(reply.json["outcome"] == "offerPending")
        #expect(reply.json["notifications"]?.arrayValue?.map { $0["notificationType"] } == ["OFFER_REDEEMED"])
        #expect(reply.json["retentionMessage"]?["outcome"] == "promotionalOffer")
        #expect(reply.json["retentionMessage"]?["cancelled"] == false)
        #expect(reply.json["subscription"]?["autoRenewStatus"] == true)
        #expect(reply.json["subscription"]?["nextRenewalOffer"]?["offerIdentifier"] == "6m")

        // The request was signed by the simulator's CA: a realtime request for this subscription.
        let verifier = try SignedDataVerifier(trustedRoots: [sim.rootCertificateDER], apps: [AppIdentity(bundleId: "com.example.app", appAppleId: 1234)],
                                              clock: { startMs })
        let request = try verifier.verifyRealtimeRequest(try #require(endpoint.requests.first))
        #expect(request.originalTransactionId == otid && request.productId == "B" && request.userLocale == "en-US")
        #expect(request.appAppleId == 1234 && request.environment == .sandbox && request.signedDate == sim.clock.nowMs())
        #expect(endpoint.calledURLs == ["https://kakin.example/v1/apple/retention-message/com.example.app"])
    }

    @Test func aMessageIsRecordedAndTheCancellationGoesOn() async throws {
        let (sim, _, otid) = try await cancelFlow(answer: ["message": ["messageIdentifier": .string(Self.messageId)]])
        let reply = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew", "userLocale": "ja-JP"])
        #expect(reply.json["outcome"] == "autoRenewDisabled")
        #expect(reply.json["retentionMessage"]?["outcome"] == "message")
        #expect(reply.json["retentionMessage"]?["messageIdentifier"] == .string(Self.messageId))
        #expect(reply.json["retentionMessage"]?["cancelled"] == true)
        let calls = await call(sim, "GET", "/simulator/v1/retention/calls")
        #expect(calls.json["calls"]?.arrayValue?.count == 1)
    }

    @Test func noAnswerABadSignatureOrADeclinedOfferLetTheCancellationProceed() async throws {
        // Timeout (no answer).
        let (sim, _, otid) = try await cancelFlow(answer: nil)
        let timedOut = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"])
        #expect(timedOut.json["outcome"] == "autoRenewDisabled")
        #expect(timedOut.json["retentionMessage"]?["outcome"] == "timeout")

        // V2 signature without the request's originalTransactionId: Apple refuses it, the default message shows.
        let (sim2, endpoint2, otid2) = try await cancelFlow(answer: nil)
        endpoint2.answer = ["promotionalOffer": ["promotionalOfferSignatureV2": .string(try OfferSigning.jws(sim2, "B", "6m"))]]
        let unsigned = await call(sim2, "POST", "/simulator/v1/subscriptions/\(otid2)/actions", ["action": "disableAutoRenew"])
        #expect(unsigned.json["outcome"] == "autoRenewDisabled")
        #expect(unsigned.json["retentionMessage"]?["outcome"]?.stringValue?.contains("transactionId") == true)

        // A valid offer: the customer declines it by default and cancels anyway (the answer is recorded);
        // `declineRetentionOffer: true`, the older spelling, means the same.
        for extra: [String: JSONValue] in [[:], ["declineRetentionOffer": true]] {
            let (sim3, endpoint3, otid3) = try await cancelFlow(answer: nil)
            endpoint3.answer = ["promotionalOffer": ["promotionalOfferSignatureV2": .string(try OfferSigning.jws(sim3, "B", "6m", transactionId: otid3))]]
            let declined = await call(sim3, "POST", "/simulator/v1/subscriptions/\(otid3)/actions", .object((["action": "disableAutoRenew"] as [String: JSONValue]).merging(extra) { $1 }))
            #expect(declined.json["outcome"] == "autoRenewDisabled", "\(extra)")
            #expect(declined.json["subscription"]?["autoRenewStatus"] == false)
            #expect(declined.json["retentionMessage"]?["outcome"] == "promotionalOffer")
            #expect(declined.json["retentionMessage"]?["offerIdentifier"] == "6m")
            #expect(declined.json["retentionMessage"]?["cancelled"] == true)
            #expect(declined.json["notifications"]?.arrayValue?.map { $0["subtype"] } == ["AUTO_RENEW_DISABLED"])
        }
        // The two spellings saying opposite things: refused, nothing changes.
        let (sim5, _, otid5) = try await cancelFlow(answer: nil)
        let contradicting = await call(sim5, "POST", "/simulator/v1/subscriptions/\(otid5)/actions",
                                       ["action": "disableAutoRenew", "acceptRetentionOffer": true, "declineRetentionOffer": true])
        #expect(contradicting.status == 400)
        #expect(await call(sim5, "GET", "/simulator/v1/subscriptions/\(otid5)").json["autoRenewStatus"] == true)

        // Two answers at once: unusable.
        let (sim4, endpoint4, otid4) = try await cancelFlow(answer: nil)
        endpoint4.answer = ["message": ["messageIdentifier": .string(Self.messageId)], "alternateProduct": ["productId": "A"]]
        let both = await call(sim4, "POST", "/simulator/v1/subscriptions/\(otid4)/actions", ["action": "disableAutoRenew"])
        #expect(both.json["outcome"] == "autoRenewDisabled")
        #expect(both.json["retentionMessage"]?["outcome"]?.stringValue?.hasPrefix("error") == true)
    }

    @Test func legacySignatureAnswerIsAcceptedToo() async throws {
        let (sim, endpoint, otid) = try await cancelFlow(answer: nil)
        let legacy = try OfferSigning.legacy(sim, "B", "12m", token: tokenA)
        endpoint.answer = ["promotionalOffer": ["promotionalOfferSignatureV1": [
            "encodedSignature": legacy["signature"]!, "productId": "B", "nonce": legacy["nonce"]!, "timestamp": legacy["timestamp"]!,
            "keyId": legacy["keyIdentifier"]!, "offerIdentifier": "12m", "appAccountToken": .string(tokenA)]]]
        let reply = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew", "acceptRetentionOffer": true])
        #expect(reply.json["outcome"] == "offerPending", "\(reply.json)")
    }

    @Test func monthlyCommitmentOverTheControlAPI() async throws {
        let sim = try makeSimulator(catalog: CommitmentTests.catalog())
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "Y", "appAccountToken": .string(tokenA), "billingPlanType": "MONTHLY"])
        #expect(bought.status == 201)
        #expect(bought.json["subscription"]?["commitment"]?["billingPeriod"] == 1)
        #expect(bought.json["subscription"]?["commitment"]?["monthlyPriceMilli"] == 4_490)
        let otid = bought.json["originalTransactionId"]!.stringValue!
        let cancel = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "disableAutoRenew"])
        #expect(cancel.json["effectiveDate"] == .string(Timestamp.rfc3339(plus("P1Y", startMs))))
        #expect(cancel.json["subscription"]?["commitment"]?["willRenew"] == false)
        #expect(await call(sim, "POST", "/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenB), "billingPlanType": "MONTHLY"]).status == 422)
        #expect(await call(sim, "POST", "/simulator/v1/purchases", ["productId": "Y", "billingPlanType": "WEEKLY"]).status == 400)
        let products = await call(sim, "GET", "/simulator/v1/products")
        #expect(products.json["products"]?.arrayValue?.first { $0["productId"] == "Y" }?["monthlyBillingWithCommitment"] == true)
    }
}
