/// Typed views of Apple's signed payloads. Each keeps the whole decoded JSON in `raw`, so fields this
/// code doesn't know yet are never dropped. Dates are Apple's milliseconds since the UNIX epoch.
public struct PayloadDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var description: String { "missing or invalid field \(field)" }
    public init(field: String) { self.field = field }
}

/// `JWSTransactionDecodedPayload` (§3).
public struct TransactionPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var transactionId: String
    public var originalTransactionId: String
    public var webOrderLineItemId: String?
    public var bundleId: String
    public var productId: String
    public var subscriptionGroupIdentifier: String?
    public var purchaseDate: Int64
    public var originalPurchaseDate: Int64?
    public var expiresDate: Int64?
    public var quantity: Int
    public var type: AppleProductType
    public var appAccountToken: String?
    public var inAppOwnershipType: InAppOwnershipType
    public var signedDate: Int64
    public var revocationDate: Int64?
    public var revocationReason: Int?
    public var revocationType: RevocationType?
    public var revocationPercentage: Int?
    public var isUpgraded: Bool
    public var offerType: AppleOfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var offerPeriod: String?
    public var environment: AppStoreEnvironment
    public var transactionReason: TransactionReason?
    public var storefront: String?
    public var price: Int64?
    public var currency: String?
    public var appTransactionId: String?
    /// (1.21) `MONTHLY` for a yearly subscription billed monthly with a 12-month commitment.
    public var billingPlanType: BillingPlanType?
    /// (1.21) Which month of the commitment this transaction pays, and the commitment's end and price.
    public var commitmentInfo: TransactionCommitmentInfo?

    public var isRevoked: Bool { revocationDate != nil }
    /// The refunded share in milliunits (0–100000) when revoked (`WalletRules.revokedShareMilli`).
    public var revokedShareMilli: Int? {
        guard isRevoked else { return nil }
        return WalletRules.revokedShareMilli(type: revocationType, percentage: revocationPercentage)
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        transactionId = try json.requiredID("transactionId")
        originalTransactionId = json["originalTransactionId"]?.idString ?? transactionId
        webOrderLineItemId = json["webOrderLineItemId"]?.idString
        bundleId = try json.requiredString("bundleId")
        productId = try json.requiredString("productId")
        subscriptionGroupIdentifier = json["subscriptionGroupIdentifier"]?.idString
        purchaseDate = try json.requiredMs("purchaseDate")
        originalPurchaseDate = json["originalPurchaseDate"]?.int64Value
        expiresDate = json["expiresDate"]?.int64Value
        quantity = json["quantity"]?.intValue ?? 1
        type = AppleProductType(rawValue: try json.requiredString("type"))
        appAccountToken = json["appAccountToken"]?.stringValue?.lowercased()
        inAppOwnershipType = InAppOwnershipType(rawValue: json["inAppOwnershipType"]?.stringValue ?? "PURCHASED")
        signedDate = try json.requiredMs("signedDate")
        revocationDate = json["revocationDate"]?.int64Value
        revocationReason = json["revocationReason"]?.intValue
        revocationType = json["revocationType"]?.stringValue.map(RevocationType.init(rawValue:))
        revocationPercentage = json["revocationPercentage"]?.intValue
        isUpgraded = json["isUpgraded"]?.boolValue ?? false
        offerType = json["offerType"]?.intValue.map(AppleOfferType.init(rawValue:))
        offerIdentifier = json["offerIdentifier"]?.stringValue
        offerDiscountType = json["offerDiscountType"]?.stringValue.map(OfferDiscountType.init(rawValue:))
        offerPeriod = json["offerPeriod"]?.stringValue
        environment = AppStoreEnvironment(rawValue: try json.requiredString("environment"))
        transactionReason = json["transactionReason"]?.stringValue.map(TransactionReason.init(rawValue:))
        storefront = json["storefront"]?.stringValue
        price = json["price"]?.int64Value
        currency = json["currency"]?.stringValue
        appTransactionId = json["appTransactionId"]?.idString
        billingPlanType = json["billingPlanType"]?.stringValue.map(BillingPlanType.init(rawValue:))
        commitmentInfo = TransactionCommitmentInfo(json: json["commitmentInfo"])
    }
}

/// `JWSRenewalInfoDecodedPayload` (§4): what happens at the next renewal.
public struct RenewalInfoPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var originalTransactionId: String
    public var productId: String
    public var autoRenewProductId: String?
    public var autoRenewStatus: Int
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool
    public var gracePeriodExpiresDate: Int64?
    public var priceIncreaseStatus: Int?
    public var offerType: AppleOfferType?
    public var offerIdentifier: String?
    public var offerDiscountType: OfferDiscountType?
    public var offerPeriod: String?
    public var recentSubscriptionStartDate: Int64?
    public var renewalDate: Int64?
    public var signedDate: Int64
    public var environment: AppStoreEnvironment
    public var appAccountToken: String?
    /// Win-back offers the customer may redeem, best first (none while in grace or billing retry).
    public var eligibleWinBackOfferIds: [String]
    public var renewalPrice: Int64?
    public var currency: String?
    public var appTransactionId: String?
    /// (1.21) How the next period is paid.
    public var renewalBillingPlanType: BillingPlanType?
    /// (1.21) What happens when the current 12-month commitment ends.
    public var commitmentInfo: RenewalCommitmentInfo?

    public var willAutoRenew: Bool { autoRenewStatus == 1 }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        originalTransactionId = try json.requiredID("originalTransactionId")
        productId = try json.requiredString("productId")
        autoRenewProductId = json["autoRenewProductId"]?.stringValue
        autoRenewStatus = json["autoRenewStatus"]?.intValue ?? 0
        expirationIntent = json["expirationIntent"]?.intValue
        isInBillingRetryPeriod = json["isInBillingRetryPeriod"]?.boolValue ?? false
        gracePeriodExpiresDate = json["gracePeriodExpiresDate"]?.int64Value
        priceIncreaseStatus = json["priceIncreaseStatus"]?.intValue
        offerType = json["offerType"]?.intValue.map(AppleOfferType.init(rawValue:))
        offerIdentifier = json["offerIdentifier"]?.stringValue
        offerDiscountType = json["offerDiscountType"]?.stringValue.map(OfferDiscountType.init(rawValue:))
        offerPeriod = json["offerPeriod"]?.stringValue
        recentSubscriptionStartDate = json["recentSubscriptionStartDate"]?.int64Value
        renewalDate = json["renewalDate"]?.int64Value
        signedDate = try json.requiredMs("signedDate")
        environment = AppStoreEnvironment(rawValue: try json.requiredString("environment"))
        appAccountToken = json["appAccountToken"]?.stringValue?.lowercased()
        eligibleWinBackOfferIds = json["eligibleWinBackOfferIds"]?.arrayValue?.compactMap(\.stringValue) ?? []
        renewalPrice = json["renewalPrice"]?.int64Value
        currency = json["currency"]?.stringValue
        appTransactionId = json["appTransactionId"]?.idString
        renewalBillingPlanType = json["renewalBillingPlanType"]?.stringValue.map(BillingPlanType.init(rawValue:))
        commitmentInfo = RenewalCommitmentInfo(json: json["commitmentInfo"])
    }
}

/// `responseBodyV2DecodedPayload` (§5.2). The nested signed transaction and renewal info stay as JWS
/// strings here; the caller verifies them like any other signed data.
public struct NotificationPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var notificationType: NotificationType
    public var subtype: NotificationSubtype?
    public var notificationUUID: String
    public var version: String?
    public var signedDate: Int64
    public var data: NotificationData?
    /// The `appData` payload of app-level notifications (`RESCIND_CONSENT`).
    public var appData: AppDataPayload?
    /// The app the notification is about, read from whichever of data/summary/externalPurchaseToken/appData is present.
    public var bundleId: String?
    public var appAppleId: Int64?
    public var environment: AppStoreEnvironment?

    public struct NotificationData: Sendable, Hashable {
        public var appAppleId: Int64?
        public var bundleId: String?
        public var bundleVersion: String?
        public var environment: AppStoreEnvironment?
        public var signedTransactionInfo: String?
        public var signedRenewalInfo: String?
        public var status: Int?
        public var consumptionRequestReason: String?
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        notificationType = NotificationType(rawValue: try json.requiredString("notificationType"))
        subtype = json["subtype"]?.stringValue.map(NotificationSubtype.init(rawValue:))
        notificationUUID = try json.requiredString("notificationUUID")
        version = json["version"]?.stringValue
        // Apple's own test vectors omit signedDate on some TEST notifications; 0 means "unknown".
        signedDate = json["signedDate"]?.int64Value ?? 0
        if let d = json["data"], case .object = d {
            let nd = NotificationData(
                appAppleId: d["appAppleId"]?.int64Value,
                bundleId: d["bundleId"]?.stringValue,
                bundleVersion: d["bundleVersion"]?.stringValue,
                environment: d["environment"]?.stringValue.map(AppStoreEnvironment.init(rawValue:)),
                signedTransactionInfo: d["signedTransactionInfo"]?.stringValue,
                signedRenewalInfo: d["signedRenewalInfo"]?.stringValue,
                status: d["status"]?.intValue,
                consumptionRequestReason: d["consumptionRequestReason"]?.stringValue)
            data = nd
            bundleId = nd.bundleId
            appAppleId = nd.appAppleId
            environment = nd.environment
        } else if let s = json["summary"], case .object = s {
            bundleId = s["bundleId"]?.stringValue
            appAppleId = s["appAppleId"]?.int64Value
            environment = s["environment"]?.stringValue.map(AppStoreEnvironment.init(rawValue:))
        } else if let e = json["externalPurchaseToken"], case .object = e {
            bundleId = e["bundleId"]?.stringValue
            appAppleId = e["appAppleId"]?.int64Value
            let sandbox = e["externalPurchaseId"]?.stringValue?.hasPrefix("SANDBOX") ?? false
            environment = sandbox ? .sandbox : .production
        } else if let a = AppDataPayload(json: json["appData"]) {
            appData = a
            bundleId = a.bundleId
            appAppleId = a.appAppleId
            environment = a.environment
        }
    }
}

/// `JWSAppTransactionDecodedPayload`.
public struct AppTransactionPayload: Sendable, Hashable {
    public var raw: JSONValue
    public var bundleId: String
    public var appAppleId: Int64?
    public var receiptType: AppStoreEnvironment
    public var receiptCreationDate: Int64?

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(payload)") }
        raw = json
        bundleId = try json.requiredString("bundleId")
        appAppleId = json["appAppleId"]?.int64Value
        receiptType = AppStoreEnvironment(rawValue: try json.requiredString("receiptType"))
        receiptCreationDate = json["receiptCreationDate"]?.int64Value
    }
}

/// Which kind of signed payload a JWS carries, told apart by its fields.
public enum SignedPayloadKind: String, Sendable {
    /// `realtimeRequest`: the signed request of the Retention Messaging API's Get Retention Message call.
    case transaction, renewalInfo, notification, appTransaction, realtimeRequest, unknown

    public static func of(_ json: JSONValue) -> SignedPayloadKind {
        if json["notificationType"] != nil { return .notification }
        if json["transactionId"] != nil { return .transaction }
        if json["receiptType"] != nil { return .appTransaction }
        if json["requestIdentifier"] != nil, json["userLocale"] != nil, json["originalTransactionId"] != nil { return .realtimeRequest }
        if json["originalTransactionId"] != nil, json["autoRenewStatus"] != nil || json["renewalDate"] != nil
            || json["autoRenewProductId"] != nil
        {
            return .renewalInfo
        }
        return .unknown
    }
}

extension JSONValue {
    func requiredString(_ key: String) throws(PayloadDecodingError) -> String {
        guard let s = self[key]?.stringValue, !s.isEmpty else { throw PayloadDecodingError(field: key) }
        return s
    }

    func requiredID(_ key: String) throws(PayloadDecodingError) -> String {
        guard let s = self[key]?.idString, !s.isEmpty else { throw PayloadDecodingError(field: key) }
        return s
    }

    func requiredMs(_ key: String) throws(PayloadDecodingError) -> Int64 {
        guard let v = self[key]?.int64Value else { throw PayloadDecodingError(field: key) }
        return v
    }
}

/// The payload of a compact JWS without checking its signature. Only for data Kakin verified before it
/// stored it (re-reading stored transactions); never for input.
public enum StoredJWS {
    public static func payload(_ jws: String) -> JSONValue? {
        var jws = jws
        return jws.withUTF8 { bytes -> JSONValue? in
            // The payload is found from the end: the signature is short, the header (three certificates) long
            // and, this being a JWS that was verified before it was stored, free of dots.
            let dot = UInt8(ascii: ".")
            guard let second = bytes.lastIndex(of: dot), let first = bytes[..<second].lastIndex(of: dot),
                  let payload = Base64.decode(UnsafeBufferPointer(rebasing: bytes[(first + 1)..<second])) else { return nil }
            return try? JSONParser.parse(payload)
        }
    }
}
