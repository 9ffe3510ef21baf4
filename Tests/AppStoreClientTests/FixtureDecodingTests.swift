import AppStoreClient
import Foundation
import KakinCore
import StoreAPITransport
import Testing

/// Apple's canned response and error bodies (`Tests/Fixtures/apple-testdata/models`) decode through the
/// public API, and each endpoint sends the documented method, path, query and body.
@Suite struct FixtureDecodingTests {
    @Test func transactionInfoDecodesAppleFixtureFromTheDocumentedPath() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("transactionInfoResponse.json"))]))
        let response = try await h.client.transactionInfo(transactionId: "1234")
        #expect(response.signedTransactionInfo == "signed_transaction_info_value")
        #expect(response.answeringEnvironment == .production)
        let request = try #require(h.transport.requests.first)
        #expect(request.method == "GET")
        #expect(request.url == "https://api.storekit.apple.com/inApps/v1/transactions/1234")
        #expect(request.body == nil)
        #expect(request.header("Accept") == "application/json")
    }

    @Test func transactionHistorySendsEveryFilterAndDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("transactionHistoryResponse.json"))]))
        let filters = TransactionHistoryRequest(
            startDateMs: 123_455, endDateMs: 123_456, productIds: ["com.example.1", "com.example.2"],
            productTypes: [.consumable, .autoRenewable], subscriptionGroupIdentifiers: ["sub_group_id", "sub_group_id_2"],
            inAppOwnershipType: .familyShared, revoked: false, sort: .ascending)
        let page = try await h.client.transactionHistory(transactionId: "1234", request: filters, revision: "revision_input")
        #expect(page.revision == "revision_output")
        #expect(page.hasMore)
        #expect(page.bundleId == "com.example")
        #expect(page.appAppleId == 323232)
        #expect(page.environment == .localTesting)
        #expect(page.signedTransactions == ["signed_transaction_value", "signed_transaction_value2"])

        let request = try #require(h.transport.requests.first)
        #expect(request.method == "GET")
        #expect(request.path == "https://api.storekit.apple.com/inApps/v2/history/1234")
        #expect(request.queryValues("revision") == ["revision_input"])
        #expect(request.queryValues("startDate") == ["123455"])
        #expect(request.queryValues("endDate") == ["123456"])
        #expect(request.queryValues("productId") == ["com.example.1", "com.example.2"])
        #expect(request.queryValues("productType") == ["CONSUMABLE", "AUTO_RENEWABLE"])
        #expect(request.queryValues("subscriptionGroupIdentifier") == ["sub_group_id", "sub_group_id_2"])
        #expect(request.queryValues("inAppOwnershipType") == ["FAMILY_SHARED"])
        #expect(request.queryValues("revoked") == ["false"])
        #expect(request.queryValues("sort") == ["ASCENDING"])
        #expect(request.body == nil)
    }

    @Test func historyWithAnUnknownEnvironmentKeepsTheRawValue() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("transactionHistoryResponseWithMalformedEnvironment.json"))]))
        let page = try await h.client.transactionHistory(transactionId: "1234")
        #expect(page.environment?.rawValue == "LocalTestingxxx")
        #expect(page.environment.map(AppStoreEnvironment.known.contains) == false)
        #expect(page.signedTransactions.count == 2)
    }

    @Test func historyWithAStringAppAppleIdIsAnInvalidResponseNotRetried() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("transactionHistoryResponseWithMalformedAppAppleId.json"))]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionHistory(transactionId: "1234")
        })
        #expect(error.kind == .invalidResponse)
        #expect(error.detail == "body.appAppleId is not an integer")
        #expect(!error.isRetryable)
        #expect(h.transport.requests.count == 1)
    }

    @Test func subscriptionStatusesRepeatTheStatusFilterAndDecodeAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("getAllSubscriptionStatusesResponse.json"))]))
        let response = try await h.client.allSubscriptionStatuses(transactionId: "4321", statuses: [.expired, .active])
        #expect(response.environment == .localTesting)
        #expect(response.bundleId == "com.example")
        #expect(response.appAppleId == 5454545)
        #expect(response.data.map(\.subscriptionGroupIdentifier) == ["sub_group_one", "sub_group_two"])
        let first = try #require(response.data.first?.lastTransactions)
        #expect(first.map(\.status) == [.active, .revoked])
        #expect(first.map(\.originalTransactionId) == ["3749183", "5314314134"])
        #expect(first.map(\.signedTransactionInfo) == ["signed_transaction_one", "signed_transaction_two"])
        #expect(first.map(\.signedRenewalInfo) == ["signed_renewal_one", "signed_renewal_two"])
        #expect(response.data[1].lastTransactions.map(\.status) == [.expired])

        let request = try #require(h.transport.requests.first)
        #expect(request.path == "https://api.storekit.apple.com/inApps/v1/subscriptions/4321")
        #expect(request.queryValues("status") == ["2", "1"])
    }

    @Test func orderLookupDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("lookupOrderIdResponse.json"))]))
        let response = try await h.client.lookUpOrderId("W002182")
        #expect(response.status == .invalid)
        #expect(response.signedTransactions == ["signed_transaction_one", "signed_transaction_two"])
        #expect(h.transport.requests.first?.url == "https://api.storekit.apple.com/inApps/v1/lookup/W002182")
    }

    @Test func refundHistoryDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("getRefundHistoryResponse.json"))]))
        let response = try await h.client.refundHistory(transactionId: "555", revision: "revision_input")
        #expect(response.signedTransactions == ["signed_transaction_one", "signed_transaction_two"])
        #expect(response.revision == "revision_output")
        #expect(response.hasMore)
        #expect(h.transport.requests.first?.url == "https://api.storekit.apple.com/inApps/v2/refund/lookup/555?revision=revision_input")
    }

    @Test func notificationHistoryPostsTheFiltersAndDecodesAppleFixture() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("getNotificationHistoryResponse.json"))]))
        let filters = NotificationHistoryRequest(
            startDateMs: 1_698_148_900_000, endDateMs: 1_698_148_950_000, notificationType: .subscribed,
            notificationSubtype: .initialBuy, onlyFailures: true)
        let page = try await h.client.notificationHistory(filters, paginationToken: "a7c8a0fa-1a2b")
        #expect(page.paginationToken == "57715481-805a-4283-8499-1c19b5d6b20a")
        #expect(page.hasMore)
        #expect(page.notificationHistory.map(\.signedPayload) == ["signed_payload_one", "signed_payload_two"])
        #expect(page.notificationHistory[0].sendAttempts.map(\.attemptDateMs) == [1_698_148_900_000, 1_698_148_950_000])
        #expect(page.notificationHistory[0].sendAttempts.map(\.sendAttemptResult) == [.noResponse, .success])
        #expect(page.notificationHistory[1].sendAttempts.map(\.sendAttemptResult) == [.circularRedirect])

        let request = try #require(h.transport.requests.first)
        #expect(request.method == "POST")
        #expect(request.url == "https://api.storekit.apple.com/inApps/v1/notifications/history?paginationToken=a7c8a0fa-1a2b")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.bodyJSON == [
            "startDate": 1_698_148_900_000, "endDate": 1_698_148_950_000, "notificationType": "SUBSCRIBED",
            "notificationSubtype": "INITIAL_BUY", "onlyFailures": true,
        ])
    }

    @Test func notificationHistoryForOneTransactionSendsOnlyTheWindowAndTheId() async throws {
        let h = try Harness(ScriptedTransport([ok(try Fixtures.model("getNotificationHistoryResponse.json"))]))
        _ = try await h.client.notificationHistory(NotificationHistoryRequest(startDateMs: 1, endDateMs: 2, transactionId: "999"))
        let request = try #require(h.transport.requests.first)
        #expect(request.url == "https://api.storekit.apple.com/inApps/v1/notifications/history")
        #expect(request.bodyJSON == ["startDate": 1, "endDate": 2, "transactionId": "999"])
    }

    @Test func testNotificationRequestAndStatusDecodeAppleFixtures() async throws {
        let h = try Harness(ScriptedTransport { request, _ in
            if request.method == "POST" { return ok(try! Fixtures.model("requestTestNotificationResponse.json")) }
            return ok(try! Fixtures.model("getTestNotificationStatusResponse.json"))
        })
        let token = try await h.client.requestTestNotification()
        #expect(token == "ce3af791-365e-4c60-841b-1674b43c1609")
        let status = try await h.client.testNotificationStatus(testNotificationToken: token)
        #expect(status.signedPayload == "signed_payload")
        #expect(status.sendAttempts.map(\.sendAttemptResult) == [.noResponse, .success])
        #expect(status.sendAttempts.map(\.attemptDateMs) == [1_698_148_900_000, 1_698_148_950_000])
        #expect(h.transport.requests.map(\.url) == [
            "https://api.storekit.apple.com/inApps/v1/notifications/test",
            "https://api.storekit.apple.com/inApps/v1/notifications/test/ce3af791-365e-4c60-841b-1674b43c1609",
        ])
        #expect(h.transport.requests[0].body == nil)
    }

    /// Each of Apple's error bodies, with the status Apple answers it with, becomes a typed error.
    @Test(arguments: [
        ("apiException.json", 500, 5000000, "An unknown error occurred.", true),
        ("apiTooManyRequestsException.json", 429, 4290000, "Rate limit exceeded.", true),
        ("apiUnknownError.json", 400, 9990000, "Testing error.", false),
        ("invalidTransactionIdError.json", 400, 4000006, "Invalid transaction id.", false),
        ("transactionIdNotFoundError.json", 404, 4040010, "Transaction id not found.", false),
        ("appTransactionDoesNotExistError.json", 404, 4040019, "No AppTransaction exists for the customer.", false),
        ("familyTransactionNotSupportedError.json", 400, 4000185,
         "Invalid request. Family Sharing transactions aren't supported by this endpoint.", false),
        ("invalidAppAccountTokenUUIDError.json", 400, 4000183,
         "Invalid request. The app account token field must be a valid UUID.", false),
        ("transactionIdNotOriginalTransactionId.json", 400, 4000187,
         "Invalid request. The transaction ID provided is not an original transaction ID.", false),
    ])
    func appleErrorBodiesBecomeTypedErrors(file: String, httpStatus: Int, code: Int, message: String, retryable: Bool) async throws {
        let body = try Fixtures.model(file)
        let h = try Harness(
            ScriptedTransport([.success(HTTPClientResponse(status: httpStatus, body: body))]),
            server: .baseURL("http://127.0.0.1:1", environment: .sandbox)) { $0.retriesMax = 0 }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1234")
        })
        #expect(error.kind == .httpError)
        #expect(error.httpStatus == httpStatus)
        #expect(error.errorCode == code)
        #expect(error.errorMessage == message)
        #expect(error.isRetryable == retryable)
        #expect(error.environment == .sandbox)
        #expect(error.retryAfterMs == nil)
    }

    /// A new fixture in Apple's folder must be decoded by a test above or listed here as out of scope.
    @Test func everyResponseAndErrorFixtureIsCoveredOrDeliberatelyOutOfScope() throws {
        let covered: Set<String> = [
            "transactionInfoResponse.json", "transactionHistoryResponse.json",
            "transactionHistoryResponseWithMalformedEnvironment.json", "transactionHistoryResponseWithMalformedAppAppleId.json",
            "getAllSubscriptionStatusesResponse.json", "lookupOrderIdResponse.json", "getRefundHistoryResponse.json",
            "getNotificationHistoryResponse.json", "requestTestNotificationResponse.json",
            "getTestNotificationStatusResponse.json",
            "apiException.json", "apiTooManyRequestsException.json", "apiUnknownError.json", "invalidTransactionIdError.json",
            "transactionIdNotFoundError.json", "appTransactionDoesNotExistError.json",
            "familyTransactionNotSupportedError.json", "invalidAppAccountTokenUUIDError.json",
            "transactionIdNotOriginalTransactionId.json",
            // OperationTests
            "extendRenewalDateForAllActiveSubscribersResponse.json", "extendSubscriptionRenewalDateResponse.json",
            "getStatusOfSubscriptionRenewalDateExtensionsResponse.json", "appTransactionInfoResponse.json",
        ]
        // Endpoints Kakin does not call (retention messaging, performance tests).
        let outOfScope: Set<String> = [
            "getDefaultMessageResponse.json", "getImageListResponse.json", "getMessageListResponse.json",
            "getRealtimeUrlResponse.json", "performanceTestResponse.json", "performanceTestResultResponse.json",
        ]
        let files = try FileManager.default.contentsOfDirectory(atPath: Fixtures.modelsDirectory.path)
        let relevant = files.filter { name in
            guard name.hasSuffix(".json"), !name.hasPrefix("advancedCommerce") else { return false }
            if name.contains("Response") { return true }
            guard let json = try? JSONParser.parse(try Fixtures.model(name)), case .object(let fields) = json else { return false }
            return fields["errorCode"] != nil
        }
        #expect(!relevant.isEmpty)
        for name in relevant {
            #expect(covered.contains(name) || outOfScope.contains(name), "fixture \(name) is neither decoded nor listed")
        }
    }
}
