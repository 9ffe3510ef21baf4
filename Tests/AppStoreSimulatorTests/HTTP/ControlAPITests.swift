@testable import AppStoreSimulator
import AppStoreSecurity
import Foundation
import HTTPServer
import KakinCore
import Testing

@Suite struct ControlAPI {
    @Test func purchaseAnswers201WithTheSignedTransactionStoreKitWouldHandTheApp() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink)
        let reply = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA), "quantity": 2])
        #expect(reply.status == 201)
        let signed = try #require(reply.json["signedTransaction"]?.stringValue)
        let tx = try verifier(sim).verifyTransaction(signed)
        #expect(tx.transactionId == reply.json["transactionId"]?.stringValue)
        #expect(tx.originalTransactionId == reply.json["originalTransactionId"]?.stringValue)
        #expect(tx.quantity == 2)
        #expect(tx.environment == .sandbox)
        #expect(reply.json["notifications"]?.arrayValue?.first?["notificationType"] == "ONE_TIME_CHARGE")
        // The notification was delivered before the answer came back.
        #expect(sink.received.count == 1)
        let note = try verifier(sim).verifyNotification(sink.received[0])
        #expect(note.notificationType == .oneTimeCharge)
        #expect(note.data?.signedTransactionInfo == signed)
    }

    @Test func badRequestsGetTheContractErrorBodyAndChangeNothing() async throws {
        let sim = try makeSimulator()
        func error(_ r: Reply) -> String? { r.json["error"]?["id"]?.stringValue }
        let unknown = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "nope"])
        #expect(unknown.status == 422)
        #expect(error(unknown) == "KKN-6001")
        #expect(unknown.json["error"]?["code"] == "unknown_product")
        #expect(unknown.json["error"]?["requestId"] == "req_test")
        let malformed = await call(sim, "POST", "/simulator/v1/purchases", rawBody: Array("{".utf8))
        #expect(malformed.status == 400)
        #expect(error(malformed) == "KKN-1001")
        let typo = await call(sim, "POST", "/simulator/v1/purchases", ["productID": "coins"])
        #expect(typo.status == 400)
        #expect(error(typo) == "KKN-1002")
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        let intro = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenA), "offer": ["type": "introductory"]])
        #expect(intro.status == 422)
        #expect(error(intro) == "KKN-6002")
        let noSub = await call(sim, "POST", "/simulator/v1/subscriptions/42/actions", ["action": "refund"])
        #expect(noSub.status == 404)
        #expect(error(noSub) == "KKN-6003")
        let noTx = await call(sim, "POST", "/simulator/v1/transactions/42/refund")
        #expect(noTx.status == 404)
        #expect(error(noTx) == "KKN-6004")
        let route = await call(sim, "GET", "/simulator/v1/nothing")
        #expect(route.status == 404)
        #expect(error(route) == "KKN-1005")
        let method = await call(sim, "DELETE", "/simulator/v1/clock")
        #expect(method.status == 405)
        let back = await call(sim, "POST", "/simulator/v1/clock", ["to": "2020-01-01T00:00:00Z"])
        #expect(back.status == 400)
        let tooFar = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(11 * 366 * 86_400)])
        #expect(tooFar.status == 400)
        #expect(sim.clock.nowMs() == startMs)
        #expect(sim.core.withLock { $0.engine.store.transactions.count } == 1)
    }

    @Test func aMonthOfSubscriptionPassesInOneClockCall() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink)
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenA)])
        let otid = try #require(bought.json["originalTransactionId"]?.stringValue)
        #expect(bought.json["subscription"]?["state"] == "subscribed")
        let clock = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(62 * 86_400)])
        #expect(clock.status == 200)
        #expect(clock.json["nowMs"] == .int(startMs + 62 * .day))
        #expect(clock.json["notifications"]?.arrayValue?.map { $0["notificationType"]! } == ["DID_RENEW", "DID_RENEW"])
        #expect(sink.received.count == 3)
        let view = await call(sim, "GET", "/simulator/v1/subscriptions/\(otid)")
        #expect(view.json["expiresDateMs"] == .int(plus("P1M", plus("P1M", plus("P1M", startMs)))))
        #expect(view.json["transactionIds"]?.arrayValue?.count == 3)
        let get = await call(sim, "GET", "/simulator/v1/clock")
        #expect(get.json["now"]?.stringValue == Timestamp.rfc3339(startMs + 62 * .day))
    }

    @Test func subscriptionActionsRunThroughTheControlAPI() async throws {
        let sim = try makeSimulator(graceDays: 16)
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        let otid = bought.json["originalTransactionId"]!.stringValue!
        func act(_ body: JSONValue) async -> Reply { await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", body) }
        let promo = await act(["action": "applyPromotionalOffer", "offerId": "6m"])
        #expect(promo.json["outcome"] == "offerPending")
        #expect(promo.json["notifications"]?.arrayValue?.first?["notificationType"] == "OFFER_REDEEMED")
        #expect(promo.json["subscription"]?["nextRenewalOffer"]?["offerIdentifier"] == "6m")
        let down = await act(["action": "changeProduct", "productId": "L"])
        #expect(down.json["outcome"] == "scheduled")
        #expect(down.json["notifications"]?.arrayValue?.first?["subtype"] == "DOWNGRADE")
        #expect((await act(["action": "failBilling"])).status == 200)
        let failed = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(31 * 86_400)])
        #expect(failed.json["notifications"]?.arrayValue?.first?["subtype"] == "GRACE_PERIOD")
        let recovered = await act(["action": "recoverBilling"])
        #expect(recovered.json["notifications"]?.arrayValue?.first?["subtype"] == "BILLING_RECOVERY")
        #expect(recovered.json["subscription"]?["productId"] == "L")
        let refund = await act(["action": "refund", "revocationReason": 1])
        #expect(refund.json["subscription"]?["state"] == "revoked")
        let bad = await act(["action": "explode"])
        #expect(bad.status == 400)
        let again = await act(["action": "refund"])
        #expect(again.status == 422)
        #expect(again.json["error"]?["id"] == "KKN-6005")
    }

    @Test func productsAndCertificateAreServed() async throws {
        let sim = try makeSimulator()
        let products = await call(sim, "GET", "/simulator/v1/products")
        #expect(products.json["bundleId"] == "com.example.app")
        let a = products.json["products"]?.arrayValue?.first { $0["productId"] == "A" }
        #expect(a?["type"] == "autoRenewable")
        #expect(a?["groupId"] == "g")
        #expect(a?["period"] == "P1M")
        #expect(a?["offers"]?.arrayValue?.first?["type"] == "introductory")
        #expect(a?["offers"]?.arrayValue?.first?["mode"] == "freeTrial")
        let ca = await call(sim, "GET", "/simulator/v1/ca.der")
        #expect(ca.body == sim.rootCertificateDER)
        let key = await call(sim, "GET", "/simulator/v1/api-key")
        #expect(key.json["keyId"]?.stringValue == sim.apiKey.keyId)
        #expect(key.json["privateKeyPEM"]?.stringValue?.contains("BEGIN PRIVATE KEY") == true)
    }

    @Test func savedStateLoadsIntoTheSameAnswersAndReplaysIdentically() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenA)])
        let tid = bought.json["transactionId"]!.stringValue!
        _ = await call(sim, "POST", "/simulator/v1/subscriptions/\(bought.json["originalTransactionId"]!.stringValue!)/actions",
                       ["action": "applyPromotionalOffer", "offerId": "1y"])
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(40 * 86_400)])
        let saved = await call(sim, "GET", "/simulator/v1/state")
        #expect(saved.status == 200)
        let copy = try AppStoreSimulator(stateFile: saved.body, sink: ScriptedSink())
        let token = try apiToken(sim)
        for path in ["/inApps/v2/history/\(tid)", "/inApps/v1/subscriptions/\(tid)", "/inApps/v1/transactions/\(tid)"] {
            let a = await call(sim, "GET", path, bearer: token)
            let b = await call(copy, "GET", path, bearer: token)
            #expect(a.status == 200)
            #expect(a.body == b.body)
        }
        #expect(copy.rootCertificateDER == sim.rootCertificateDER)
        #expect(copy.clock.nowMs() == sim.clock.nowMs())
        // Both go on the same way: same ids, same payloads (ECDSA signatures differ, the signed bytes don't).
        let next1 = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(400 * 86_400)])
        let next2 = await call(copy, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(400 * 86_400)])
        #expect(next1.json["notifications"] == next2.json["notifications"])
        let more1 = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins"])
        let more2 = await call(copy, "POST", "/simulator/v1/purchases", ["productId": "coins"])
        #expect(more1.json["transactionId"] == more2.json["transactionId"])
        #expect(decodeJWS(more1.json["signedTransaction"]!.stringValue!) == decodeJWS(more2.json["signedTransaction"]!.stringValue!))
        // PUT /state puts a running simulator back to the saved point.
        let put = await call(sim, "PUT", "/simulator/v1/state", rawBody: saved.body)
        #expect(put.status == 200)
        #expect(sim.clock.nowMs() == startMs + 40 * .day)
        let again = await call(sim, "GET", "/inApps/v2/history/\(tid)", bearer: token)
        let reference = await call(copy, "GET", "/inApps/v2/history/\(tid)", bearer: token)
        #expect(again.status == 200)
        #expect(reference.json["signedTransactions"]?.arrayValue?.count ?? 0 > again.json["signedTransactions"]?.arrayValue?.count ?? 0)
        let junk = await call(sim, "PUT", "/simulator/v1/state", rawBody: Array("{}".utf8))
        #expect(junk.status == 400)
    }

    @Test func everySignedPayloadVerifiesAgainstTheSimulatorsRoot() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink, graceDays: 3)
        let v = try verifier(sim)
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "A", "appAccountToken": .string(tokenA)])
        let otid = bought.json["originalTransactionId"]!.stringValue!
        _ = await call(sim, "POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "failBilling"])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(5 * 365 * 86_400)])
        #expect(sink.received.count >= 4)
        for payload in sink.received {
            let n = try v.verifyNotification(payload)
            let tx = try v.verifyTransaction(n.data!.signedTransactionInfo!)
            let renewal = try v.verifyRenewalInfo(n.data!.signedRenewalInfo!)
            #expect(tx.originalTransactionId == otid)
            #expect(renewal.originalTransactionId == otid)
        }
        // Apple's own root does not vouch for the simulator.
        let apple = try SignedDataVerifier(trustedRoots: [AppleRootCertificates.appleRootCAG3], apps: [AppIdentity(bundleId: "com.example.app")], clock: { 0 })
        #expect(throws: VerificationFailure.self) { try apple.verifyTransaction(bought.json["signedTransaction"]!.stringValue!) }
    }
}
