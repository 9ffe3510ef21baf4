import AppStoreClient
import AppStoreSecurity
import KakinCore
import Testing

/// What goes on the wire: the bearer JWT of each request, URLs under a base URL with a prefix, encoding,
/// and the configurations the client refuses.
@Suite struct RequestTests {
    @Test func everyAttemptCarriesAFreshlySignedTokenWithApplesClaims() async throws {
        let h = try Harness(ScriptedTransport([status(503), ok(["signedTransactionInfo": "jws"])]))
        _ = try await h.client.transactionInfo(transactionId: "1")
        let requests = h.transport.requests
        #expect(requests.count == 2)
        var issuedAt: [Int64] = []
        for request in requests {
            let token = try #require(request.bearerToken)
            let (header, claims) = try #require(jwtParts(token))
            #expect(header == ["alg": "ES256", "kid": .string(testKeyId), "typ": "JWT"])
            #expect(claims["aud"] == "appstoreconnect-v1")
            #expect(claims["iss"] == .string(testIssuerId))
            #expect(claims["bid"] == .string(testBundleId))
            let iat = try #require(claims["iat"]?.int64Value)
            let exp = try #require(claims["exp"]?.int64Value)
            #expect(exp > iat && exp <= iat + 3600)
            issuedAt.append(iat)

            // Verified the way Apple (and the simulator) verify it.
            let verifier = AppStoreServerAPITokenVerifier(
                keys: [testKeyId: .init(publicKey: Fixtures.key.publicKey, issuerId: testIssuerId)], bundleId: testBundleId)
            let verified = try verifier.verify(token, nowSeconds: iat)
            #expect(verified.expiresAtSeconds == iat + 300)
        }
        // The clock moved by the backoff between attempts, and each token says so.
        #expect(issuedAt[0] == Fixtures.now / 1000)
        #expect(issuedAt[1] == (Fixtures.now + h.sleeper.waitsMs[0]) / 1000)
    }

    @Test func baseURLKeepsItsPrefixAndAppendsApplesPaths() async throws {
        let h = try Harness(
            ScriptedTransport([ok(["signedTransactionInfo": "jws"])]),
            server: .baseURL("http://127.0.0.1:8123/simulator/", environment: .sandbox))
        let response = try await h.client.transactionInfo(transactionId: "77")
        #expect(response.answeringEnvironment == .sandbox)
        #expect(h.transport.requests.first?.url == "http://127.0.0.1:8123/simulator/inApps/v1/transactions/77")
    }

    @Test func identifiersAndQueryValuesArePercentEncoded() async throws {
        let h = try Harness(ScriptedTransport([ok(["status": 0, "signedTransactions": []])]))
        _ = try await h.client.lookUpOrderId("a/b c?d")
        #expect(h.transport.requests.first?.url == "\(AppStoreServerAPIConfiguration.productionBaseURL)/inApps/v1/lookup/a%2Fb%20c%3Fd")

        let history = try Harness(ScriptedTransport([ok(["hasMore": false, "signedTransactions": []])]))
        _ = try await history.client.transactionHistory(
            transactionId: "1", request: TransactionHistoryRequest(productIds: ["com.example.a&b=c"]), revision: "x+y/z==")
        #expect(history.transport.requests.first?.url.hasSuffix("?productId=com.example.a%26b%3Dc&revision=x%2By%2Fz%3D%3D") == true)
    }

    @Test func emptyIdentifierIsRefusedBeforeSending() async throws {
        let h = try Harness(ScriptedTransport([ok(["signedTransactionInfo": "jws"])]))
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "")
        })
        #expect(error.kind == .invalidRequest)
        #expect(h.transport.requests.isEmpty)
    }

    @Test(arguments: [
        "ftp://127.0.0.1/x", "127.0.0.1:8080", "http://", "http:///path", "http://host/x?y=1", "http://host/#frag",
        "http://host name",
    ])
    func unusableBaseURLIsRefused(url: String) {
        #expect(throws: AppStoreServerAPIConfigurationError.self) {
            try AppStoreServerAPIClient(
                configuration: makeConfiguration(server: .baseURL(url, environment: .sandbox)), clock: ManualClock(),
                transport: ScriptedTransport([]))
        }
    }

    @Test func limitsOutOfRangeAreRefused() {
        let invalid: [(inout AppStoreServerAPIConfiguration) -> Void] = [
            { $0.requestTimeoutMs = 0 }, { $0.retriesMax = -1 }, { $0.retriesMax = 11 }, { $0.backoffBaseMs = -1 },
            { $0.backoffMsMax = 10; $0.backoffBaseMs = 20 }, { $0.rateLimitWaitMsMax = -1 }, { $0.responseBytesMax = 0 },
            { $0.tokenLifetimeSeconds = 3601 }, { $0.bundleId = "" },
        ]
        for change in invalid {
            var configuration = makeConfiguration()
            change(&configuration)
            #expect(throws: AppStoreServerAPIConfigurationError.self) {
                try AppStoreServerAPIClient(configuration: configuration, clock: ManualClock(), transport: ScriptedTransport([]))
            }
        }
    }

    @Test func errorDescriptionNamesTheRequestAndAppleCodeOnly() async throws {
        let h = try Harness(ScriptedTransport([appleError(404, 4040010)]), server: .appleSandbox)
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in
            try await h.client.transactionInfo(transactionId: "123")
        })
        #expect(String(describing: error)
            == "App Store Server API GET /inApps/v1/transactions/123 (Sandbox): HTTP 404, errorCode 4040010 (scripted)")
    }
}
