import KakinCore
import Testing

/// Play's wire models decode what Google sends, in both of its spellings, and never fail on a value they don't know.
@Suite struct GooglePlayModelTests {
    @Test func aDeveloperNotificationDecodesEveryKindWithTheTimeAsStringOrNumber() throws {
        let sub = try DeveloperNotification(json: ["version": "1.0", "packageName": "p", "eventTimeMillis": "1767225600000",
                                                   "subscriptionNotification": ["version": "1.0", "notificationType": 22, "purchaseToken": "t"]])
        #expect(sub.eventTimeMs == 1_767_225_600_000 && sub.kind == .subscription(notificationType: .priceStepUpConsentUpdated, purchaseToken: "t"))
        #expect(SubscriptionNotificationType(rawValue: 22).description == "SUBSCRIPTION_PRICE_STEP_UP_CONSENT_UPDATED")
        #expect(SubscriptionNotificationType(rawValue: 99).name == "99")
        let oneTime = try DeveloperNotification(json: ["packageName": "p", "eventTimeMillis": 5,
                                                       "oneTimeProductNotification": ["notificationType": 2, "purchaseToken": "t", "sku": "coins"]])
        #expect(oneTime.kind == .oneTimeProduct(notificationType: .canceled, purchaseToken: "t", sku: "coins") && oneTime.eventTimeMs == 5)
        let voided = try DeveloperNotification(json: ["packageName": "p", "eventTimeMillis": "5",
                                                      "voidedPurchaseNotification": ["purchaseToken": "t", "orderId": "GPA.1", "productType": 2, "refundType": 2]])
        #expect(voided.kind == .voidedPurchase(purchaseToken: "t", orderId: "GPA.1", productType: 2, refundType: 2) && voided.purchaseToken == "t")
        #expect(try DeveloperNotification(json: ["packageName": "p", "eventTimeMillis": "5", "testNotification": ["version": "1.0"]]).kind == .test)
        let future = try DeveloperNotification(json: ["packageName": "p", "eventTimeMillis": "5", "pendingRefundReviewNotification": ["orderId": "x"]])
        #expect(future.kind == .other && future.raw["pendingRefundReviewNotification"]?["orderId"] == "x")
        #expect(throws: PayloadDecodingError.self) { try DeveloperNotification(json: ["packageName": "p"]) }
    }

    @Test func aPubSubPushIsReadInBothSpellings() throws {
        let data = Array(#"{"packageName":"p","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#.utf8)
        let envelope = PubSubPushMessage.envelope(data: data, messageId: "42", publishTimeMs: 1_767_225_600_123, subscription: "projects/x/subscriptions/y")
        let push = try PubSubPushMessage(json: envelope)
        #expect(push.messageId == "42" && push.data == data && push.publishTimeMs == 1_767_225_600_123 && push.subscription == "projects/x/subscriptions/y")
        #expect(try push.developerNotification().kind == .test)
        let snake = try PubSubPushMessage(json: ["message": ["message_id": "7", "data": .string(Base64.encode(data)), "publish_time": "2026-01-01T00:00:00Z"]])
        #expect(snake.messageId == "7" && snake.publishTimeMs == 1_767_225_600_000)
        #expect(throws: PayloadDecodingError.self) { try PubSubPushMessage(json: ["message": ["messageId": "7", "data": "%%%"]]) }
    }

    @Test func unknownEnumValuesDecodeAndGooglesErrorBodyIsRead() throws {
        let sub = try SubscriptionPurchaseV2(json: [
            "subscriptionState": "SUBSCRIPTION_STATE_SOMETHING_NEW", "acknowledgementState": "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED",
            "lineItems": [["productId": "premium", "expiryTime": "2026-02-01T00:00:00.500Z", "prepaidPlan": [:],
                           "itemReplacement": ["productId": "premium", "replacementMode": "A_NEW_MODE"]]],
        ])
        #expect(sub.subscriptionState.rawValue == "SUBSCRIPTION_STATE_SOMETHING_NEW" && sub.lineItems[0].isPrepaid && sub.lineItems[0].autoRenewEnabled == nil)
        #expect(sub.expiryTimeMs == 1_769_904_000_500 && sub.lineItems[0].itemReplacement?.replacementMode?.rawValue == "A_NEW_MODE")
        let product = try ProductPurchase(json: ["purchaseTimeMillis": "12", "purchaseType": 0, "obfuscatedExternalAccountId": "u"])
        #expect(product.isTestPurchase && product.quantity == 1 && product.externalAccountIdentifiers.obfuscatedExternalAccountId == "u")
        let body = try #require(GoogleAPIErrorBody(json: GoogleAPIErrorBody.json(code: 410, status: "FAILED_PRECONDITION", reason: "purchaseTokenNoLongerValid", message: "m")))
        #expect(body.code == 410 && body.reason == "purchaseTokenNoLongerValid")
    }
}
