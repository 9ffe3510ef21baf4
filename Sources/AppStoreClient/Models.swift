import KakinCore

// Wire models of the App Store Server API (reference §6), named as Apple names them. Signed data stays the
// raw JWS string: the caller verifies it with `SignedDataVerifier` and stores it as received. Apple's
// enumerated values are open structs over the raw value, so a value Apple adds tomorrow still decodes.

// MARK: - Transaction lookups

/// Get Transaction Info: `GET /inApps/v1/transactions/{transactionId}`.
public struct TransactionInfoResponse: Sendable, Equatable {
    /// `JWSTransaction`.
    public var signedTransactionInfo: String
    /// The environment whose host answered (production, or sandbox after a fallback).
    public var answeringEnvironment: AppStoreEnvironment
}

/// Filters of Get Transaction History v2. Repeated values of one filter are OR-ed, different filters AND-ed.
/// Paging resends the identical filters with each `revision`.
public struct TransactionHistoryRequest: Sendable, Equatable {
    public enum ProductType: String, Sendable, CaseIterable {
        case autoRenewable = "AUTO_RENEWABLE", nonRenewable = "NON_RENEWABLE"
        case consumable = "CONSUMABLE", nonConsumable = "NON_CONSUMABLE"
    }

    /// By last-modified date (upgrades and revocations bump it, so a transaction can reappear while paging).
    public enum Order: String, Sendable {
        case ascending = "ASCENDING", descending = "DESCENDING"
    }

    /// Included when `startDateMs ≤ purchaseDate < endDateMs` (UNIX ms).
    public var startDateMs: Int64?
    public var endDateMs: Int64?
    public var productIds: [String]
    public var productTypes: [ProductType]
    public var subscriptionGroupIdentifiers: [String]
    public var inAppOwnershipType: InAppOwnershipType?
    /// `true` only revoked transactions, `false` only those not revoked, nil both.
    public var revoked: Bool?
    /// Apple's default is ascending.
    public var sort: Order?

    public init(
        startDateMs: Int64? = nil, endDateMs: Int64? = nil, productIds: [String] = [], productTypes: [ProductType] = [],
        subscriptionGroupIdentifiers: [String] = [], inAppOwnershipType: InAppOwnershipType? = nil, revoked: Bool? = nil,
        sort: Order? = nil
    ) {
        self.startDateMs = startDateMs
        self.endDateMs = endDateMs
        self.productIds = productIds
        self.productTypes = productTypes
        self.subscriptionGroupIdentifiers = subscriptionGroupIdentifiers
        self.inAppOwnershipType = inAppOwnershipType
        self.revoked = revoked
        self.sort = sort
    }

    var queryItems: [(String, String)] {
        var items: [(String, String)] = []
        if let startDateMs { items.append(("startDate", String(startDateMs))) }
        if let endDateMs { items.append(("endDate", String(endDateMs))) }
        items += productIds.map { ("productId", $0) }
        items += productTypes.map { ("productType", $0.rawValue) }
        items += subscriptionGroupIdentifiers.map { ("subscriptionGroupIdentifier", $0) }
        if let inAppOwnershipType { items.append(("inAppOwnershipType", inAppOwnershipType.rawValue)) }
        if let revoked { items.append(("revoked", revoked ? "true" : "false")) }
        if let sort { items.append(("sort", sort.rawValue)) }
        return items
    }
}

/// One page of Get Transaction History v2: `GET /inApps/v2/history/{transactionId}` (≤ 20 per page).
public struct HistoryResponse: Sendable, Equatable {
    /// Send it back, with the same filters, for the next page.
    public var revision: String?
    public var hasMore: Bool
    public var bundleId: String?
    public var appAppleId: Int64?
    /// As Apple's body says it (an unknown value is kept).
    public var environment: AppStoreEnvironment?
    /// `JWSTransaction`s.
    public var signedTransactions: [String]
    /// The environment whose host answered; later pages must go to the same one.
    public var answeringEnvironment: AppStoreEnvironment
}

/// A whole history, or as much of it as `pagesMax` pages hold (then `hasMore` is true and `revision`
/// continues it).
public struct TransactionHistory: Sendable, Equatable {
    /// Every page's `signedTransactions` in order. A transaction modified while paging can appear twice
    /// (sorted by last-modified date); keep the latest `signedDate` per `transactionId`.
    public var signedTransactions: [String]
    public var answeringEnvironment: AppStoreEnvironment
    public var bundleId: String?
    public var appAppleId: Int64?
    public var revision: String?
    public var hasMore: Bool
    public var pageCount: Int
}

/// Apple's subscription status values (reference §6.5).
public struct SubscriptionStatusCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let active = Self(rawValue: 1)
    public static let expired = Self(rawValue: 2)
    public static let billingRetry = Self(rawValue: 3)
    public static let billingGracePeriod = Self(rawValue: 4)
    public static let revoked = Self(rawValue: 5)
    public var description: String { String(rawValue) }
}

/// Get All Subscription Statuses: `GET /inApps/v1/subscriptions/{transactionId}`.
public struct StatusResponse: Sendable, Equatable {
    public var environment: AppStoreEnvironment?
    public var bundleId: String?
    public var appAppleId: Int64?
    public var data: [SubscriptionGroupIdentifierItem]
    public var answeringEnvironment: AppStoreEnvironment
}

public struct SubscriptionGroupIdentifierItem: Sendable, Equatable {
    public var subscriptionGroupIdentifier: String
    /// One per subscription instance, with its latest transaction.
    public var lastTransactions: [LastTransactionsItem]
}

public struct LastTransactionsItem: Sendable, Equatable {
    public var status: SubscriptionStatusCode
    public var originalTransactionId: String
    /// `JWSTransaction`.
    public var signedTransactionInfo: String
    /// `JWSRenewalInfo`.
    public var signedRenewalInfo: String
}

/// `0` valid, `1` invalid (reference §6.6).
public struct OrderLookupStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let valid = Self(rawValue: 0)
    public static let invalid = Self(rawValue: 1)
    public var description: String { String(rawValue) }
}

/// Look Up Order ID: `GET /inApps/v1/lookup/{orderId}` (production only at Apple).
public struct OrderLookupResponse: Sendable, Equatable {
    public var status: OrderLookupStatus
    public var signedTransactions: [String]
}

/// One page of Get Refund History v2: `GET /inApps/v2/refund/lookup/{transactionId}`.
public struct RefundHistoryResponse: Sendable, Equatable {
    public var signedTransactions: [String]
    public var revision: String?
    public var hasMore: Bool
}

// MARK: - Notifications

/// The body of Get Notification History. Paging resends it unchanged with each `paginationToken`.
public struct NotificationHistoryRequest: Sendable, Equatable {
    /// Required, UNIX ms; at most 180 days back in production, 30 in sandbox.
    public var startDateMs: Int64
    public var endDateMs: Int64
    public var notificationType: NotificationType?
    /// Only with `notificationType`.
    public var notificationSubtype: NotificationSubtype?
    /// One customer's notifications; not together with `notificationType`.
    public var transactionId: String?
    /// Only notifications not delivered yet (including those still being retried).
    public var onlyFailures: Bool?

    public init(
        startDateMs: Int64, endDateMs: Int64, notificationType: NotificationType? = nil,
        notificationSubtype: NotificationSubtype? = nil, transactionId: String? = nil, onlyFailures: Bool? = nil
    ) {
        self.startDateMs = startDateMs
        self.endDateMs = endDateMs
        self.notificationType = notificationType
        self.notificationSubtype = notificationSubtype
        self.transactionId = transactionId
        self.onlyFailures = onlyFailures
    }

    var json: JSONValue {
        var body: [String: JSONValue] = ["startDate": .int(startDateMs), "endDate": .int(endDateMs)]
        if let notificationType { body["notificationType"] = .string(notificationType.rawValue) }
        if let notificationSubtype { body["notificationSubtype"] = .string(notificationSubtype.rawValue) }
        if let transactionId { body["transactionId"] = .string(transactionId) }
        if let onlyFailures { body["onlyFailures"] = .bool(onlyFailures) }
        return .object(body)
    }
}

/// `sendAttemptResult` values (reference §6.11).
public struct NotificationSendAttemptResult: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let success = Self(rawValue: "SUCCESS")
    public static let timedOut = Self(rawValue: "TIMED_OUT")
    public static let tlsIssue = Self(rawValue: "TLS_ISSUE")
    public static let circularRedirect = Self(rawValue: "CIRCULAR_REDIRECT")
    public static let noResponse = Self(rawValue: "NO_RESPONSE")
    public static let socketIssue = Self(rawValue: "SOCKET_ISSUE")
    public static let unsupportedCharset = Self(rawValue: "UNSUPPORTED_CHARSET")
    public static let invalidResponse = Self(rawValue: "INVALID_RESPONSE")
    public static let prematureClose = Self(rawValue: "PREMATURE_CLOSE")
    public static let unsuccessfulHTTPResponseCode = Self(rawValue: "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
    public static let other = Self(rawValue: "OTHER")
}

public struct SendAttemptItem: Sendable, Equatable {
    public var attemptDateMs: Int64
    public var sendAttemptResult: NotificationSendAttemptResult
}

public struct NotificationHistoryResponseItem: Sendable, Equatable {
    /// The notification's `signedPayload`, as Apple sent (or tried to send) it.
    public var signedPayload: String
    /// At most 6.
    public var sendAttempts: [SendAttemptItem]
}

/// One page of Get Notification History: `POST /inApps/v1/notifications/history`.
public struct NotificationHistoryResponse: Sendable, Equatable {
    public var paginationToken: String?
    public var hasMore: Bool
    public var notificationHistory: [NotificationHistoryResponseItem]
}

/// All pages, or as many as `pagesMax` (then `hasMore` is true and `paginationToken` continues it).
public struct NotificationHistory: Sendable, Equatable {
    public var notificationHistory: [NotificationHistoryResponseItem]
    public var paginationToken: String?
    public var hasMore: Bool
    public var pageCount: Int
}

/// Get Test Notification Status: `GET /inApps/v1/notifications/test/{testNotificationToken}`.
public struct CheckTestNotificationResponse: Sendable, Equatable {
    public var signedPayload: String
    public var sendAttempts: [SendAttemptItem]
}

// MARK: - Decoding

/// A body that is JSON but not the documented shape. The reason names the field, never its value.
struct ResponseShapeError: Error {
    var reason: String
}

/// Typed reads of one JSON object: a missing or null optional field is nil, a field of the wrong type fails
/// (Apple's libraries reject `"appAppleId": "blue"` too).
struct ResponseObject {
    let fields: [String: JSONValue]
    let path: String

    init(_ value: JSONValue, path: String = "body") throws(ResponseShapeError) {
        guard case .object(let fields) = value else { throw ResponseShapeError(reason: "\(path) is not an object") }
        self.fields = fields
        self.path = path
    }

    private func present(_ key: String) -> JSONValue? {
        guard let value = fields[key], !value.isNull else { return nil }
        return value
    }

    private func wrongType(_ key: String, _ expected: String) -> ResponseShapeError {
        ResponseShapeError(reason: "\(path).\(key) is not \(expected)")
    }

    func optionalString(_ key: String) throws(ResponseShapeError) -> String? {
        guard let value = present(key) else { return nil }
        guard let string = value.stringValue else { throw wrongType(key, "a string") }
        return string
    }

    func string(_ key: String) throws(ResponseShapeError) -> String {
        guard let string = try optionalString(key) else { throw ResponseShapeError(reason: "\(path).\(key) is missing") }
        return string
    }

    func optionalInt(_ key: String) throws(ResponseShapeError) -> Int64? {
        guard let value = present(key) else { return nil }
        guard let int = value.int64Value else { throw wrongType(key, "an integer") }
        return int
    }

    func int(_ key: String) throws(ResponseShapeError) -> Int64 {
        guard let int = try optionalInt(key) else { throw ResponseShapeError(reason: "\(path).\(key) is missing") }
        return int
    }

    /// Missing means false (Apple omits nothing here, but a last page without `hasMore` must end paging).
    func bool(_ key: String) throws(ResponseShapeError) -> Bool {
        guard let value = present(key) else { return false }
        guard case .bool(let bool) = value else { throw wrongType(key, "a boolean") }
        return bool
    }

    /// Missing means empty.
    func strings(_ key: String) throws(ResponseShapeError) -> [String] {
        guard let value = present(key) else { return [] }
        guard case .array(let array) = value else { throw wrongType(key, "an array") }
        var strings: [String] = []
        strings.reserveCapacity(array.count)
        for element in array {
            guard let string = element.stringValue else { throw wrongType(key, "an array of strings") }
            strings.append(string)
        }
        return strings
    }

    /// Missing means empty.
    func objects(_ key: String) throws(ResponseShapeError) -> [ResponseObject] {
        guard let value = present(key) else { return [] }
        guard case .array(let array) = value else { throw wrongType(key, "an array") }
        var objects: [ResponseObject] = []
        objects.reserveCapacity(array.count)
        for (index, element) in array.enumerated() {
            objects.append(try ResponseObject(element, path: "\(path).\(key)[\(index)]"))
        }
        return objects
    }

    func environment(_ key: String) throws(ResponseShapeError) -> AppStoreEnvironment? {
        try optionalString(key).map(AppStoreEnvironment.init(rawValue:))
    }
}

extension TransactionInfoResponse {
    init(_ body: ResponseObject, answeringEnvironment: AppStoreEnvironment) throws(ResponseShapeError) {
        signedTransactionInfo = try body.string("signedTransactionInfo")
        self.answeringEnvironment = answeringEnvironment
    }
}

extension HistoryResponse {
    init(_ body: ResponseObject, answeringEnvironment: AppStoreEnvironment) throws(ResponseShapeError) {
        revision = try body.optionalString("revision")
        hasMore = try body.bool("hasMore")
        bundleId = try body.optionalString("bundleId")
        appAppleId = try body.optionalInt("appAppleId")
        environment = try body.environment("environment")
        signedTransactions = try body.strings("signedTransactions")
        self.answeringEnvironment = answeringEnvironment
    }
}

extension StatusResponse {
    init(_ body: ResponseObject, answeringEnvironment: AppStoreEnvironment) throws(ResponseShapeError) {
        environment = try body.environment("environment")
        bundleId = try body.optionalString("bundleId")
        appAppleId = try body.optionalInt("appAppleId")
        var groups: [SubscriptionGroupIdentifierItem] = []
        for group in try body.objects("data") {
            var last: [LastTransactionsItem] = []
            for item in try group.objects("lastTransactions") {
                last.append(LastTransactionsItem(
                    status: SubscriptionStatusCode(rawValue: Int(try item.int("status"))),
                    originalTransactionId: try item.string("originalTransactionId"),
                    signedTransactionInfo: try item.string("signedTransactionInfo"),
                    signedRenewalInfo: try item.string("signedRenewalInfo")))
            }
            groups.append(SubscriptionGroupIdentifierItem(
                subscriptionGroupIdentifier: try group.string("subscriptionGroupIdentifier"), lastTransactions: last))
        }
        data = groups
        self.answeringEnvironment = answeringEnvironment
    }
}

extension OrderLookupResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        status = OrderLookupStatus(rawValue: Int(try body.int("status")))
        signedTransactions = try body.strings("signedTransactions")
    }
}

extension RefundHistoryResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        signedTransactions = try body.strings("signedTransactions")
        revision = try body.optionalString("revision")
        hasMore = try body.bool("hasMore")
    }
}

extension SendAttemptItem {
    static func list(_ body: ResponseObject) throws(ResponseShapeError) -> [SendAttemptItem] {
        var attempts: [SendAttemptItem] = []
        for attempt in try body.objects("sendAttempts") {
            attempts.append(SendAttemptItem(
                attemptDateMs: try attempt.int("attemptDate"),
                sendAttemptResult: NotificationSendAttemptResult(rawValue: try attempt.string("sendAttemptResult"))))
        }
        return attempts
    }
}

extension NotificationHistoryResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        paginationToken = try body.optionalString("paginationToken")
        hasMore = try body.bool("hasMore")
        var items: [NotificationHistoryResponseItem] = []
        for item in try body.objects("notificationHistory") {
            items.append(NotificationHistoryResponseItem(
                signedPayload: try item.string("signedPayload"), sendAttempts: try SendAttemptItem.list(item)))
        }
        notificationHistory = items
    }
}

extension CheckTestNotificationResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        signedPayload = try body.string("signedPayload")
        sendAttempts = try SendAttemptItem.list(body)
    }
}
