import AppStoreClient
import KakinCore
import StoreAPITransport
import Testing

/// Production → sandbox fallback where Apple's answer says the ID is unknown, and the paging helpers.
@Suite struct EnvironmentAndPagingTests {
    static let production = AppStoreServerAPIConfiguration.productionBaseURL
    static let sandbox = AppStoreServerAPIConfiguration.sandboxBaseURL

    static func isSandbox(_ request: HTTPClientRequest) -> Bool { request.url.hasPrefix(sandbox) }

    @Test func transactionUnknownInProductionIsAskedOfSandbox() async throws {
        let h = try Harness(ScriptedTransport { request, _ in
            Self.isSandbox(request) ? ok(["signedTransactionInfo": "sandbox-jws"]) : appleError(404, 4040010)
        })
        let response = try await h.client.transactionInfo(transactionId: "2000000000000001")
        #expect(response.signedTransactionInfo == "sandbox-jws")
        #expect(response.answeringEnvironment == .sandbox)
        #expect(h.transport.requests.map(\.url) == [
            "\(Self.production)/inApps/v1/transactions/2000000000000001",
            "\(Self.sandbox)/inApps/v1/transactions/2000000000000001",
        ])
        #expect(h.sleeper.waitsMs.isEmpty)
    }

    @Test func originalTransactionUnknownInProductionSendsStatusesToSandbox() async throws {
        let h = try Harness(ScriptedTransport { request, _ in
            Self.isSandbox(request) ? ok(["environment": "Sandbox", "data": []]) : appleError(404, 4040005)
        })
        let response = try await h.client.allSubscriptionStatuses(transactionId: "9")
        #expect(response.answeringEnvironment == .sandbox)
        #expect(response.environment == .sandbox)
        #expect(h.transport.requests.count == 2)
    }

    @Test func unknownInBothEnvironmentsReportsSandboxsAnswer() async throws {
        let h = try Harness(ScriptedTransport([appleError(404, 4040010)]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.errorCode == 4040010)
        #expect(error.environment == .sandbox)
        #expect(h.transport.requests.count == 2)
    }

    @Test(arguments: [(404, Int64(4040001)), (404, Int64(4040003)), (400, Int64(4000006)), (500, Int64(5000000))])
    func otherFailuresInProductionDoNotFallBack(httpStatus: Int, code: Int64) async throws {
        let h = try Harness(ScriptedTransport([appleError(httpStatus, code)])) { $0.retriesMax = 0 }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.environment == .production)
        #expect(h.transport.requests.count == 1)
    }

    @Test func explicitBaseURLNeverFallsBack() async throws {
        let h = try Harness(ScriptedTransport([appleError(404, 4040010)]), server: .baseURL("http://127.0.0.1:8123", environment: .production))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionHistory(transactionId: "1")
        })
        #expect(error.errorCode == 4040010)
        #expect(h.transport.requests.map(\.url) == ["http://127.0.0.1:8123/inApps/v2/history/1"])
    }

    @Test func orderLookupAsksProductionOnly() async throws {
        let h = try Harness(ScriptedTransport([appleError(404, 4040010)]))
        _ = await apiError { () async throws(AppStoreServerAPIError) in try await h.client.lookUpOrderId("MQ1") }
        #expect(h.transport.requests.count == 1)
    }

    /// A history of 45 transactions served 20 per page; the script checks every request.
    static func pagedHistory(
        environment: String, pageSize: Int = 20, total: Int = 45
    ) -> @Sendable (HTTPClientRequest, Int) -> ScriptedTransport.Answer {
        return { request, _ in
            let start = request.queryValues("revision").first.flatMap { Int($0.dropFirst(4)) } ?? 0
            let end = min(start + pageSize, total)
            return ok([
                "revision": .string("rev-\(end)"), "hasMore": .bool(end < total), "bundleId": "com.example",
                "appAppleId": 1234, "environment": .string(environment),
                "signedTransactions": .array((start..<end).map { .string("jws-\($0)") }),
            ])
        }
    }

    @Test func allHistoryPagesResendIdenticalFiltersWithEachRevision() async throws {
        let h = try Harness(ScriptedTransport(Self.pagedHistory(environment: "Production")))
        let filters = TransactionHistoryRequest(productTypes: [.autoRenewable, .nonRenewable], revoked: false, sort: .descending)
        let history = try await h.client.allTransactionHistory(transactionId: "42", request: filters)
        #expect(history.signedTransactions == (0..<45).map { "jws-\($0)" })
        #expect(history.pageCount == 3)
        #expect(!history.hasMore)
        #expect(history.revision == "rev-45")
        #expect(history.answeringEnvironment == .production)
        #expect(history.appAppleId == 1234)
        let requests = h.transport.requests
        #expect(requests.map { $0.queryValues("revision") } == [[], ["rev-20"], ["rev-40"]])
        for request in requests {
            #expect(request.path == "\(Self.production)/inApps/v2/history/42")
            #expect(request.queryItems.filter { $0.0 != "revision" }.map { "\($0.0)=\($0.1)" } == [
                "productType=AUTO_RENEWABLE", "productType=NON_RENEWABLE", "revoked=false", "sort=DESCENDING",
            ])
        }
    }

    @Test func historyFoundInSandboxIsPagedInSandbox() async throws {
        let sandboxPages = Self.pagedHistory(environment: "Sandbox")
        let h = try Harness(ScriptedTransport { request, index in
            Self.isSandbox(request) ? sandboxPages(request, index) : appleError(404, 4040010)
        })
        let history = try await h.client.allTransactionHistory(transactionId: "42")
        #expect(history.signedTransactions.count == 45)
        #expect(history.answeringEnvironment == .sandbox)
        // Production once (unknown there), then every page from sandbox.
        #expect(h.transport.requests.map(Self.isSandbox) == [false, true, true, true])
    }

    @Test func historyPagingStopsAtPagesMaxAndSaysThereIsMore() async throws {
        let h = try Harness(ScriptedTransport(Self.pagedHistory(environment: "Production", pageSize: 2, total: 100)))
        let history = try await h.client.allTransactionHistory(transactionId: "42", pagesMax: 4)
        #expect(history.signedTransactions.count == 8)
        #expect(history.pageCount == 4)
        #expect(history.hasMore)
        #expect(history.revision == "rev-8")
        #expect(h.transport.requests.count == 4)
    }

    @Test func historyThatClaimsMoreWithoutARevisionIsAnInvalidResponse() async throws {
        let h = try Harness(ScriptedTransport([ok(["hasMore": true, "signedTransactions": ["a"]])]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.allTransactionHistory(transactionId: "42")
        })
        #expect(error.kind == .invalidResponse)
        #expect(h.transport.requests.count == 1)
    }

    @Test func explicitEnvironmentOutsideTheConfigurationIsRefusedBeforeSending() async throws {
        let h = try Harness(ScriptedTransport([ok([:])]), server: .appleSandbox)
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionHistory(transactionId: "1", revision: "r", environment: .production)
        })
        #expect(error.kind == .invalidRequest)
        #expect(h.transport.requests.isEmpty)
    }

    @Test func allNotificationHistoryResendsTheSameBodyWithEachToken() async throws {
        let h = try Harness(ScriptedTransport { request, index in
            let last = index == 2
            return ok([
                "paginationToken": last ? .null : .string("token+/\(index)="), "hasMore": .bool(!last),
                "notificationHistory": [[
                    "signedPayload": .string("payload-\(index)"),
                    "sendAttempts": [["attemptDate": 1_000, "sendAttemptResult": "TIMED_OUT"]],
                ]],
            ])
        })
        let filters = NotificationHistoryRequest(startDateMs: 10, endDateMs: 20, onlyFailures: true)
        let history = try await h.client.allNotificationHistory(filters, environment: .sandbox)
        #expect(history.notificationHistory.map(\.signedPayload) == ["payload-0", "payload-1", "payload-2"])
        #expect(history.notificationHistory[0].sendAttempts.first?.sendAttemptResult == .timedOut)
        #expect(history.pageCount == 3)
        #expect(!history.hasMore)
        let requests = h.transport.requests
        #expect(requests.map { $0.queryValues("paginationToken") } == [[], ["token+/0="], ["token+/1="]])
        // `+`, `/` and `=` travel percent-encoded, so the server reads back the exact token.
        #expect(requests[1].url.hasSuffix("?paginationToken=token%2B%2F0%3D"))
        for request in requests {
            #expect(request.path == "\(Self.sandbox)/inApps/v1/notifications/history")
            #expect(request.bodyJSON == ["startDate": 10, "endDate": 20, "onlyFailures": true])
        }
    }

    @Test func notificationPagingStopsAtPagesMax() async throws {
        let h = try Harness(ScriptedTransport { _, index in
            ok(["paginationToken": .string("t\(index)"), "hasMore": true, "notificationHistory": []])
        })
        let history = try await h.client.allNotificationHistory(NotificationHistoryRequest(startDateMs: 0, endDateMs: 1), pagesMax: 3)
        #expect(history.pageCount == 3)
        #expect(history.hasMore)
        #expect(history.paginationToken == "t2")
        #expect(h.transport.requests.count == 3)
    }
}
