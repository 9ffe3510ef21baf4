/// Real-time developer notifications: the `DeveloperNotification` Google publishes to Pub/Sub, and the Pub/Sub
/// push envelope it arrives in. Typed fields beside the raw JSON; an unknown notification kind decodes as `.other`.
public struct DeveloperNotification: Sendable, Hashable {
    public var raw: JSONValue
    /// "1.0".
    public var version: String?
    public var packageName: String
    /// `eventTimeMillis`: documented as a long, sent as a JSON string; both are accepted.
    public var eventTimeMs: Int64
    public var kind: Kind

    public enum Kind: Sendable, Hashable {
        case subscription(notificationType: SubscriptionNotificationType, purchaseToken: String)
        case oneTimeProduct(notificationType: OneTimeProductNotificationType, purchaseToken: String, sku: String?)
        /// `productType` 1 subscription / 2 one-time; `refundType` 1 full / 2 quantity-based partial.
        case voidedPurchase(purchaseToken: String, orderId: String?, productType: Int?, refundType: Int?)
        case test
        /// A kind this code does not know yet (`pendingRefundReviewNotification`, …): kept in `raw`.
        case other
    }

    /// The purchase token the notification is about, if any.
    public var purchaseToken: String? {
        switch kind {
        case .subscription(_, let token), .oneTimeProduct(_, let token, _), .voidedPurchase(let token, _, _, _): token
        case .test, .other: nil
        }
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(notification)") }
        raw = json
        version = json["version"]?.stringValue
        packageName = try json.requiredString("packageName")
        guard let time = json["eventTimeMillis"]?.googleInt64 else { throw PayloadDecodingError(field: "eventTimeMillis") }
        eventTimeMs = time
        if let s = json["subscriptionNotification"] {
            guard let type = s["notificationType"]?.intValue else { throw PayloadDecodingError(field: "subscriptionNotification.notificationType") }
            kind = .subscription(notificationType: SubscriptionNotificationType(rawValue: type),
                                 purchaseToken: try s.requiredString("purchaseToken"))
        } else if let o = json["oneTimeProductNotification"] {
            guard let type = o["notificationType"]?.intValue else { throw PayloadDecodingError(field: "oneTimeProductNotification.notificationType") }
            kind = .oneTimeProduct(notificationType: OneTimeProductNotificationType(rawValue: type),
                                   purchaseToken: try o.requiredString("purchaseToken"), sku: o["sku"]?.stringValue)
        } else if let v = json["voidedPurchaseNotification"] {
            kind = .voidedPurchase(purchaseToken: try v.requiredString("purchaseToken"), orderId: v["orderId"]?.stringValue,
                                   productType: v["productType"]?.intValue, refundType: v["refundType"]?.intValue)
        } else if json["testNotification"] != nil {
            kind = .test
        } else {
            kind = .other
        }
    }
}

/// A Pub/Sub push request in the wrapped form: `{"message": {"attributes", "data", "messageId", "message_id",
/// "publishTime", "publish_time"}, "subscription"}` (Pub/Sub sends both spellings; either is read).
public struct PubSubPushMessage: Sendable, Hashable {
    public var messageId: String
    /// `data`, base64-decoded.
    public var data: [UInt8]
    public var publishTimeMs: Int64?
    public var attributes: [String: String]
    public var subscription: String?

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard let message = json["message"], case .object = message else { throw PayloadDecodingError(field: "message") }
        guard let id = (message["messageId"] ?? message["message_id"])?.stringValue, !id.isEmpty else {
            throw PayloadDecodingError(field: "message.messageId")
        }
        messageId = id
        guard let encoded = message["data"]?.stringValue, let bytes = Base64.decode(encoded) else {
            throw PayloadDecodingError(field: "message.data")
        }
        data = bytes
        publishTimeMs = (message["publishTime"] ?? message["publish_time"])?.rfc3339Ms
        var attributes: [String: String] = [:]
        for (key, value) in message["attributes"]?.objectValue ?? [:] { attributes[key] = value.stringValue }
        self.attributes = attributes
        subscription = json["subscription"]?.stringValue
    }

    /// The `DeveloperNotification` in `data` (JSON nesting bounded as the parser's default).
    public func developerNotification() throws(PayloadDecodingError) -> DeveloperNotification {
        guard let json = try? JSONParser.parse(data) else { throw PayloadDecodingError(field: "message.data") }
        return try DeveloperNotification(json: json)
    }

    /// The wrapped body Pub/Sub posts for `data` (publish time in RFC 3339 with milliseconds), both spellings.
    public static func envelope(data: [UInt8], messageId: String, publishTimeMs: Int64, subscription: String) -> JSONValue {
        let time = JSONValue.string(Timestamp.rfc3339(publishTimeMs))
        return ["message": ["attributes": .object([:]), "data": .string(Base64.encode(data)), "messageId": .string(messageId),
                            "message_id": .string(messageId), "publishTime": time, "publish_time": time],
                "subscription": .string(subscription)]
    }
}

/// Google's error body: `{"error": {"code", "message", "status", "errors": [{"reason", "message", "domain"}]}}`.
public struct GoogleAPIErrorBody: Sendable, Hashable {
    public var code: Int?
    public var message: String?
    /// `NOT_FOUND`, `PERMISSION_DENIED`, …
    public var status: String?
    /// The first `errors[].reason`: `purchaseTokenNoLongerValid`, `productNotOwnedByUser`, …
    public var reason: String?

    public init?(json: JSONValue) {
        guard let error = json["error"], case .object = error else { return nil }
        code = error["code"]?.intValue
        message = error["message"]?.stringValue
        status = error["status"]?.stringValue
        reason = error["errors"]?.arrayValue?.first?["reason"]?.stringValue
    }

    /// The body Google answers with (the Play simulator's errors).
    public static func json(code: Int, status: String, reason: String, message: String, domain: String = "androidpublisher") -> JSONValue {
        ["error": ["code": .int(Int64(code)), "message": .string(message), "status": .string(status),
                   "errors": [["reason": .string(reason), "message": .string(message), "domain": .string(domain)]]]]
    }
}
