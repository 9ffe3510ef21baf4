/// Typed views of the Google Play Developer API's purchase resources (androidpublisher v3). Each keeps the whole
/// JSON in `raw`, so a field this code does not know is never dropped. Times are milliseconds since the epoch,
/// read from Google's RFC 3339 strings (v2 resources) or its int64-as-string millis (v1 resources).
extension JSONValue {
    /// Google encodes int64 as a JSON string; a number is accepted too.
    var googleInt64: Int64? {
        switch self {
        case .string(let s): return Int64(s)
        default: return int64Value
        }
    }

    var rfc3339Ms: Int64? { stringValue.flatMap(Timestamp.parseRFC3339) }
}

/// The three identifiers an app and Kakin can attach to a purchase (`externalAccountIdentifiers`, or the same
/// fields flat on one-time purchases). Kakin passes the customer's `appAccountToken` as `obfuscatedAccountId`.
public struct PlayExternalAccountIdentifiers: Sendable, Hashable {
    public var externalAccountId: String?
    public var obfuscatedExternalAccountId: String?
    public var obfuscatedExternalProfileId: String?

    init(json: JSONValue?) {
        externalAccountId = json?["externalAccountId"]?.stringValue
        obfuscatedExternalAccountId = json?["obfuscatedExternalAccountId"]?.stringValue
        obfuscatedExternalProfileId = json?["obfuscatedExternalProfileId"]?.stringValue
    }
}

/// `SubscriptionPurchaseV2` (`purchases.subscriptionsv2.get`).
public struct SubscriptionPurchaseV2: Sendable, Hashable {
    public var raw: JSONValue
    public var regionCode: String?
    public var startTimeMs: Int64?
    public var subscriptionState: PlaySubscriptionState
    public var acknowledgementState: PlayAcknowledgementState
    /// The token this one replaced (upgrade, downgrade, resubscribe before lapse): chains are followed through it.
    public var linkedPurchaseToken: String?
    public var externalAccountIdentifiers: PlayExternalAccountIdentifiers
    /// `testPurchase` is present (a license tester's purchase).
    public var isTestPurchase: Bool
    public var etag: String?
    /// While `PAUSED`: when it resumes.
    public var autoResumeTimeMs: Int64?
    public var cancellation: Cancellation?
    public var lineItems: [LineItem]

    /// Who cancelled (`canceledStateContext`).
    public enum Cancellation: Sendable, Hashable {
        case user(cancelTimeMs: Int64?)
        case system
        case developer
        /// Replaced by a plan change (the new token's `linkedPurchaseToken` names this one).
        case replacement
        case unknown
    }

    /// One item of the subscription (`SubscriptionPurchaseLineItem`).
    public struct LineItem: Sendable, Hashable {
        public var productId: String
        public var expiryTimeMs: Int64?
        /// The order of the latest successful charge: `GPA.…`, renewals `GPA.…..0`, `..1`, ….
        public var latestSuccessfulOrderId: String?
        /// nil for a prepaid plan.
        public var autoRenewEnabled: Bool?
        public var isPrepaid: Bool
        public var basePlanId: String?
        public var offerId: String?
        /// `basePrice`, `freeTrial`, `introductoryPrice` or `prorationPeriod` (the key of `offerPhase`).
        public var offerPhase: String?
        public var itemReplacement: ItemReplacement?

        init(json: JSONValue) throws(PayloadDecodingError) {
            productId = try json.requiredString("productId")
            expiryTimeMs = json["expiryTime"]?.rfc3339Ms
            latestSuccessfulOrderId = json["latestSuccessfulOrderId"]?.stringValue
            autoRenewEnabled = json["autoRenewingPlan"].map { $0["autoRenewEnabled"]?.boolValue ?? false }
            isPrepaid = json["prepaidPlan"] != nil
            basePlanId = json["offerDetails"]?["basePlanId"]?.stringValue
            offerId = json["offerDetails"]?["offerId"]?.stringValue
            offerPhase = json["offerPhase"]?.objectValue?.keys.sorted().first
            itemReplacement = json["itemReplacement"].map(ItemReplacement.init(json:))
        }
    }

    /// `ItemReplacement`: what this line item replaced.
    public struct ItemReplacement: Sendable, Hashable {
        public var productId: String?
        public var basePlanId: String?
        public var offerId: String?
        public var replacementMode: PlayReplacementMode?

        init(json: JSONValue) {
            productId = json["productId"]?.stringValue
            basePlanId = json["basePlanId"]?.stringValue
            offerId = json["offerId"]?.stringValue
            replacementMode = json["replacementMode"]?.stringValue.map(PlayReplacementMode.init(rawValue:))
        }
    }

    /// The latest expiry of any line item.
    public var expiryTimeMs: Int64? { lineItems.compactMap(\.expiryTimeMs).max() }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        raw = json
        regionCode = json["regionCode"]?.stringValue
        startTimeMs = json["startTime"]?.rfc3339Ms
        subscriptionState = PlaySubscriptionState(rawValue: try json.requiredString("subscriptionState"))
        acknowledgementState = PlayAcknowledgementState(rawValue: json["acknowledgementState"]?.stringValue ?? "ACKNOWLEDGEMENT_STATE_UNSPECIFIED")
        linkedPurchaseToken = json["linkedPurchaseToken"]?.stringValue
        externalAccountIdentifiers = PlayExternalAccountIdentifiers(json: json["externalAccountIdentifiers"])
        isTestPurchase = json["testPurchase"] != nil
        etag = json["etag"]?.stringValue
        autoResumeTimeMs = json["pausedStateContext"]?["autoResumeTime"]?.rfc3339Ms
        if let c = json["canceledStateContext"] {
            if let user = c["userInitiatedCancellation"] {
                cancellation = .user(cancelTimeMs: user["cancelTime"]?.rfc3339Ms)
            } else if c["systemInitiatedCancellation"] != nil {
                cancellation = .system
            } else if c["developerInitiatedCancellation"] != nil {
                cancellation = .developer
            } else if c["replacementCancellation"] != nil {
                cancellation = .replacement
            } else {
                cancellation = .unknown
            }
        }
        guard let items = json["lineItems"]?.arrayValue, !items.isEmpty else { throw PayloadDecodingError(field: "lineItems") }
        var decoded: [LineItem] = []
        for item in items { decoded.append(try LineItem(json: item)) }
        lineItems = decoded
    }
}

/// `ProductPurchase`, the v1 one-time purchase (`purchases.products.get`).
public struct ProductPurchase: Sendable, Hashable {
    public var raw: JSONValue
    public var purchaseTimeMs: Int64
    /// 0 purchased, 1 cancelled, 2 pending.
    public var purchaseState: Int
    /// 0 yet to be consumed, 1 consumed.
    public var consumptionState: Int
    /// 0 yet to be acknowledged, 1 acknowledged.
    public var acknowledgementState: Int
    /// 0 test, 1 promo, 2 rewarded; nil for a normal purchase.
    public var purchaseType: Int?
    public var orderId: String?
    public var productId: String?
    public var purchaseToken: String?
    public var quantity: Int
    public var refundableQuantity: Int?
    public var regionCode: String?
    public var developerPayload: String?
    public var externalAccountIdentifiers: PlayExternalAccountIdentifiers

    public var isTestPurchase: Bool { purchaseType == 0 }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        raw = json
        guard let time = json["purchaseTimeMillis"]?.googleInt64 else { throw PayloadDecodingError(field: "purchaseTimeMillis") }
        purchaseTimeMs = time
        purchaseState = json["purchaseState"]?.intValue ?? 0
        consumptionState = json["consumptionState"]?.intValue ?? 0
        acknowledgementState = json["acknowledgementState"]?.intValue ?? 0
        purchaseType = json["purchaseType"]?.intValue
        orderId = json["orderId"]?.stringValue
        productId = json["productId"]?.stringValue
        purchaseToken = json["purchaseToken"]?.stringValue
        quantity = json["quantity"]?.intValue ?? 1
        refundableQuantity = json["refundableQuantity"]?.intValue
        regionCode = json["regionCode"]?.stringValue
        developerPayload = json["developerPayload"]?.stringValue
        externalAccountIdentifiers = PlayExternalAccountIdentifiers(json: json)
    }
}

/// `ProductPurchaseV2` (`purchases.productsv2.getproductpurchasev2`).
public struct ProductPurchaseV2: Sendable, Hashable {
    public var raw: JSONValue
    public var orderId: String?
    public var purchaseCompletionTimeMs: Int64?
    public var purchaseState: PlayProductPurchaseState
    public var acknowledgementState: PlayAcknowledgementState
    /// `testPurchaseContext` is present (`fopType` TEST).
    public var isTestPurchase: Bool
    public var regionCode: String?
    public var externalAccountIdentifiers: PlayExternalAccountIdentifiers
    public var lineItems: [LineItem]

    /// `ProductLineItem` with its `productOfferDetails`.
    public struct LineItem: Sendable, Hashable {
        public var productId: String
        public var quantity: Int
        public var refundableQuantity: Int?
        public var consumptionState: PlayConsumptionState?
        public var offerId: String?
        public var purchaseOptionId: String?

        init(json: JSONValue) throws(PayloadDecodingError) {
            productId = try json.requiredString("productId")
            let details = json["productOfferDetails"]
            quantity = details?["quantity"]?.intValue ?? 1
            refundableQuantity = details?["refundableQuantity"]?.intValue
            consumptionState = details?["consumptionState"]?.stringValue.map(PlayConsumptionState.init(rawValue:))
            offerId = details?["offerId"]?.stringValue
            purchaseOptionId = details?["purchaseOptionId"]?.stringValue
        }
    }

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        raw = json
        orderId = json["orderId"]?.stringValue
        purchaseCompletionTimeMs = json["purchaseCompletionTime"]?.rfc3339Ms
        purchaseState = PlayProductPurchaseState(rawValue: try json["purchaseStateContext"].orThrow("purchaseStateContext").requiredString("purchaseState"))
        acknowledgementState = PlayAcknowledgementState(rawValue: json["acknowledgementState"]?.stringValue ?? "ACKNOWLEDGEMENT_STATE_UNSPECIFIED")
        isTestPurchase = json["testPurchaseContext"] != nil
        regionCode = json["regionCode"]?.stringValue
        externalAccountIdentifiers = PlayExternalAccountIdentifiers(json: json)
        var decoded: [LineItem] = []
        for item in json["productLineItem"]?.arrayValue ?? [] { decoded.append(try LineItem(json: item)) }
        guard !decoded.isEmpty else { throw PayloadDecodingError(field: "productLineItem") }
        lineItems = decoded
    }
}

/// `VoidedPurchase`: a refunded, charged-back or revoked purchase (`purchases.voidedpurchases.list`).
public struct VoidedPurchase: Sendable, Hashable {
    public var raw: JSONValue
    public var purchaseToken: String
    public var orderId: String?
    public var purchaseTimeMs: Int64?
    public var voidedTimeMs: Int64
    public var voidedSource: PlayVoidedSource
    public var voidedReason: PlayVoidedReason
    /// Set for a quantity-based partial refund: how many of the purchase's items were refunded.
    public var voidedQuantity: Int?

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        raw = json
        purchaseToken = try json.requiredString("purchaseToken")
        orderId = json["orderId"]?.stringValue
        purchaseTimeMs = json["purchaseTimeMillis"]?.googleInt64
        guard let voided = json["voidedTimeMillis"]?.googleInt64 else { throw PayloadDecodingError(field: "voidedTimeMillis") }
        voidedTimeMs = voided
        voidedSource = PlayVoidedSource(rawValue: json["voidedSource"]?.intValue ?? 0)
        voidedReason = PlayVoidedReason(rawValue: json["voidedReason"]?.intValue ?? 0)
        voidedQuantity = json["voidedQuantity"]?.intValue
    }
}

/// One page of `purchases.voidedpurchases.list`.
public struct VoidedPurchasesPage: Sendable, Hashable {
    public var voidedPurchases: [VoidedPurchase]
    /// `tokenPagination.nextPageToken`: pass it as `token` for the next page; nil on the last.
    public var nextPageToken: String?

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        var decoded: [VoidedPurchase] = []
        for item in json["voidedPurchases"]?.arrayValue ?? [] { decoded.append(try VoidedPurchase(json: item)) }
        voidedPurchases = decoded
        nextPageToken = json["tokenPagination"]?["nextPageToken"]?.stringValue
    }
}

extension Optional where Wrapped == JSONValue {
    func orThrow(_ field: String) throws(PayloadDecodingError) -> JSONValue {
        guard let value = self else { throw PayloadDecodingError(field: field) }
        return value
    }
}

/// `Order` (`orders.get`): what the buyer paid for one order (`total`, tax included, as Google charged it), the
/// developer's share (`developerRevenueInBuyerCurrency`) and the order's `state`.
public struct PlayOrder: Sendable, Hashable {
    public var raw: JSONValue
    public var orderId: String
    /// `total` in milli-units of `currency`.
    public var totalMilli: Int64
    public var currency: String

    public init(json: JSONValue) throws(PayloadDecodingError) {
        guard case .object = json else { throw PayloadDecodingError(field: "(resource)") }
        raw = json
        orderId = try json.requiredString("orderId")
        guard let total = PlayPurchaseFacts.moneyMilli(json["total"]) else { throw PayloadDecodingError(field: "total") }
        (totalMilli, currency) = total
    }
}
