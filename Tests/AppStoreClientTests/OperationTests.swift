import AppStoreClient
import Foundation
import KakinCore
import StoreAPITransport
import Testing

/// Consumption information, renewal-date extensions, Set App Account Token and Get App Transaction Info:
/// the documented method, path and body go out, and Apple's fixtures decode.
@Suite struct OperationTests {
    @Test func consumptionInformationIsPutAsAppleDocumentsItAndTheEmpty202IsSuccess() async throws {
        let h = try Harness(ScriptedTransport([status(202)]))
        let request = ConsumptionRequest(customerConsented: true, deliveryStatus: .delivered, sampleContentProvided: false,
                                         consumptionPercentage: 50_000, refundPreference: .grantProrated)
        try await h.client.sendConsumptionInformation(transactionId: "49571273", request, environment: .production)
        let sent = try #require(h.transport.requests.first)
        #expect(sent.method == "PUT")
        #expect(sent.url == "https://api.storekit.apple.com/inApps/v2/transactions/consumption/49571273")
        #expect(sent.header("Content-Type") == "application/json")
        #expect(sent.bodyJSON == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false,
                                  "consumptionPercentage": 50_000, "refundPreference": "GRANT_PRORATED"])
        #expect(try ConsumptionRequest(json: try #require(sent.bodyJSON)) == request)
    }

    @Test func consumptionInformationForASandboxTransactionGoesToTheSandboxHost() async throws {
        let h = try Harness(ScriptedTransport([status(202)]))
        try await h.client.sendConsumptionInformation(
            transactionId: "1", ConsumptionRequest(customerConsented: true, deliveryStatus: .undeliveredOther, sampleContentProvided: true),
            environment: .sandbox)
        #expect(h.transport.requests.map(\.url) == ["https://api.storekit-sandbox.apple.com/inApps/v2/transactions/consumption/1"])
        #expect(h.transport.requests.first?.bodyJSON == ["customerConsented": true, "deliveryStatus": "UNDELIVERED_OTHER",
                                                         "sampleContentProvided": true])
    }

    @Test func deprecatedV1ConsumptionDataCarriesEveryV1Field() async throws {
        let h = try Harness(ScriptedTransport([status(202)]))
        let request = ConsumptionRequestV1(
            customerConsented: true, consumptionStatus: 2, platform: 1, sampleContentProvided: false, deliveryStatus: 0,
            appAccountToken: "7389a31a-fb6d-4569-a2a6-db7d85d84813", accountTenure: 4, playTime: 0, lifetimeDollarsRefunded: 1,
            lifetimeDollarsPurchased: 2, userStatus: 0, refundPreference: 0)
        try await h.client.sendConsumptionData(transactionId: "49571273", request)
        let sent = try #require(h.transport.requests.first)
        #expect(sent.url == "https://api.storekit.apple.com/inApps/v1/transactions/consumption/49571273")
        #expect(sent.bodyJSON == [
            "customerConsented": true, "consumptionStatus": 2, "platform": 1, "sampleContentProvided": false, "deliveryStatus": 0,
            "appAccountToken": "7389a31a-fb6d-4569-a2a6-db7d85d84813", "accountTenure": 4, "playTime": 0,
            "lifetimeDollarsRefunded": 1, "lifetimeDollarsPurchased": 2, "userStatus": 0, "refundPreference": 0,
        ])
        #expect(try ConsumptionRequestV1(json: try #require(sent.bodyJSON)) == request)
    }

    @Test func extendOneSubscriptionSendsTheRequestAndDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("extendSubscriptionRenewalDateResponse.json"))]))
        let response = try await h.client.extendSubscriptionRenewalDate(
            originalTransactionId: "124",
            ExtendRenewalDateRequest(extendByDays: 45, extendReasonCode: .customerSatisfaction,
                                     requestIdentifier: "fdf964a4-233b-486c-aac1-97d8d52688ac"))
        #expect(response.originalTransactionId == "2312412")
        #expect(response.webOrderLineItemId == "9993")
        #expect(response.success)
        #expect(response.effectiveDateMs == 1_698_148_900_000)
        let sent = try #require(h.transport.requests.first)
        #expect(sent.method == "PUT")
        #expect(sent.url == "https://api.storekit.apple.com/inApps/v1/subscriptions/extend/124")
        #expect(sent.bodyJSON == ["extendByDays": 45, "extendReasonCode": 1, "requestIdentifier": "fdf964a4-233b-486c-aac1-97d8d52688ac"])
    }

    @Test func extendOfAnUnknownProductionSubscriptionAsksSandbox() async throws {
        let h = try Harness(ScriptedTransport([appleError(404, 4_040_005), ok(try Fixtures.model("extendSubscriptionRenewalDateResponse.json"))]))
        _ = try await h.client.extendSubscriptionRenewalDate(
            originalTransactionId: "124", ExtendRenewalDateRequest(extendByDays: 1, extendReasonCode: .other, requestIdentifier: "r"))
        #expect(h.transport.requests.map(\.url) == [
            "https://api.storekit.apple.com/inApps/v1/subscriptions/extend/124",
            "https://api.storekit-sandbox.apple.com/inApps/v1/subscriptions/extend/124",
        ])
    }

    @Test func refusedExtensionsAreTypedErrorsNotRetried() async throws {
        let h = try Harness(ScriptedTransport([appleError(403, 4_030_005)]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.extendSubscriptionRenewalDate(
                originalTransactionId: "124", ExtendRenewalDateRequest(extendByDays: 1, extendReasonCode: .other, requestIdentifier: "r"))
        })
        #expect(error.httpStatus == 403)
        #expect(error.errorCode == AppStoreAPIErrorCode.subscriptionMaxExtension)
        #expect(!error.isRetryable)
        #expect(h.transport.requests.count == 1)
    }

    @Test func massExtensionPostsTheRequestAndDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("extendRenewalDateForAllActiveSubscribersResponse.json"))]))
        let id = try await h.client.extendRenewalDateForAllActiveSubscribers(MassExtendRenewalDateRequest(
            extendByDays: 45, extendReasonCode: .customerSatisfaction, requestIdentifier: "fdf964a4-233b-486c-aac1-97d8d52688ac",
            productId: "com.example.productId", storefrontCountryCodes: ["USA", "MEX"]))
        #expect(id == "758883e8-151b-47b7-abd0-60c4d804c2f5")
        let sent = try #require(h.transport.requests.first)
        #expect(sent.method == "POST")
        #expect(sent.url == "https://api.storekit.apple.com/inApps/v1/subscriptions/extend/mass")
        #expect(sent.bodyJSON == [
            "extendByDays": 45, "extendReasonCode": 1, "requestIdentifier": "fdf964a4-233b-486c-aac1-97d8d52688ac",
            "storefrontCountryCodes": ["USA", "MEX"], "productId": "com.example.productId",
        ])
    }

    @Test func massExtensionStatusDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("getStatusOfSubscriptionRenewalDateExtensionsResponse.json"))]))
        let status = try await h.client.renewalDateExtensionStatus(
            requestIdentifier: "20fba8a0-2b80-4a7d-a17f-85c1854727f8", productId: "com.example.product")
        #expect(status.requestIdentifier == "20fba8a0-2b80-4a7d-a17f-85c1854727f8")
        #expect(status.complete)
        #expect(status.completeDateMs == 1_698_148_900_000)
        #expect(status.succeededCount == 30)
        #expect(status.failedCount == 2)
        #expect(h.transport.requests.first?.url
            == "https://api.storekit.apple.com/inApps/v1/subscriptions/extend/mass/com.example.product/20fba8a0-2b80-4a7d-a17f-85c1854727f8")
    }

    @Test func setAppAccountTokenPutsTheToken() async throws {
        let h = try Harness(ScriptedTransport([status(200)]))
        try await h.client.setAppAccountToken(originalTransactionId: "49571273", appAccountToken: "7389a31a-fb6d-4569-a2a6-db7d85d84813")
        let sent = try #require(h.transport.requests.first)
        #expect(sent.method == "PUT")
        #expect(sent.url == "https://api.storekit.apple.com/inApps/v1/transactions/49571273/appAccountToken")
        #expect(sent.bodyJSON == ["appAccountToken": "7389a31a-fb6d-4569-a2a6-db7d85d84813"])
    }

    @Test func setAppAccountTokenRefusalsKeepApplesCodes() async throws {
        let h = try Harness(ScriptedTransport([.success(HTTPClientResponse(
            status: 400, body: try Fixtures.model("transactionIdNotOriginalTransactionId.json")))]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.setAppAccountToken(originalTransactionId: "2", appAccountToken: "7389a31a-fb6d-4569-a2a6-db7d85d84813")
        })
        #expect(error.errorCode == 4_000_187)
    }

    @Test func appTransactionInfoDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("appTransactionInfoResponse.json"))]))
        let response = try await h.client.appTransactionInfo(transactionId: "1234")
        #expect(response.signedAppTransactionInfo == "signed_app_transaction_info_value")
        #expect(response.answeringEnvironment == .production)
        #expect(h.transport.requests.first?.url == "https://api.storekit.apple.com/inApps/v1/transactions/appTransactions/1234")
        #expect(h.transport.requests.first?.method == "GET")
    }
}
