import AppStoreClient
import KakinCore
import Testing

/// Finish Transaction and the Retention Messaging configuration endpoints: Apple's paths, methods and
/// bodies against a scripted transport with Apple's own response fixtures, then against the simulator.
@Suite struct Apple2026ClientTests {
    static let id = "a1b2c3d4-e5f6-7890-a1b2-c3d4e5f67890"

    @Test func finishTransactionPostsToApplesPath() async throws {
        let h = try Harness(ScriptedTransport([ok([])]))
        try await h.client.finishTransaction(transactionId: "1234")
        let r = try #require(h.transport.requests.first)
        #expect(r.method == "POST" && r.url == "https://api.storekit.apple.com/inApps/v1/transactions/1234/finish" && r.body == nil)
        // Unknown in production: tried in sandbox, like the other lookups.
        let fallback = try Harness(ScriptedTransport([status(404, ["errorCode": 4_040_010, "errorMessage": "not found"]), ok([])]))
        try await fallback.client.finishTransaction(transactionId: "1234")
        #expect(fallback.transport.requests.map(\.url) == ["https://api.storekit.apple.com/inApps/v1/transactions/1234/finish",
                                                          "https://api.storekit-sandbox.apple.com/inApps/v1/transactions/1234/finish"])
    }

    @Test func imagesDecodeApplesFixtureAndUploadPNG() async throws {
        let h = try Harness(ScriptedTransport([ok([]), ok(try Fixtures.model("getImageListResponse.json")), ok([])]))
        try await h.client.uploadRetentionImage(imageIdentifier: Self.id, png: [0x89, 0x50], size: .fullSize)
        let images = try await h.client.retentionImages()
        #expect(images == [RetentionImage(imageIdentifier: Self.id, imageState: .approved, imageSize: .fullSize)])
        try await h.client.deleteRetentionImage(imageIdentifier: Self.id)
        let upload = h.transport.requests[0]
        #expect(upload.method == "PUT" && upload.path == "https://api.storekit.apple.com/inApps/v1/messaging/image/\(Self.id)")
        #expect(upload.queryValues("imageSize") == ["FULL_SIZE"])
        #expect(upload.header("Content-Type") == "image/png" && upload.body == [0x89, 0x50])
        #expect(h.transport.requests[1].url == "https://api.storekit.apple.com/inApps/v1/messaging/image/list")
        #expect(h.transport.requests[2].method == "DELETE")
    }

    @Test func messagesUploadApplesShapeAndDecodeApplesFixture() async throws {
        let h = try Harness(ScriptedTransport([ok([]), ok(try Fixtures.model("getMessageListResponse.json"))]))
        let message = UploadMessageRequest(header: "Stay", body: "Half price for three months.",
                                           image: .init(imageIdentifier: Self.id, altText: "A cat"), headerPosition: .aboveImage,
                                           bulletPoints: [.init(text: "Everything", imageIdentifier: Self.id, altText: "tick")])
        try await h.client.uploadRetentionMessage(messageIdentifier: Self.id, message)
        let sent = try JSONParser.parse(try #require(h.transport.requests[0].body))
        #expect(sent == ["header": "Stay", "body": "Half price for three months.",
                         "image": ["imageIdentifier": .string(Self.id), "altText": "A cat"], "headerPosition": "ABOVE_IMAGE",
                         "bulletPoints": [["text": "Everything", "imageIdentifier": .string(Self.id), "altText": "tick"]]])
        #expect(h.transport.requests[0].path == "https://api.storekit.apple.com/inApps/v1/messaging/message/\(Self.id)")
        #expect(try await h.client.retentionMessages() == [RetentionMessage(messageIdentifier: Self.id, messageState: .approved)])
        // Apple's limits are checked before anything is sent.
        let tooLong = UploadMessageRequest(header: String(repeating: "h", count: 67), body: "b")
        let error = await apiError { () async throws(AppStoreServerAPIError) in try await h.client.uploadRetentionMessage(messageIdentifier: Self.id, tooLong) }
        #expect(error?.kind == .invalidRequest)
        #expect(h.transport.requests.count == 2)
    }

    @Test func defaultMessageAndRealtimeURL() async throws {
        let h = try Harness(ScriptedTransport([ok([]), ok(try Fixtures.model("getDefaultMessageResponse.json")), ok([]),
                                               ok([]), ok(try Fixtures.model("getRealtimeUrlResponse.json")), ok([])]))
        try await h.client.configureDefaultRetentionMessage(productId: "com.example.product", locale: "en-US", messageIdentifier: Self.id)
        #expect(try await h.client.defaultRetentionMessage(productId: "com.example.product", locale: "en-US") == Self.id)
        try await h.client.deleteDefaultRetentionMessage(productId: "com.example.product", locale: "en-US")
        try await h.client.configureRealtimeURL("https://example.com/realtime")
        #expect(try await h.client.realtimeURL() == "https://example.com/realtime")
        try await h.client.deleteRealtimeURL()
        let r = h.transport.requests
        #expect(r.map(\.method) == ["PUT", "GET", "DELETE", "PUT", "GET", "DELETE"])
        #expect(r[0].url == "https://api.storekit.apple.com/inApps/v1/messaging/default/com.example.product/en-US")
        #expect(try JSONParser.parse(try #require(r[0].body)) == ["messageIdentifier": .string(Self.id)])
        #expect(r[3].url == "https://api.storekit.apple.com/inApps/v1/messaging/realtime/url")
        #expect(try JSONParser.parse(try #require(r[3].body)) == ["realtimeURL": "https://example.com/realtime"])
        // No sandbox fallback for configuration.
        let missing = try Harness(ScriptedTransport([status(404, ["errorCode": 4_040_021, "errorMessage": "none"])]))
        let error = await apiError { () async throws(AppStoreServerAPIError) in try await missing.client.realtimeURL() }
        #expect(error?.errorCode == 4_040_021 && missing.transport.requests.count == 1)
    }

    @Test func againstTheSimulator() async throws {
        try await SimulatorEndToEndTests.withSimulator { s in
            let client = try s.client()
            let tid = try await s.buy("coins.500", account: SimulatorEndToEndTests.account)
            try await client.finishTransaction(transactionId: tid)
            let finished = try await s.control("GET", "/accounts/\(SimulatorEndToEndTests.account)/finished")
            #expect(finished["finished"]?.arrayValue?.map { $0["transactionId"] } == [.string(tid)])

            try await client.uploadRetentionMessage(messageIdentifier: Self.id, UploadMessageRequest(header: "Stay", body: "Please."))
            #expect(try await client.retentionMessages().map(\.messageIdentifier) == [Self.id])
            try await client.configureDefaultRetentionMessage(productId: "premium.monthly", locale: "en-US", messageIdentifier: Self.id)
            #expect(try await client.defaultRetentionMessage(productId: "premium.monthly", locale: "en-US") == Self.id)
            try await client.configureRealtimeURL("https://kakin.example/v1/apple/retention-message/dev.kakin.demo")
            #expect(try await client.realtimeURL() == "https://kakin.example/v1/apple/retention-message/dev.kakin.demo")
            try await client.uploadRetentionImage(imageIdentifier: Self.id, png: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0])
            #expect(try await client.retentionImages().map(\.imageSize) == [.fullSize])
            let duplicate = await apiError { () async throws(AppStoreServerAPIError) in
                try await client.uploadRetentionMessage(messageIdentifier: Self.id, UploadMessageRequest(header: "Stay", body: "Again."))
            }
            #expect(duplicate?.errorCode == 4_090_001)
        }
    }
}
