/// Apple's 2026 additions to the signed payloads (App Store Server API 1.19–1.21, Retention Messaging API),
/// named as Apple's `app-store-server-library-python` 3.1 names them: `BillingPlanType`,
/// `TransactionCommitmentInfo`, `RenewalCommitmentInfo`, `AppData`, `DecodedRealtimeRequestBody`. Every
/// field is optional and read tolerantly (a missing or mistyped field is nil, never a failed payload), like
/// the rest of the payload types: these are facts Kakin shows and reasons with, not what it needs to accept
/// signed data. Dates and prices are Apple's (ms since the epoch; milliunits).

/// `billingPlanType` (transactions) and `renewalBillingPlanType` (renewal info): how a yearly subscription
/// is paid. `MONTHLY` is the monthly billing with a 12-month commitment (API 1.21, StoreKit's
/// `.billingPlanType` purchase option).
public struct BillingPlanType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let billedUpfront = Self(rawValue: "BILLED_UPFRONT")
    public static let monthly = Self(rawValue: "MONTHLY")
    public static let known: [Self] = [.billedUpfront, .monthly]
}

/// `TransactionCommitmentInfo`: where one monthly payment of a 12-month commitment stands.
public struct TransactionCommitmentInfo: Sendable, Hashable {
    /// 1-based: which month of the commitment this transaction pays.
    public var billingPeriodNumber: Int?
    /// When the commitment ends (ms).
    public var commitmentExpiresDate: Int64?
    /// The whole commitment's price, milliunits of the transaction's `currency`.
    public var commitmentPrice: Int64?
    /// 12 for the commitments Apple sells today.
    public var totalBillingPeriods: Int?

    public init(billingPeriodNumber: Int? = nil, commitmentExpiresDate: Int64? = nil, commitmentPrice: Int64? = nil,
                totalBillingPeriods: Int? = nil) {
        self.billingPeriodNumber = billingPeriodNumber
        self.commitmentExpiresDate = commitmentExpiresDate
        self.commitmentPrice = commitmentPrice
        self.totalBillingPeriods = totalBillingPeriods
    }

    /// nil unless `json` is an object.
    public init?(json: JSONValue?) {
        guard let json, case .object = json else { return nil }
        billingPeriodNumber = json["billingPeriodNumber"]?.intValue
        commitmentExpiresDate = json["commitmentExpiresDate"]?.int64Value
        commitmentPrice = json["commitmentPrice"]?.int64Value
        totalBillingPeriods = json["totalBillingPeriods"]?.intValue
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [:]
        if let billingPeriodNumber { o["billingPeriodNumber"] = .int(Int64(billingPeriodNumber)) }
        if let commitmentExpiresDate { o["commitmentExpiresDate"] = .int(commitmentExpiresDate) }
        if let commitmentPrice { o["commitmentPrice"] = .int(commitmentPrice) }
        if let totalBillingPeriods { o["totalBillingPeriods"] = .int(Int64(totalBillingPeriods)) }
        return .object(o)
    }
}

/// `RenewalCommitmentInfo`: what happens when the current commitment ends. `commitmentAutoRenewStatus` is
/// the commitment's own auto-renew switch (the customer's cancel turns it off; the months already committed
/// are still billed), beside `autoRenewStatus`, which speaks of the next monthly payment.
public struct RenewalCommitmentInfo: Sendable, Hashable {
    public var commitmentAutoRenewProductId: String?
    /// 1 on, 0 off.
    public var commitmentAutoRenewStatus: Int?
    /// How the next commitment is paid (a customer may move to `BILLED_UPFRONT` at the commitment's end).
    public var commitmentRenewalBillingPlanType: BillingPlanType?
    public var commitmentRenewalDate: Int64?
    public var commitmentRenewalPrice: Int64?

    public init(commitmentAutoRenewProductId: String? = nil, commitmentAutoRenewStatus: Int? = nil,
                commitmentRenewalBillingPlanType: BillingPlanType? = nil, commitmentRenewalDate: Int64? = nil,
                commitmentRenewalPrice: Int64? = nil) {
        self.commitmentAutoRenewProductId = commitmentAutoRenewProductId
        self.commitmentAutoRenewStatus = commitmentAutoRenewStatus
        self.commitmentRenewalBillingPlanType = commitmentRenewalBillingPlanType
        self.commitmentRenewalDate = commitmentRenewalDate
        self.commitmentRenewalPrice = commitmentRenewalPrice
    }

    public init?(json: JSONValue?) {
        guard let json, case .object = json else { return nil }
        commitmentAutoRenewProductId = json["commitmentAutoRenewProductId"]?.stringValue
        commitmentAutoRenewStatus = json["commitmentAutoRenewStatus"]?.intValue
        commitmentRenewalBillingPlanType = json["commitmentRenewalBillingPlanType"]?.stringValue.map(BillingPlanType.init(rawValue:))
        commitmentRenewalDate = json["commitmentRenewalDate"]?.int64Value
        commitmentRenewalPrice = json["commitmentRenewalPrice"]?.int64Value
    }

    public var willRenew: Bool? { commitmentAutoRenewStatus.map { $0 == 1 } }

    public var json: JSONValue {
        var o: [String: JSONValue] = [:]
        if let commitmentAutoRenewProductId { o["commitmentAutoRenewProductId"] = .string(commitmentAutoRenewProductId) }
        if let commitmentAutoRenewStatus { o["commitmentAutoRenewStatus"] = .int(Int64(commitmentAutoRenewStatus)) }
        if let commitmentRenewalBillingPlanType { o["commitmentRenewalBillingPlanType"] = .string(commitmentRenewalBillingPlanType.rawValue) }
        if let commitmentRenewalDate { o["commitmentRenewalDate"] = .int(commitmentRenewalDate) }
        if let commitmentRenewalPrice { o["commitmentRenewalPrice"] = .int(commitmentRenewalPrice) }
        return .object(o)
    }
}

/// `AppData`: the payload of an app-level notification, such as `RESCIND_CONSENT` (a parent or guardian
/// withdrew consent for a minor's use of the app). The signed app transaction stays a JWS string here;
/// the caller verifies it like any other signed data.
public struct AppDataPayload: Sendable, Hashable {
    public var appAppleId: Int64?
    public var bundleId: String?
    public var environment: AppStoreEnvironment?
    public var signedAppTransactionInfo: String?

    public init?(json: JSONValue?) {
        guard let json, case .object = json else { return nil }
        appAppleId = json["appAppleId"]?.int64Value
        bundleId = json["bundleId"]?.stringValue
        environment = json["environment"]?.stringValue.map(AppStoreEnvironment.init(rawValue:))
        signedAppTransactionInfo = json["signedAppTransactionInfo"]?.stringValue
    }
}

/// `DecodedRealtimeRequestBody`: what the App Store tells the app's Get Retention Message endpoint when a
/// customer opens the cancel flow of a subscription (Retention Messaging API). Every field is required, as
/// Apple's library requires them; there is no `bundleId` (the endpoint's URL names the app).
public struct RealtimeRequestPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var originalTransactionId: String
    public var appAppleId: Int64
    public var productId: String
    /// BCP 47, e.g. `en-US`: the locale of the message to answer with.
    public var userLocale: String
    /// A UUID, new per request.
    public var requestIdentifier: String
    public var signedDate: Int64
    public var environment: AppStoreEnvironment

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        originalTransactionId = try json.requiredID("originalTransactionId")
        guard let appAppleId = json["appAppleId"]?.int64Value else { throw PayloadDecodingError(field: "appAppleId") }
        self.appAppleId = appAppleId
        productId = try json.requiredString("productId")
        userLocale = try json.requiredString("userLocale")
        requestIdentifier = try json.requiredString("requestIdentifier")
        signedDate = try json.requiredMs("signedDate")
        environment = AppStoreEnvironment(rawValue: try json.requiredString("environment"))
    }
}

extension NotificationPayload {
    /// `RESCIND_CONSENT`: a parent or guardian withdrew consent; its payload is `appData`.
    public var isRescindConsent: Bool { notificationType == .rescindConsent }
}
