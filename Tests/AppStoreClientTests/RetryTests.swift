import AppStoreClient
import KakinCore
import StoreAPITransport
import Testing

/// Retries, backoff, 429 `Retry-After`, and the failures that are never retried. Waits go through an
/// instant sleeper that moves a manual clock.
@Suite struct RetryTests {
    static let infoBody: JSONValue = ["signedTransactionInfo": "jws"]

    @Test func rateLimitedCallWaitsExactlyUntilRetryAfterThenSucceeds() async throws {
        let retryAt = Fixtures.now + 1_234
        let h = try Harness(ScriptedTransport([
            appleError(429, 4290000, headers: ["Retry-After": String(retryAt)]),
            ok(Self.infoBody),
        ]))
        let response = try await h.client.transactionInfo(transactionId: "1")
        #expect(response.signedTransactionInfo == "jws")
        #expect(h.sleeper.waitsMs == [1_234])
        #expect(h.clock.nowMs() == retryAt)
        #expect(h.transport.requests.count == 2)
    }

    @Test func retryAfterInThePastRetriesAtOnce() async throws {
        let h = try Harness(ScriptedTransport([
            appleError(429, 4290000, headers: ["retry-after": String(Fixtures.now - 5_000)]),
            ok(Self.infoBody),
        ]))
        _ = try await h.client.transactionInfo(transactionId: "1")
        #expect(h.sleeper.waitsMs == [0])
    }

    @Test func retryAfterBeyondTheWaitLimitFailsFastWithTheRetryTime() async throws {
        let retryAt = Fixtures.now + 60_000
        let h = try Harness(ScriptedTransport([appleError(429, 4290000, headers: ["Retry-After": String(retryAt)])])) {
            $0.rateLimitWaitMsMax = 10_000
        }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .httpError)
        #expect(error.httpStatus == 429)
        #expect(error.errorCode == 4290000)
        #expect(error.retryAfterMs == retryAt)
        #expect(error.isRetryable)
        #expect(error.attempts == 1)
        #expect(h.sleeper.waitsMs.isEmpty)
        #expect(h.transport.requests.count == 1)
    }

    @Test func rateLimitThatPersistsStopsAfterTheRetryBound() async throws {
        let h = try Harness(ScriptedTransport { _, _ in
            appleError(429, 4290000, headers: ["Retry-After": String(Fixtures.now + 100_000)])
        }) { $0.rateLimitWaitMsMax = 3_600_000 }
        // Each answer names the same instant, so after the first wait the others are 0.
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.lookUpOrderId("W1")
        })
        #expect(error.attempts == 4)
        #expect(h.transport.requests.count == 4)
        #expect(h.sleeper.waitsMs == [100_000, 0, 0])
    }

    @Test(arguments: ["", " ", "not-a-number", "1698148900000.0", "+1698148900000", "-1698148900000", "1698148900000abc",
                      "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT"])
    func malformedRetryAfterIsIgnoredAndBackoffApplies(value: String) async throws {
        let h = try Harness(ScriptedTransport([appleError(429, 4290000, headers: ["Retry-After": value]), ok(Self.infoBody)])) {
            $0.backoffBaseMs = 400
        }
        _ = try await h.client.transactionInfo(transactionId: "1")
        let wait = try #require(h.sleeper.waitsMs.first)
        #expect((200...400).contains(wait))

        let noRetry = try Harness(ScriptedTransport([appleError(429, 4290000, headers: ["Retry-After": value])])) {
            $0.retriesMax = 0
        }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await noRetry.client.transactionInfo(transactionId: "1")
        })
        #expect(error.retryAfterMs == nil)
    }

    @Test func serverErrorsAreRetriedWithBoundedJitteredExponentialBackoff() async throws {
        for _ in 0..<20 {
            let h = try Harness(ScriptedTransport { _, _ in status(503) }) {
                $0.retriesMax = 5
                $0.backoffBaseMs = 100
                $0.backoffMsMax = 1_000
            }
            let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
                try await h.client.transactionInfo(transactionId: "1")
            })
            #expect(error.httpStatus == 503)
            #expect(error.isRetryable)
            #expect(error.attempts == 6)
            #expect(h.transport.requests.count == 6)
            let waits = h.sleeper.waitsMs
            #expect(waits.count == 5)
            for (retry, wait) in waits.enumerated() {
                let ceiling = min(Int64(100) << Int64(retry), 1_000)
                #expect(wait >= ceiling / 2 && wait <= ceiling, "retry \(retry) waited \(wait) ms")
            }
        }
    }

    @Test func transientFailuresThenSuccessReturnTheAnswer() async throws {
        let h = try Harness(ScriptedTransport([
            .failure(.timedOut),
            .failure(.connectionFailed(reason: "connection lost")),
            appleError(500, 5000001),
            ok(Self.infoBody),
        ]))
        let response = try await h.client.transactionInfo(transactionId: "1")
        #expect(response.signedTransactionInfo == "jws")
        #expect(h.transport.requests.count == 4)
        #expect(h.sleeper.waitsMs.count == 3)
    }

    @Test(arguments: [4040002, 4040004, 4040006])
    func appleRetryableNotFoundCodesAreRetried(code: Int64) async throws {
        let h = try Harness(ScriptedTransport([appleError(404, code), ok(Self.infoBody)]))
        _ = try await h.client.transactionInfo(transactionId: "1")
        #expect(h.transport.requests.count == 2)
    }

    @Test func timeoutsThatPersistEndAsTimedOutAfterTheBound() async throws {
        let h = try Harness(ScriptedTransport([.failure(.timedOut)])) { $0.retriesMax = 2 }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .timedOut)
        #expect(error.isRetryable)
        #expect(error.attempts == 3)
    }

    @Test(arguments: [(400, Int64(4000006)), (404, Int64(4040010)), (403, Int64(4030004)), (400, Int64(4000005))])
    func nonRetryableClientErrorsAreNotRetried(httpStatus: Int, code: Int64) async throws {
        let h = try Harness(ScriptedTransport([appleError(httpStatus, code)]), server: .appleSandbox)
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .httpError)
        #expect(error.httpStatus == httpStatus)
        #expect(error.errorCode == Int(code))
        #expect(!error.isRetryable)
        #expect(error.attempts == 1)
        #expect(h.transport.requests.count == 1)
        #expect(h.sleeper.waitsMs.isEmpty)
    }

    @Test func badTokenIsSurfacedAsUnauthorizedWithoutRetryOrSecrets() async throws {
        let h = try Harness(ScriptedTransport([.success(HTTPClientResponse(status: 401))]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.allSubscriptionStatuses(transactionId: "77")
        })
        #expect(error.kind == .unauthorized)
        #expect(error.httpStatus == 401)
        #expect(error.errorCode == nil)
        #expect(!error.isRetryable)
        #expect(h.transport.requests.count == 1)
        // A 401 is not a "not found": no fallback to sandbox either.
        #expect(h.transport.requests[0].url.hasPrefix(AppStoreServerAPIConfiguration.productionBaseURL))
        let token = try #require(h.transport.requests[0].bearerToken)
        let description = String(describing: error)
        #expect(!description.contains(token))
        #expect(!description.contains(token.split(separator: ".")[2]))
        #expect(description == "App Store Server API GET /inApps/v1/subscriptions/77 (Production): HTTP 401, the API token was refused")
    }

    @Test func answerOverTheSizeLimitIsRefusedAndNotRetried() async throws {
        let h = try Harness(ScriptedTransport([ok([UInt8](repeating: 0x20, count: 2_049))])) { $0.responseBytesMax = 2_048 }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .responseTooLarge)
        #expect(!error.isRetryable)
        #expect(h.transport.requests.count == 1)
    }

    @Test func successWithABodyThatIsNotJSONIsAnInvalidResponse() async throws {
        let h = try Harness(ScriptedTransport([ok(Array("<html>".utf8))]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .invalidResponse)
        #expect(error.detail == "body is not JSON")
        #expect(error.httpStatus == 200)
    }

    @Test func serverErrorWithoutAppleBodyStillCarriesTheStatus() async throws {
        let h = try Harness(ScriptedTransport([.success(HTTPClientResponse(status: 502, body: Array("Bad Gateway".utf8)))])) {
            $0.retriesMax = 0
        }
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.httpStatus == 502)
        #expect(error.errorCode == nil)
        #expect(error.errorMessage == nil)
        #expect(error.isRetryable)
    }

    @Test func cancellationDuringABackoffEndsTheCallAsCancelled() async throws {
        let h = try Harness(ScriptedTransport([status(503)]), cancelSleepAt: 0)
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "1")
        })
        #expect(error.kind == .cancelled)
        #expect(!error.isRetryable)
        #expect(h.transport.requests.count == 1)
    }

    @Test func cancelledTaskSendsNothing() async throws {
        let h = try Harness(ScriptedTransport([ok(Self.infoBody)]))
        let task = Task { () async -> AppStoreServerAPIError? in
            withUnsafeCurrentTask { $0?.cancel() }
            return await apiError { () async throws(AppStoreServerAPIError) in try await h.client.transactionInfo(transactionId: "1") }
        }
        let error = await task.value
        #expect(error?.kind == .cancelled)
        #expect(error?.attempts == 0)
        #expect(h.transport.requests.isEmpty)
    }
}
