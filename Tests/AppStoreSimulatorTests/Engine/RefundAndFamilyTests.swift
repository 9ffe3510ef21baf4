@testable import AppStoreSimulator
import KakinCore
import Testing

@Suite struct RefundsAndFamilySharing {
    @Test func refundingASubscriptionRevokesItsLatestTransactionAndStopsRenewals() throws {
        var s = makeState()
        let out = try s.buy("B")
        let otid = out.originalTransactionId!
        _ = s.advance(by: 3 * .day)
        let refund = try s.refund(transactionId: s.store.subscriptions[otid]!.latestTransactionId, reason: 1)
        #expect(s.kinds(refund.notificationUUIDs) == ["REFUND"])
        let n = s.notes(refund.notificationUUIDs)[0]
        #expect(n["data"]?["status"] == 5)
        let t = decodeJWS(n["data"]!["signedTransactionInfo"]!.stringValue!)
        #expect(t["revocationDate"] == .int(startMs + 3 * .day))
        #expect(t["revocationReason"] == 1)
        #expect(t["revocationType"] == "REFUND_FULL")
        #expect(t["signedDate"] == .int(startMs + 3 * .day))
        #expect(s.advance(by: 100 * .day).isEmpty)
        #expect(throws: KakinError.self) { try s.refund(transactionId: out.transactionId!) }
    }

    @Test func proratedRefundCarriesItsPercentage() throws {
        var s = makeState()
        let out = try s.buy("coins")
        _ = try s.refund(transactionId: out.transactionId!, reason: 0, percentage: 40_000)
        #expect(s.tx(out.transactionId)["revocationType"] == "REFUND_PRORATED")
        #expect(s.tx(out.transactionId)["revocationPercentage"] == 40_000)
    }

    @Test func refundOfAConsumableCarriesNoRenewalInfo() throws {
        var s = makeState()
        let out = try s.buy("coins")
        let refund = try s.refund(transactionId: out.transactionId!)
        let n = s.notes(refund.notificationUUIDs)[0]
        #expect(n["notificationType"] == "REFUND")
        #expect(n["data"]?["signedRenewalInfo"] == nil)
        #expect(n["data"]?["status"] == nil)
    }

    @Test func refundRequestDeclineAndReversalEachSendTheirNotification() throws {
        var s = makeState()
        let coins = try s.buy("coins")
        let asked = try s.requestRefund(transactionId: coins.transactionId!, reason: "FULFILLMENT_ISSUE")
        #expect(s.kinds(asked.notificationUUIDs) == ["CONSUMPTION_REQUEST"])
        #expect(s.notes(asked.notificationUUIDs)[0]["data"]?["consumptionRequestReason"] == "FULFILLMENT_ISSUE")
        #expect(throws: KakinError.self) { try s.requestRefund(transactionId: coins.transactionId!, reason: "BORED") }
        let declined = try s.declineRefund(transactionId: coins.transactionId!)
        #expect(s.kinds(declined.notificationUUIDs) == ["REFUND_DECLINED"])
        _ = try s.refund(transactionId: coins.transactionId!)
        let reversed = try s.reverseRefund(transactionId: coins.transactionId!)
        #expect(s.kinds(reversed.notificationUUIDs) == ["REFUND_REVERSED"])
        #expect(s.tx(coins.transactionId)["revocationDate"] == nil)
    }

    @Test func reversedSubscriptionRefundReinstatesItWithTheSameRenewalDate() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        let latestId = s.store.subscriptions[otid]!.latestTransactionId
        _ = try s.refund(transactionId: latestId)
        _ = s.advance(by: 5 * .day)
        let reversed = try s.reverseRefund(transactionId: latestId)
        #expect(s.notes(reversed.notificationUUIDs)[0]["data"]?["status"] == 1)
        #expect(s.renewal(otid)["autoRenewStatus"] == 1)
        #expect(s.renewal(otid)["renewalDate"] == .int(plus("P1M", startMs)))
        let renewed = s.advance(toMs: plus("P1M", startMs))
        #expect(s.kinds(renewed) == ["DID_RENEW"])
    }

    @Test func familySharedSubscriptionIsItsOwnInstanceAndRevokingItSendsRevoke() throws {
        var s = makeState()
        let own = try s.buy("A")
        let shared = try s.buy("A", family: true)
        #expect(shared.originalTransactionId != own.originalTransactionId)
        #expect(s.kinds(shared.notificationUUIDs) == ["SUBSCRIBED/INITIAL_BUY"])
        let t = s.tx(shared.transactionId)
        #expect(t["inAppOwnershipType"] == "FAMILY_SHARED")
        #expect(t["appAccountToken"] == nil)
        #expect(t["offerType"] == nil)
        #expect(throws: KakinError.self) { try s.revokeFamilySharing(own.originalTransactionId!) }
        // Family copies renew like the purchaser's subscription.
        let renewed = s.advance(by: 31 * .day)
        #expect(s.kinds(renewed) == ["DID_RENEW", "DID_RENEW"])
        let revoke = try s.revokeFamilySharing(shared.originalTransactionId!)
        #expect(s.kinds(revoke.notificationUUIDs) == ["REVOKE"])
        let r = s.latestTx(shared.originalTransactionId!)
        #expect(r["inAppOwnershipType"] == "FAMILY_SHARED")
        #expect(r["revocationReason"] == 0)
        #expect(r["revocationType"] == "FAMILY_REVOKE")
        #expect(s.notes(revoke.notificationUUIDs)[0]["data"]?["status"] == 5)
        #expect(s.renewal(shared.originalTransactionId!)["appAccountToken"] == nil)
    }

    @Test func onlyFamilyShareableProductsCanBeShared() throws {
        var s = makeState()
        #expect(throws: KakinError.self) { try s.buy("B", family: true) }
        #expect(throws: KakinError.self) { try s.buy("pass", family: true) }
    }
}

@Suite struct RenewalDateExtensions {
    func body(_ days: Int64, _ rid: String = "r1", code: Int64 = 1) -> JSONValue {
        ["extendByDays": .int(days), "extendReasonCode": .int(code), "requestIdentifier": .string(rid)]
    }

    @Test func extensionMovesTheCurrentExpiryAndSendsRenewalExtended() throws {
        var s = makeState()
        let out = try s.buy("B")
        let otid = out.originalTransactionId!
        _ = s.advance(by: .day)
        let answer = try s.extendRenewalDate(otid, body: body(10))
        let expected = plus("P1M", startMs) + 10 * .day
        #expect(answer["effectiveDate"] == .int(expected))
        #expect(answer["success"] == true)
        #expect(answer["originalTransactionId"]?.stringValue == otid)
        #expect(answer["webOrderLineItemId"] == s.tx(out.transactionId)["webOrderLineItemId"])
        #expect(s.tx(out.transactionId)["expiresDate"] == .int(expected))
        #expect(s.tx(out.transactionId)["signedDate"] == .int(startMs + .day))
        #expect(s.allKinds.last == "RENEWAL_EXTENDED")
        #expect(s.renewal(otid)["renewalDate"] == .int(expected))
        // The same request again answers the same and changes nothing.
        #expect(try s.extendRenewalDate(otid, body: body(10)) == answer)
        let renewed = s.advance(toMs: expected)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
    }

    @Test func extensionsFollowApplesLimits() throws {
        var s = makeState()
        let trial = try s.buy("A").originalTransactionId!
        #expect(throws: AppStoreAPIError.subscriptionExtensionIneligible) { try s.extendRenewalDate(trial, body: body(5)) }
        let otid = try s.buy("B", token: tokenB).originalTransactionId!
        #expect(throws: AppStoreAPIError.invalidExtendByDays) { try s.extendRenewalDate(otid, body: body(91)) }
        #expect(throws: AppStoreAPIError.invalidExtendByDays) { try s.extendRenewalDate(otid, body: body(0)) }
        #expect(throws: AppStoreAPIError.invalidExtendReasonCode) { try s.extendRenewalDate(otid, body: body(5, code: 4)) }
        #expect(throws: AppStoreAPIError.invalidRequestIdentifier) { try s.extendRenewalDate(otid, body: ["extendByDays": 5, "extendReasonCode": 0]) }
        #expect(throws: AppStoreAPIError.originalTransactionIdNotFound) { try s.extendRenewalDate("123", body: body(5)) }
        #expect(throws: AppStoreAPIError.invalidOriginalTransactionId) { try s.extendRenewalDate("abc", body: body(5)) }
        _ = try s.extendRenewalDate(otid, body: body(5, "a"))
        _ = try s.extendRenewalDate(otid, body: body(5, "b"))
        #expect(throws: AppStoreAPIError.subscriptionMaxExtension) { try s.extendRenewalDate(otid, body: body(5, "c")) }
        let family = try s.buy("A", token: tokenB, family: true).originalTransactionId!
        #expect(throws: AppStoreAPIError.familySharedSubscriptionExtensionIneligible) { try s.extendRenewalDate(family, body: body(5, "d")) }
    }

    @Test func massExtensionExtendsEveryEligibleSubscriberAndSendsASummary() throws {
        var s = makeState()
        let a = try s.buy("B").originalTransactionId!
        _ = try s.buy("B", token: tokenB)
        _ = try s.buy("B", token: nil)
        _ = try s.extendRenewalDate(a, body: body(1, "x"))
        _ = try s.extendRenewalDate(a, body: body(1, "y"))
        let before = s.store.notificationSeq
        var request = body(7, "mass-1")
        if case .object(var o) = request { o["productId"] = "B"; request = .object(o) }
        let answer = try s.massExtend(body: request)
        #expect(answer["requestIdentifier"] == "mass-1")
        let kinds = s.kinds(s.store.notifications.filter { $0.seq > before }.map(\.notificationUUID))
        #expect(kinds.sorted() == ["RENEWAL_EXTENDED", "RENEWAL_EXTENDED", "RENEWAL_EXTENSION/FAILURE", "RENEWAL_EXTENSION/SUMMARY"])
        let summary = decodeJWS(s.store.notifications.last!.jws)["summary"]
        #expect(summary?["succeededCount"] == 2)
        #expect(summary?["failedCount"] == 1)
        #expect(summary?["productId"] == "B")
        let status = try s.massExtensionStatus(productId: "B", requestIdentifier: "mass-1")
        #expect(status["complete"] == true)
        #expect(status["succeededCount"] == 2)
        #expect(throws: AppStoreAPIError.statusRequestNotFound) { try s.massExtensionStatus(productId: "B", requestIdentifier: "nope") }
    }
}

@Suite struct NotificationDelivery {
    @Test func failedDeliveriesAreRetriedOnApplesScheduleWithTheSamePayload() throws {
        var s = makeState()
        let uuid = try s.buy("coins").notificationUUIDs[0]
        let jws = s.store.notifications[0].jws
        var sent: [Int64] = []
        // Fail every attempt, moving time to each due instant as the simulator's driver does.
        for _ in 0..<10 {
            guard let due = s.nextDeliveryDueMs() else { break }
            _ = s.advance(toMs: due)
            let batch = s.takeDueDeliveries()
            #expect(batch.map(\.signedPayload) == [jws])
            sent.append(s.nowMs)
            s.recordAttempt(uuid: uuid, result: .unsuccessfulHTTPResponseCode)
        }
        let h: Int64 = .hour
        #expect(sent == [startMs, startMs + h, startMs + 13 * h, startMs + 37 * h, startMs + 85 * h, startMs + 157 * h])
        #expect(s.store.notifications[0].attempts.count == 6)
        #expect(s.nextDeliveryDueMs() == nil)
    }

    @Test func aSuccessfulAttemptEndsDelivery() throws {
        var s = makeState()
        let uuid = try s.buy("coins").notificationUUIDs[0]
        _ = s.takeDueDeliveries()
        s.recordAttempt(uuid: uuid, result: .noResponse)
        _ = s.advance(by: .hour)
        #expect(s.takeDueDeliveries().count == 1)
        s.recordAttempt(uuid: uuid, result: .success)
        #expect(s.nextDeliveryDueMs() == nil)
        #expect(s.store.notifications[0].attempts.map(\.sendAttemptResult) == ["NO_RESPONSE", "SUCCESS"])
        #expect(s.store.notifications[0].attempts.map(\.attemptDate) == [startMs, startMs + .hour])
    }

    @Test func testNotificationHasItsTokenAndStatus() throws {
        var s = makeState()
        let token = s.requestTestNotification()
        let status = try s.testNotificationStatus(token)
        let payload = decodeJWS(status["signedPayload"]!.stringValue!)
        #expect(payload["notificationType"] == "TEST")
        #expect(payload["data"]?["bundleId"] == "com.example.app")
        #expect(status["sendAttempts"] == [])
        #expect(throws: AppStoreAPIError.testNotificationNotFound) { try s.testNotificationStatus("nope") }
    }
}
