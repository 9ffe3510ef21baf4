import KakinCore

// Apple's 2026 endpoints: Finish Transaction (App Store Server API 1.20) and the Retention Messaging API's
// configuration (messages, images, default messages, the realtime URL), at Apple's paths and with Apple's
// shapes (its library's `upload_image`, `upload_message`, `configure_default_message`,
// `configure_realtime_url`, …). The Retention Messaging API is served by the same hosts and token as the
// App Store Server API; it has no production → sandbox fallback (configuration is per environment).

/// `ImageSize`: a full-width image, or a bullet point's icon.
public struct RetentionImageSize: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let fullSize = Self(rawValue: "FULL_SIZE")
    public static let bulletPoint = Self(rawValue: "BULLET_POINT")
}

/// `MessageState` / `ImageState`: Apple reviews every message and image.
public struct RetentionReviewState: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let pending = Self(rawValue: "PENDING")
    public static let approved = Self(rawValue: "APPROVED")
    public static let rejected = Self(rawValue: "REJECTED")
}

/// `UploadMessageRequestBody`: header ≤ 66 characters, body ≤ 144, an optional image, ≤ 5 bullet points.
public struct UploadMessageRequest: Sendable, Equatable {
    public struct Image: Sendable, Equatable {
        public var imageIdentifier: String
        /// ≤ 150 characters.
        public var altText: String
        public init(imageIdentifier: String, altText: String) {
            self.imageIdentifier = imageIdentifier
            self.altText = altText
        }
    }
    public struct BulletPoint: Sendable, Equatable {
        /// ≤ 66 characters.
        public var text: String
        public var imageIdentifier: String
        public var altText: String
        public init(text: String, imageIdentifier: String, altText: String) {
            self.text = text
            self.imageIdentifier = imageIdentifier
            self.altText = altText
        }
    }
    /// `HeaderPosition`: `ABOVE_BODY` (Apple's default) or `ABOVE_IMAGE`.
    public enum HeaderPosition: String, Sendable { case aboveBody = "ABOVE_BODY", aboveImage = "ABOVE_IMAGE" }

    public var header: String
    public var body: String
    public var image: Image?
    public var headerPosition: HeaderPosition?
    public var bulletPoints: [BulletPoint]?

    public init(header: String, body: String, image: Image? = nil, headerPosition: HeaderPosition? = nil, bulletPoints: [BulletPoint]? = nil) {
        self.header = header
        self.body = body
        self.image = image
        self.headerPosition = headerPosition
        self.bulletPoints = bulletPoints
    }

    /// Apple's limits, checked before sending (as its library's validators do).
    func validated(_ label: String) throws(AppStoreServerAPIError) -> JSONValue {
        func refuse(_ why: String) -> AppStoreServerAPIError { AppStoreServerAPIError(kind: .invalidRequest, request: label, detail: why) }
        guard header.count <= Self.headerCharactersMax else { throw refuse("header is longer than 66 characters") }
        guard body.count <= Self.bodyCharactersMax else { throw refuse("body is longer than 144 characters") }
        var o: [String: JSONValue] = ["header": .string(header), "body": .string(body)]
        if let image {
            guard image.altText.count <= Self.altTextCharactersMax else { throw refuse("image.altText is longer than 150 characters") }
            o["image"] = ["imageIdentifier": .string(image.imageIdentifier), "altText": .string(image.altText)]
        }
        if let headerPosition { o["headerPosition"] = .string(headerPosition.rawValue) }
        if let bulletPoints {
            guard bulletPoints.count <= Self.bulletPointsMax else { throw refuse("more than 5 bullet points") }
            for b in bulletPoints where b.text.count > Self.headerCharactersMax || b.altText.count > Self.altTextCharactersMax {
                throw refuse("a bullet point's text is longer than 66 characters or its altText longer than 150")
            }
            o["bulletPoints"] = .array(bulletPoints.map { ["text": .string($0.text), "imageIdentifier": .string($0.imageIdentifier), "altText": .string($0.altText)] })
        }
        return .object(o)
    }
}

public struct RetentionImage: Sendable, Equatable {
    public var imageIdentifier: String?
    public var imageState: RetentionReviewState?
    public var imageSize: RetentionImageSize?

    public init(imageIdentifier: String?, imageState: RetentionReviewState?, imageSize: RetentionImageSize?) {
        self.imageIdentifier = imageIdentifier
        self.imageState = imageState
        self.imageSize = imageSize
    }
}

public struct RetentionMessage: Sendable, Equatable {
    public var messageIdentifier: String?
    public var messageState: RetentionReviewState?

    public init(messageIdentifier: String?, messageState: RetentionReviewState?) {
        self.messageIdentifier = messageIdentifier
        self.messageState = messageState
    }
}

extension AppStoreServerAPIClient {
    // MARK: Finish Transaction

    /// Finish Transaction: the App Store's side of StoreKit's `finish()`, from the server (for a purchase the
    /// app never finished, e.g. one credited from a notification after the app was killed). Apple answers
    /// 200 with no body; 4040010 for an unknown transaction.
    /// - Parameter environment: the transaction's environment; nil to try production, then sandbox.
    public func finishTransaction(transactionId: String, environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "POST", path: ["inApps", "v1", "transactions", transactionId, "finish"])
        _ = try await send(call, routing: Self.routing(environment))
    }

    // MARK: Retention Messaging: images

    /// Upload Image: a PNG under a UUID you choose; Apple reviews it (`PENDING` until `APPROVED`).
    public func uploadRetentionImage(imageIdentifier: String, png: [UInt8], size: RetentionImageSize? = nil,
                                     environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "messaging", "image", imageIdentifier],
                               query: size.map { [("imageSize", $0.rawValue)] } ?? [], rawBody: (png, "image/png"))
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func deleteRetentionImage(imageIdentifier: String, environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "DELETE", path: ["inApps", "v1", "messaging", "image", imageIdentifier])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func retentionImages(environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) -> [RetentionImage] {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "messaging", "image", "list"])
        return try await perform(call, routing: Self.configRouting(environment)) { body, _ throws(ResponseShapeError) in
            var out: [RetentionImage] = []
            for item in try body.objects("imageIdentifiers") {
                out.append(RetentionImage(imageIdentifier: try item.optionalString("imageIdentifier"),
                                          imageState: try item.optionalString("imageState").map(RetentionReviewState.init(rawValue:)),
                                          imageSize: try item.optionalString("imageSize").map(RetentionImageSize.init(rawValue:))))
            }
            return out
        }
    }

    // MARK: Retention Messaging: messages

    /// Upload Message under a UUID you choose; Apple reviews it (`PENDING` until `APPROVED`).
    public func uploadRetentionMessage(messageIdentifier: String, _ message: UploadMessageRequest,
                                       environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let label = "PUT /inApps/v1/messaging/message/\(messageIdentifier)"
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "messaging", "message", messageIdentifier], body: try message.validated(label))
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func deleteRetentionMessage(messageIdentifier: String, environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "DELETE", path: ["inApps", "v1", "messaging", "message", messageIdentifier])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func retentionMessages(environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) -> [RetentionMessage] {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "messaging", "message", "list"])
        return try await perform(call, routing: Self.configRouting(environment)) { body, _ throws(ResponseShapeError) in
            var out: [RetentionMessage] = []
            for item in try body.objects("messageIdentifiers") {
                out.append(RetentionMessage(messageIdentifier: try item.optionalString("messageIdentifier"),
                                            messageState: try item.optionalString("messageState").map(RetentionReviewState.init(rawValue:))))
            }
            return out
        }
    }

    // MARK: Retention Messaging: default message

    /// Configure Default Message: what the App Store shows for a product and locale when the realtime
    /// endpoint does not answer in time.
    public func configureDefaultRetentionMessage(productId: String, locale: String, messageIdentifier: String,
                                                 environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "messaging", "default", productId, locale],
                               body: ["messageIdentifier": .string(messageIdentifier)])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func deleteDefaultRetentionMessage(productId: String, locale: String,
                                              environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "DELETE", path: ["inApps", "v1", "messaging", "default", productId, locale])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    /// Get Default Message: its `messageIdentifier` (404 4040020 when none is configured).
    public func defaultRetentionMessage(productId: String, locale: String,
                                        environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) -> String {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "messaging", "default", productId, locale])
        return try await perform(call, routing: Self.configRouting(environment)) { body, _ throws(ResponseShapeError) in
            try body.string("messageIdentifier")
        }
    }

    // MARK: Retention Messaging: realtime URL

    /// Configure Realtime URL: where the App Store sends Get Retention Message requests (≤ 256 characters).
    public func configureRealtimeURL(_ url: String, environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        guard url.count <= 256 else {
            throw AppStoreServerAPIError(kind: .invalidRequest, request: "PUT /inApps/v1/messaging/realtime/url", detail: "realtimeURL is longer than 256 characters")
        }
        let call = try APICall(method: "PUT", path: ["inApps", "v1", "messaging", "realtime", "url"], body: ["realtimeURL": .string(url)])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    public func deleteRealtimeURL(environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) {
        let call = try APICall(method: "DELETE", path: ["inApps", "v1", "messaging", "realtime", "url"])
        _ = try await send(call, routing: Self.configRouting(environment))
    }

    /// Get Realtime URL (404 4040021 when none is configured).
    public func realtimeURL(environment: AppStoreEnvironment? = nil) async throws(AppStoreServerAPIError) -> String {
        let call = try APICall(method: "GET", path: ["inApps", "v1", "messaging", "realtime", "url"])
        return try await perform(call, routing: Self.configRouting(environment)) { body, _ throws(ResponseShapeError) in
            try body.string("realtimeURL")
        }
    }

    /// App-level configuration goes to the environment named, else the configured host; never falls back.
    static func configRouting(_ environment: AppStoreEnvironment?) -> Routing {
        environment.map(Routing.environment) ?? .primary
    }
}
