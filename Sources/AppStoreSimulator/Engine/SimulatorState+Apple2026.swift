import KakinCore

// Apple's 2026 additions in the engine: Finish Transaction (App Store Server API 1.20), RESCIND_CONSENT, and
// the Retention Messaging API's configuration and Get Retention Message bookkeeping. The HTTP call to the
// app's realtime URL happens in the runtime (`API/RetentionMessagingAPI.swift`), never under the lock.

/// What the Retention Messaging API keeps per app: uploaded messages and images (approved at once here:
/// no review), default messages per product and locale, the realtime URL, and every Get Retention Message
/// call the simulator made with what it answered.
struct RetentionMessagingStore: Codable, Sendable, Equatable {
    struct Message: Codable, Sendable, Equatable {
        var header: String
        var body: String
        var imageIdentifier: String?
        var state: String
    }
    struct Image: Codable, Sendable, Equatable {
        var size: String
        var state: String
        var bytes: Int
    }
    /// One Get Retention Message call and its outcome.
    struct Call: Codable, Sendable, Equatable {
        var requestIdentifier: String
        var originalTransactionId: String
        var productId: String
        var dateMs: Int64
        /// `message`, `alternateProduct`, `promotionalOffer`, or why nothing was applied (`timeout`, `error: …`, `none`).
        var outcome: String
        var messageIdentifier: String?
        var alternateProductId: String?
        var offerIdentifier: String?
        /// The cancellation went on (a message, a switch-plan suggestion, no answer) or not (an offer redeemed).
        var cancelled: Bool
    }

    var realtimeURL: String?
    var messages: [String: Message] = [:]
    var images: [String: Image] = [:]
    /// "productId/locale" → messageIdentifier.
    var defaults: [String: String] = [:]
    var calls: [Call] = []

}

extension SimulatorState {
    // MARK: Finish Transaction

    /// `POST /inApps/v1/transactions/{transactionId}/finish`: the transaction leaves the customer's
    /// unfinished queue (what StoreKit's `Transaction.unfinished` shows, and a legacy receipt's consumables).
    /// Finishing again changes nothing; 4000006 for a malformed id, 4040010 for an unknown one.
    mutating func finishTransaction(_ transactionId: String) throws(AppStoreAPIError) {
        let tx = try customer(of: transactionId)
        guard tx.finishedDate == nil else { return }
        let seq = (store.finishCounter ?? 0) + 1
        store.finishCounter = seq
        store.transactions[transactionId]!.finishedDate = nowMs
        store.transactions[transactionId]!.finishSeq = seq
    }

    /// The account's transactions finished through the Server API after `after` (a finish sequence), oldest first.
    func finishedTransactions(account: String, after: Int64, limit: Int) -> (items: [SimTransaction], hasMore: Bool, headSeq: Int64) {
        let all = (store.transactionsByAccount[account] ?? []).compactMap { store.transactions[$0] }.filter { $0.finishSeq != nil }
        let newer = all.filter { $0.finishSeq! > after }.sorted { $0.finishSeq! < $1.finishSeq! }
        return (Array(newer.prefix(limit)), newer.count > limit, all.compactMap(\.finishSeq).max() ?? 0)
    }

    // MARK: RESCIND_CONSENT

    /// A parent or guardian withdrew consent for the account's (a minor's) use of the app: `RESCIND_CONSENT`
    /// with an `appData` payload carrying the account's signed app transaction, as Apple sends it.
    mutating func rescindConsent(account: String) -> ActionOutcome {
        let seq = store.notificationSeq
        let appTransactionId = appTransactionId(for: account)
        let signed = (try? appTransactionInfo(appTransactionId))?["signedAppTransactionInfo"] ?? .null
        let appData: JSONValue = ["appAppleId": .int(config.appAppleId), "bundleId": .string(config.bundleId),
                                  "environment": .string(config.environment.rawValue), "signedAppTransactionInfo": signed]
        enqueue(.rescindConsent, nil, body: ("appData", appData), account: account, transactionId: nil, originalTransactionId: nil)
        var outcome = ActionOutcome(kind: .consentRescinded, effectiveDateMs: nowMs)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    // MARK: Retention Messaging

    var retention: RetentionMessagingStore { store.retention ?? RetentionMessagingStore() }

    mutating func updateRetention(_ body: (inout RetentionMessagingStore) throws(AppStoreAPIError) -> Void) throws(AppStoreAPIError) {
        var r = retention
        try body(&r)
        store.retention = r
    }

    /// `DecodedRealtimeRequestBody` for a customer opening the cancel flow of `otid`.
    func realtimeRequestPayload(_ sub: SimSubscription, userLocale: String, requestIdentifier: String) -> JSONValue {
        ["originalTransactionId": .string(sub.originalTransactionId), "appAppleId": .int(config.appAppleId),
         "productId": .string(sub.productId), "userLocale": .string(userLocale), "requestIdentifier": .string(requestIdentifier),
         "signedDate": .int(nowMs), "environment": .string(config.environment.rawValue)]
    }

    mutating func recordRetentionCall(_ call: RetentionMessagingStore.Call) {
        var r = retention
        r.calls.append(call)
        if r.calls.count > RetentionMessagingStore.callsMax { r.calls.removeFirst(r.calls.count - RetentionMessagingStore.callsMax) }
        store.retention = r
    }
}

/// Apple's Retention Messaging API error codes (its library's `APIError`).
extension AppStoreAPIError {
    static let invalidImage = Self(400, 4_000_161, "Invalid image.")
    static let headerTooLong = Self(400, 4_000_162, "Header too long.")
    static let bodyTooLong = Self(400, 4_000_163, "Body too long.")
    static let invalidLocale = Self(400, 4_000_164, "Invalid locale.")
    static let altTextTooLong = Self(400, 4_000_175, "Alt text too long.")
    static let badRequestRealtimeURL = Self(400, 4_000_215, "Invalid realtime URL.")
    static let badRequestImageSize = Self(400, 4_000_216, "Invalid image size.")
    static let tooManyBulletPoints = Self(400, 4_000_218, "Too many bullet points.")
    static let bulletPointTextTooLong = Self(400, 4_000_219, "Bullet point text too long.")
    static let aboveImageRequiresAnImage = Self(400, 4_000_224, "ABOVE_IMAGE header position requires an image.")
    static let maximumNumberOfImagesReached = Self(403, 4_030_014, "Maximum number of images reached.")
    static let maximumNumberOfMessagesReached = Self(403, 4_030_016, "Maximum number of messages reached.")
    static let imageInUse = Self(403, 4_030_019, "Image in use.")
    static let imageNotFound = Self(404, 4_040_014, "Image not found.")
    static let messageNotFound = Self(404, 4_040_015, "Message not found.")
    static let defaultMessageNotFound = Self(404, 4_040_020, "Default message not found.")
    static let realtimeURLNotFound = Self(404, 4_040_021, "Realtime URL not found.")
    static let imageAlreadyExists = Self(409, 4_090_000, "Image already exists.")
    static let messageAlreadyExists = Self(409, 4_090_001, "Message already exists.")
}

/// The Retention Messaging API's configuration endpoints, computed from the state (the HTTP layer parses).
extension SimulatorState {
    /// BCP 47 as Apple writes it (`en-US`, `ja-JP`, `zh-Hans-CN`): letters and digits in parts joined by `-`.
    static func isLocale(_ s: String) -> Bool {
        let parts = s.split(separator: "-", omittingEmptySubsequences: false)
        return (1...4).contains(parts.count) && parts.allSatisfy { (2...8).contains($0.count) && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) } }
            && !s.contains("_")
    }

    mutating func uploadImage(_ id: String, bytes: [UInt8], size: String?) throws(AppStoreAPIError) {
        guard UUIDText.isValid(id) else { throw .generalBadRequest }
        // A PNG: its eight-byte signature.
        guard bytes.count > 8, bytes.count <= 5 << 20, bytes.prefix(8).elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
            throw .invalidImage
        }
        let size = size ?? "FULL_SIZE"
        guard size == "FULL_SIZE" || size == "BULLET_POINT" else { throw .badRequestImageSize }
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.images[id.lowercased()] == nil else { throw .imageAlreadyExists }
            guard r.images.count < RetentionMessagingStore.imagesMax else { throw .maximumNumberOfImagesReached }
            r.images[id.lowercased()] = .init(size: size, state: "APPROVED", bytes: bytes.count)
        }
    }

    mutating func deleteImage(_ id: String) throws(AppStoreAPIError) {
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.images[id.lowercased()] != nil else { throw .imageNotFound }
            guard !r.messages.values.contains(where: { $0.imageIdentifier == id.lowercased() }) else { throw .imageInUse }
            r.images[id.lowercased()] = nil
        }
    }

    func imageList() -> JSONValue {
        ["imageIdentifiers": .array(retention.images.keys.sorted().map { id in
            ["imageIdentifier": .string(id), "imageState": .string(retention.images[id]!.state), "imageSize": .string(retention.images[id]!.size)]
        })]
    }

    /// `UploadMessageRequestBody`: header ≤ 66, body ≤ 144, optional image (alt text ≤ 150), ≤ 5 bullet points
    /// (text ≤ 66), `headerPosition` `ABOVE_BODY` (default) or `ABOVE_IMAGE` (needs an image).
    mutating func uploadMessage(_ id: String, body json: JSONValue) throws(AppStoreAPIError) {
        guard UUIDText.isValid(id), case .object = json, let header = json["header"]?.stringValue, let text = json["body"]?.stringValue else {
            throw .generalBadRequest
        }
        guard header.count <= 66 else { throw .headerTooLong }
        guard text.count <= 144 else { throw .bodyTooLong }
        var imageId: String?
        if let image = json["image"], !image.isNull {
            guard let i = image["imageIdentifier"]?.stringValue, let alt = image["altText"]?.stringValue else { throw .generalBadRequest }
            guard alt.count <= 150 else { throw .altTextTooLong }
            guard retention.images[i.lowercased()] != nil else { throw .imageNotFound }
            imageId = i.lowercased()
        }
        if let bullets = json["bulletPoints"]?.arrayValue {
            guard bullets.count <= 5 else { throw .tooManyBulletPoints }
            for b in bullets {
                guard let t = b["text"]?.stringValue else { throw .generalBadRequest }
                guard t.count <= 66 else { throw .bulletPointTextTooLong }
                if let alt = b["altText"]?.stringValue, alt.count > 150 { throw .altTextTooLong }
            }
        }
        if json["headerPosition"]?.stringValue == "ABOVE_IMAGE", imageId == nil { throw .aboveImageRequiresAnImage }
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.messages[id.lowercased()] == nil else { throw .messageAlreadyExists }
            guard r.messages.count < RetentionMessagingStore.messagesMax else { throw .maximumNumberOfMessagesReached }
            r.messages[id.lowercased()] = .init(header: header, body: text, imageIdentifier: imageId, state: "APPROVED")
        }
    }

    mutating func deleteMessage(_ id: String) throws(AppStoreAPIError) {
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.messages[id.lowercased()] != nil else { throw .messageNotFound }
            r.messages[id.lowercased()] = nil
            r.defaults = r.defaults.filter { $0.value != id.lowercased() }
        }
    }

    func messageList() -> JSONValue {
        ["messageIdentifiers": .array(retention.messages.keys.sorted().map { id in
            ["messageIdentifier": .string(id), "messageState": .string(retention.messages[id]!.state)]
        })]
    }

    mutating func configureDefaultMessage(productId: String, locale: String, body json: JSONValue) throws(AppStoreAPIError) {
        guard Self.isLocale(locale) else { throw .invalidLocale }
        guard product(productId)?.kind == .autoRenewable else { throw .invalidProductId }
        guard let id = json["messageIdentifier"]?.stringValue, UUIDText.isValid(id) else { throw .generalBadRequest }
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.messages[id.lowercased()] != nil else { throw .messageNotFound }
            r.defaults[productId + "/" + locale] = id.lowercased()
        }
    }

    mutating func deleteDefaultMessage(productId: String, locale: String) throws(AppStoreAPIError) {
        try updateRetention { (r) throws(AppStoreAPIError) in
            guard r.defaults[productId + "/" + locale] != nil else { throw .defaultMessageNotFound }
            r.defaults[productId + "/" + locale] = nil
        }
    }

    func defaultMessage(productId: String, locale: String) throws(AppStoreAPIError) -> JSONValue {
        guard let id = retention.defaults[productId + "/" + locale] else { throw .defaultMessageNotFound }
        return ["messageIdentifier": .string(id)]
    }

    /// `RealtimeUrlRequest`: an `https` URL of at most 256 characters (plain `http` is accepted for
    /// loopback hosts, so a local Kakin can be called).
    mutating func configureRealtimeURL(_ url: String?) throws(AppStoreAPIError) {
        if let url { guard Self.isAcceptableRealtimeURL(url) else { throw .badRequestRealtimeURL } }
        try updateRetention { (r) throws(AppStoreAPIError) in r.realtimeURL = url }
    }

    static func isAcceptableRealtimeURL(_ url: String) -> Bool {
        guard url.count <= 256 else { return false }
        if url.hasPrefix("https://") { return url.count > "https://".count }
        for host in ["http://127.0.0.1", "http://localhost", "http://[::1]"] where url.hasPrefix(host) {
            let rest = url.dropFirst(host.count)
            if rest.isEmpty || rest.first == ":" || rest.first == "/" { return true }
        }
        return false
    }

    func realtimeURLAnswer() throws(AppStoreAPIError) -> JSONValue {
        guard let url = retention.realtimeURL else { throw .realtimeURLNotFound }
        return ["realtimeURL": .string(url)]
    }

    func retentionCallsJSON(limit: Int) -> JSONValue {
        .array(retention.calls.suffix(limit).map { c in
            var o: [String: JSONValue] = ["requestIdentifier": .string(c.requestIdentifier), "originalTransactionId": .string(c.originalTransactionId),
                                          "productId": .string(c.productId), "date": .string(Timestamp.rfc3339(c.dateMs)),
                                          "outcome": .string(c.outcome), "cancelled": .bool(c.cancelled)]
            if let m = c.messageIdentifier { o["messageIdentifier"] = .string(m) }
            if let a = c.alternateProductId { o["alternateProductId"] = .string(a) }
            if let f = c.offerIdentifier { o["offerIdentifier"] = .string(f) }
            return .object(o)
        })
    }
}
