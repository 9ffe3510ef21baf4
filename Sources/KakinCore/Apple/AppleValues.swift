/// Apple's enumerated strings. Each is a struct over the raw string (not a closed enum) so that a value
/// Apple adds tomorrow decodes, is stored, and is shown, instead of failing the whole payload.
public protocol AppleStringValue: RawRepresentable, Hashable, Sendable, CustomStringConvertible where RawValue == String {
    init(rawValue: String)
}

extension AppleStringValue {
    public var description: String { rawValue }
}

public struct AppStoreEnvironment: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let production = Self(rawValue: "Production")
    public static let sandbox = Self(rawValue: "Sandbox")
    /// StoreKit Testing in Xcode: signed by a local key, never by Apple.
    public static let xcode = Self(rawValue: "Xcode")
    /// Apple's library unit tests: not signed by Apple either.
    public static let localTesting = Self(rawValue: "LocalTesting")
    public static let known: [Self] = [.production, .sandbox, .xcode, .localTesting]
    /// Data in these environments is not signed by the App Store; accepted only when configured.
    public var isLocal: Bool { self == .xcode || self == .localTesting }
}

/// The JWS `type` of a transaction (§1 of the reference).
public struct AppleProductType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let consumable = Self(rawValue: "Consumable")
    public static let nonConsumable = Self(rawValue: "Non-Consumable")
    public static let autoRenewable = Self(rawValue: "Auto-Renewable Subscription")
    public static let nonRenewing = Self(rawValue: "Non-Renewing Subscription")
}

public struct InAppOwnershipType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchased = Self(rawValue: "PURCHASED")
    public static let familyShared = Self(rawValue: "FAMILY_SHARED")
}

public struct TransactionReason: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchase = Self(rawValue: "PURCHASE")
    public static let renewal = Self(rawValue: "RENEWAL")
}

public struct OfferDiscountType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let freeTrial = Self(rawValue: "FREE_TRIAL")
    public static let payAsYouGo = Self(rawValue: "PAY_AS_YOU_GO")
    public static let payUpFront = Self(rawValue: "PAY_UP_FRONT")
    public static let oneTime = Self(rawValue: "ONE_TIME")
}

public struct RevocationType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let refundFull = Self(rawValue: "REFUND_FULL")
    public static let refundProrated = Self(rawValue: "REFUND_PRORATED")
    public static let familyRevoke = Self(rawValue: "FAMILY_REVOKE")
}

/// `offerType` integers (§3): 1 introductory, 2 promotional, 3 offer code, 4 win-back.
public struct AppleOfferType: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let introductory = Self(rawValue: 1)
    public static let promotional = Self(rawValue: 2)
    public static let offerCode = Self(rawValue: 3)
    public static let winBack = Self(rawValue: 4)

    /// The contract's name for the offer type.
    public var contractName: String {
        switch rawValue {
        case 1: return "introductory"
        case 2: return "promotional"
        case 3: return "offerCode"
        case 4: return "winBack"
        default: return "unknown(\(rawValue))"
        }
    }

    public init?(contractName: String) {
        switch contractName {
        case "introductory": self = .introductory
        case "promotional": self = .promotional
        case "offerCode": self = .offerCode
        case "winBack": self = .winBack
        default: return nil
        }
    }
}

public struct NotificationType: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let subscribed = Self(rawValue: "SUBSCRIBED")
    public static let didRenew = Self(rawValue: "DID_RENEW")
    public static let didFailToRenew = Self(rawValue: "DID_FAIL_TO_RENEW")
    public static let gracePeriodExpired = Self(rawValue: "GRACE_PERIOD_EXPIRED")
    public static let didChangeRenewalPref = Self(rawValue: "DID_CHANGE_RENEWAL_PREF")
    public static let didChangeRenewalStatus = Self(rawValue: "DID_CHANGE_RENEWAL_STATUS")
    public static let offerRedeemed = Self(rawValue: "OFFER_REDEEMED")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let expired = Self(rawValue: "EXPIRED")
    public static let refund = Self(rawValue: "REFUND")
    public static let refundDeclined = Self(rawValue: "REFUND_DECLINED")
    public static let refundReversed = Self(rawValue: "REFUND_REVERSED")
    public static let revoke = Self(rawValue: "REVOKE")
    public static let consumptionRequest = Self(rawValue: "CONSUMPTION_REQUEST")
    public static let renewalExtended = Self(rawValue: "RENEWAL_EXTENDED")
    public static let renewalExtension = Self(rawValue: "RENEWAL_EXTENSION")
    public static let oneTimeCharge = Self(rawValue: "ONE_TIME_CHARGE")
    public static let externalPurchaseToken = Self(rawValue: "EXTERNAL_PURCHASE_TOKEN")
    public static let test = Self(rawValue: "TEST")
    public static let metadataUpdate = Self(rawValue: "METADATA_UPDATE")
    public static let migration = Self(rawValue: "MIGRATION")
    public static let priceChange = Self(rawValue: "PRICE_CHANGE")
    public static let rescindConsent = Self(rawValue: "RESCIND_CONSENT")
}

public struct NotificationSubtype: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let initialBuy = Self(rawValue: "INITIAL_BUY")
    public static let resubscribe = Self(rawValue: "RESUBSCRIBE")
    public static let downgrade = Self(rawValue: "DOWNGRADE")
    public static let upgrade = Self(rawValue: "UPGRADE")
    public static let autoRenewEnabled = Self(rawValue: "AUTO_RENEW_ENABLED")
    public static let autoRenewDisabled = Self(rawValue: "AUTO_RENEW_DISABLED")
    public static let voluntary = Self(rawValue: "VOLUNTARY")
    public static let billingRetry = Self(rawValue: "BILLING_RETRY")
    public static let priceIncrease = Self(rawValue: "PRICE_INCREASE")
    public static let gracePeriod = Self(rawValue: "GRACE_PERIOD")
    public static let pending = Self(rawValue: "PENDING")
    public static let accepted = Self(rawValue: "ACCEPTED")
    public static let billingRecovery = Self(rawValue: "BILLING_RECOVERY")
    public static let productNotForSale = Self(rawValue: "PRODUCT_NOT_FOR_SALE")
    public static let summary = Self(rawValue: "SUMMARY")
    public static let failure = Self(rawValue: "FAILURE")
    public static let unreported = Self(rawValue: "UNREPORTED")
}
