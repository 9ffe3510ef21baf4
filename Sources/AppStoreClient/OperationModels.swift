import KakinCore

// Requests and responses of the App Store Server API's operations (reference §6.7–6.9): consumption
// information, renewal-date extensions, app account tokens, app transactions. Named as Apple names them.

/// `extendReasonCode` (§6.8): why a renewal date is extended.
public struct ExtendReasonCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let undeclared = Self(rawValue: 0)
    public static let customerSatisfaction = Self(rawValue: 1)
    public static let other = Self(rawValue: 2)
    public static let serviceIssueOrOutage = Self(rawValue: 3)
    public static let known: [Self] = [.undeclared, .customerSatisfaction, .other, .serviceIssueOrOutage]
    public var description: String { String(rawValue) }
}

/// Extend a Subscription Renewal Date: `PUT /inApps/v1/subscriptions/extend/{originalTransactionId}`.
public struct ExtendRenewalDateRequest: Sendable, Equatable {
    /// 1–90.
    public var extendByDays: Int
    public var extendReasonCode: ExtendReasonCode
    /// Unique per request (≤ 128 characters); Apple answers a repeat with the first answer.
    public var requestIdentifier: String

    public init(extendByDays: Int, extendReasonCode: ExtendReasonCode, requestIdentifier: String) {
        self.extendByDays = extendByDays
        self.extendReasonCode = extendReasonCode
        self.requestIdentifier = requestIdentifier
    }

    var json: JSONValue {
        ["extendByDays": .int(Int64(extendByDays)), "extendReasonCode": .int(Int64(extendReasonCode.rawValue)),
         "requestIdentifier": .string(requestIdentifier)]
    }
}

public struct ExtendRenewalDateResponse: Sendable, Equatable {
    public var originalTransactionId: String?
    /// The billing period that was extended.
    public var webOrderLineItemId: String?
    public var success: Bool
    /// The new expiry (UNIX ms).
    public var effectiveDateMs: Int64?
}

/// Extend Subscription Renewal Dates for All Active Subscribers: `POST /inApps/v1/subscriptions/extend/mass`.
public struct MassExtendRenewalDateRequest: Sendable, Equatable {
    public var extendByDays: Int
    public var extendReasonCode: ExtendReasonCode
    public var requestIdentifier: String
    public var productId: String
    /// ISO 3166-1 alpha-3 codes; nil for every storefront.
    public var storefrontCountryCodes: [String]?

    public init(extendByDays: Int, extendReasonCode: ExtendReasonCode, requestIdentifier: String, productId: String,
                storefrontCountryCodes: [String]? = nil) {
        self.extendByDays = extendByDays
        self.extendReasonCode = extendReasonCode
        self.requestIdentifier = requestIdentifier
        self.productId = productId
        self.storefrontCountryCodes = storefrontCountryCodes
    }

    var json: JSONValue {
        var o: [String: JSONValue] = [
            "extendByDays": .int(Int64(extendByDays)), "extendReasonCode": .int(Int64(extendReasonCode.rawValue)),
            "requestIdentifier": .string(requestIdentifier), "productId": .string(productId),
        ]
        if let storefrontCountryCodes { o["storefrontCountryCodes"] = .array(storefrontCountryCodes.map(JSONValue.string)) }
        return .object(o)
    }
}

/// Get Status of Subscription Renewal Date Extensions:
/// `GET /inApps/v1/subscriptions/extend/mass/{productId}/{requestIdentifier}`.
public struct MassExtendRenewalDateStatusResponse: Sendable, Equatable {
    public var requestIdentifier: String?
    public var complete: Bool
    public var completeDateMs: Int64?
    public var succeededCount: Int64?
    public var failedCount: Int64?
}

/// Get App Transaction Info: `GET /inApps/v1/transactions/appTransactions/{transactionId}`.
public struct AppTransactionInfoResponse: Sendable, Equatable {
    /// `JWSAppTransaction`.
    public var signedAppTransactionInfo: String
    public var answeringEnvironment: AppStoreEnvironment
}

extension ExtendRenewalDateResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        originalTransactionId = try body.optionalString("originalTransactionId")
        webOrderLineItemId = try body.optionalString("webOrderLineItemId")
        success = try body.bool("success")
        effectiveDateMs = try body.optionalInt("effectiveDate")
    }
}

extension MassExtendRenewalDateStatusResponse {
    init(_ body: ResponseObject) throws(ResponseShapeError) {
        requestIdentifier = try body.optionalString("requestIdentifier")
        complete = try body.bool("complete")
        completeDateMs = try body.optionalInt("completeDate")
        succeededCount = try body.optionalInt("succeededCount")
        failedCount = try body.optionalInt("failedCount")
    }
}
