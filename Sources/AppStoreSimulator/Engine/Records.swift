import KakinCore

/// An offer as it applies to one transaction or to the next renewal. Kept flat (strings and numbers) so the
/// whole state encodes to a file and replays without the catalog having to stay unchanged.
struct AppliedOffer: Codable, Sendable, Equatable {
    /// `offerType`: 1 introductory, 2 promotional, 3 offer code, 4 win-back.
    var type: Int
    /// `offerIdentifier`; nil for introductory offers (Apple sends none); an offer code's reference name.
    var id: String?
    /// `OfferPaymentMode` raw value.
    var mode: String
    /// One billing period of the offer (pay as you go) or its whole span (free trial, pay up front).
    var period: String
    var numberOfPeriods: Int
    /// Price of one offer period in milliunits (0 for a free trial).
    var priceMilli: Int64

    init(_ offer: SubscriptionOffer) {
        type = offer.type.rawValue
        id = offer.id
        mode = offer.mode.rawValue
        period = offer.period.description
        numberOfPeriods = offer.numberOfPeriods
        priceMilli = offer.mode == .freeTrial ? 0 : offer.priceMilli
    }

    var paymentMode: OfferPaymentMode { OfferPaymentMode(rawValue: mode) ?? .freeTrial }
    var isPayAsYouGo: Bool { paymentMode == .payAsYouGo }
    /// The `offerPeriod` Apple writes: the offer's total duration (`P3M` for 3 × 1 month).
    var totalPeriod: String {
        guard isPayAsYouGo, let p = ISOPeriod(period) else { return period }
        return p.multiplied(by: numberOfPeriods).description
    }
    /// How long the first transaction under this offer lasts.
    var firstSpan: ISOPeriod { ISOPeriod(period) ?? ISOPeriod(days: 1) }

    var json: [String: JSONValue] {
        var o: [String: JSONValue] = ["offerType": .int(Int64(type)), "offerDiscountType": .string(paymentMode.discountType.rawValue),
                                      "offerPeriod": .string(totalPeriod)]
        if let id { o["offerIdentifier"] = .string(id) }
        return o
    }
}

/// One signed transaction as the App Store keeps it: the fields it is rendered from, and the exact JWS
/// last signed for it (history, notifications and retries hand out those same bytes).
struct SimTransaction: Codable, Sendable, Equatable {
    var transactionId: String
    var originalTransactionId: String
    var webOrderLineItemId: String?
    var productId: String
    /// `ProductKind` raw value.
    var kind: String
    var groupId: String?
    var purchaseDate: Int64
    var originalPurchaseDate: Int64
    var expiresDate: Int64?
    var quantity: Int
    /// The Apple account this belongs to (`appAccountToken`, or "" for the anonymous account).
    var accountKey: String
    /// Written into the payload; absent on family-shared copies, as Apple leaves the purchaser's out.
    var appAccountToken: String?
    var ownership: String
    var reason: String
    var priceMilli: Int64?
    var currency: String?
    var offer: AppliedOffer?
    var appTransactionId: String
    var orderId: String?
    var revocationDate: Int64?
    var revocationReason: Int?
    var revocationType: String?
    var revocationPercentage: Int?
    var isUpgraded: Bool
    var signedDate: Int64
    /// Orders history by last modification, as Apple's `sort` does (re-signing bumps it).
    var modifiedSeq: Int64
    var jws: String
    /// API 1.21: `billingPlanType` (products sold both ways) and the 12-month commitment's `commitmentInfo`.
    var billingPlanType: String? = nil
    var commitmentBillingPeriod: Int? = nil
    var commitmentExpiresDate: Int64? = nil
    var commitmentPrice: Int64? = nil
    /// Finished through the App Store Server API's Finish Transaction (when, and in which order).
    var finishedDate: Int64? = nil
    var finishSeq: Int64? = nil

    var productKind: ProductKind { ProductKind(rawValue: kind) ?? .consumable }
    var isRevoked: Bool { revocationDate != nil }
    var isFamilyShared: Bool { ownership == InAppOwnershipType.familyShared.rawValue }

    func payload(_ config: SimulatorConfiguration) -> JSONValue {
        var o: [String: JSONValue] = [
            "transactionId": .string(transactionId),
            "originalTransactionId": .string(originalTransactionId),
            "bundleId": .string(config.bundleId),
            "productId": .string(productId),
            "purchaseDate": .int(purchaseDate),
            "originalPurchaseDate": .int(originalPurchaseDate),
            "quantity": .int(Int64(quantity)),
            "type": .string(productKind.appleType.rawValue),
            "inAppOwnershipType": .string(ownership),
            "signedDate": .int(signedDate),
            "environment": .string(config.environment.rawValue),
            "transactionReason": .string(reason),
            "storefront": .string(config.storefront),
            "appTransactionId": .string(appTransactionId),
        ]
        if let id = Storefronts.storefrontId(alpha3: config.storefront) { o["storefrontId"] = .string(id) }
        if let webOrderLineItemId { o["webOrderLineItemId"] = .string(webOrderLineItemId) }
        if let groupId { o["subscriptionGroupIdentifier"] = .string(groupId) }
        if let expiresDate { o["expiresDate"] = .int(expiresDate) }
        if let appAccountToken { o["appAccountToken"] = .string(appAccountToken) }
        if let priceMilli, let currency {
            o["price"] = .int(priceMilli)
            o["currency"] = .string(currency)
        }
        if let offer { o.merge(offer.json) { _, new in new } }
        if let revocationDate {
            o["revocationDate"] = .int(revocationDate)
            o["revocationReason"] = .int(Int64(revocationReason ?? 0))
            if let revocationType { o["revocationType"] = .string(revocationType) }
            if let revocationPercentage { o["revocationPercentage"] = .int(Int64(revocationPercentage)) }
        }
        if isUpgraded { o["isUpgraded"] = .bool(true) }
        if let billingPlanType { o["billingPlanType"] = .string(billingPlanType) }
        if let commitmentExpiresDate {
            o["commitmentInfo"] = TransactionCommitmentInfo(billingPeriodNumber: commitmentBillingPeriod, commitmentExpiresDate: commitmentExpiresDate,
                                                            commitmentPrice: commitmentPrice, totalBillingPeriods: SimCommitment.totalBillingPeriods).json
        }
        return .object(o)
    }
}

/// Where one subscription instance stands. Billing retry keeps the failed renewal date (R): recovery in
/// grace restarts at R (no gap), later recovery at the recovery time, and R + 60 days ends the retry.
enum SubscriptionPhase: Codable, Sendable, Equatable {
    case active
    case billingRetry(failedAtMs: Int64, graceEndMs: Int64?, graceExpired: Bool)
    case expired(intent: Int, atMs: Int64)
    case revoked(atMs: Int64)

    /// Still "in the group" for plan changes and intro eligibility: not expired, not revoked.
    var isLive: Bool {
        switch self {
        case .active, .billingRetry: return true
        case .expired, .revoked: return false
        }
    }
}

/// An offer waiting in renewal info for the next renewal. One slot: a newer offer replaces it (seed 003).
struct PendingOffer: Codable, Sendable, Equatable {
    var productId: String
    var offer: AppliedOffer
}

struct PriceIncrease: Codable, Sendable, Equatable {
    var newPriceMilli: Int64
    /// `priceIncreaseStatus` 1 (consented, or no consent needed) versus 0 (waiting for consent).
    var consented: Bool
}

/// One auto-renewable subscription instance: one Apple account, one group, one ownership type. Its
/// `originalTransactionId` stays the same across renewals, plan changes and resubscriptions.
struct SimSubscription: Codable, Sendable, Equatable {
    var originalTransactionId: String
    var originalPurchaseDate: Int64
    var accountKey: String
    var appAccountToken: String?
    var groupId: String
    var ownership: String
    var productId: String
    var latestTransactionId: String
    var autoRenewStatus: Bool
    var autoRenewProductId: String
    var pendingOffer: PendingOffer?
    /// A pay-as-you-go offer still running: the offer and how many of its periods remain after the current one.
    var runningOffer: AppliedOffer?
    var runningOfferPeriodsLeft: Int
    var phase: SubscriptionPhase
    /// Set by `failBilling`: the next renewal attempt fails.
    var failNextRenewal: Bool
    var recentStartDate: Int64
    /// Dates of renewal-date extensions (at most two per 365 days).
    var extensionDates: [Int64]
    /// The regular price after an accepted price increase took effect.
    var priceOverrideMilli: Int64?
    var priceIncrease: PriceIncrease?
    /// Set by the `productNotForSale` action: the next renewal ends in EXPIRED/PRODUCT_NOT_FOR_SALE.
    var productNotForSale: Bool
    /// Auto-renew status before a refund, restored if the refund is reversed.
    var autoRenewBeforeRevocation: Bool?
    /// A 12-month commitment billed monthly (nil for every other plan).
    var commitment: SimCommitment? = nil
    var renewalJWS: String
    var renewalSignedDate: Int64

    var isFamilyShared: Bool { ownership == InAppOwnershipType.familyShared.rawValue }
}

struct SendAttempt: Codable, Sendable, Equatable {
    var attemptDate: Int64
    var sendAttemptResult: String
}

/// A notification as sent, with every delivery attempt (Get Notification History shows them).
struct SimNotification: Codable, Sendable, Equatable {
    var notificationUUID: String
    var notificationType: String
    var subtype: String?
    var signedDate: Int64
    var jws: String
    var accountKey: String?
    var transactionId: String?
    var originalTransactionId: String?
    var attempts: [SendAttempt]
    /// When the next attempt is due; nil once delivered, given up, or while an attempt is in flight.
    var nextAttemptMs: Int64?
    var inFlight: Bool
    var seq: Int64

    var delivered: Bool { attempts.contains { $0.sendAttemptResult == SendAttemptResult.success.rawValue } }
}

/// Apple's `sendAttemptResult` values.
public enum SendAttemptResult: String, Sendable, CaseIterable {
    case success = "SUCCESS"
    case timedOut = "TIMED_OUT"
    case tlsIssue = "TLS_ISSUE"
    case circularRedirect = "CIRCULAR_REDIRECT"
    case noResponse = "NO_RESPONSE"
    case socketIssue = "SOCKET_ISSUE"
    case unsupportedCharset = "UNSUPPORTED_CHARSET"
    case invalidResponse = "INVALID_RESPONSE"
    case prematureClose = "PREMATURE_CLOSE"
    case unsuccessfulHTTPResponseCode = "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
    case other = "OTHER"
}

struct AccountRecord: Codable, Sendable, Equatable {
    var appTransactionId: String
}

/// Money Apple would give back for the unused part of a period ended by an upgrade or immediate crossgrade.
/// Apple refunds it without a REFUND notification or revocation fields; the simulator records it here.
struct ProratedRefund: Codable, Sendable, Equatable {
    var transactionId: String
    var originalTransactionId: String
    var amountMilli: Int64
    var currency: String?
    var dateMs: Int64

    var json: JSONValue {
        ["transactionId": .string(transactionId), "originalTransactionId": .string(originalTransactionId),
         "amountMilli": .int(amountMilli), "currency": .string(currency), "date": .string(Timestamp.rfc3339(dateMs))]
    }
}

struct ConsumptionRecord: Codable, Sendable, Equatable {
    var transactionId: String
    var receivedMs: Int64
    /// The request body as received (validated).
    var body: String
    /// 1 for the deprecated V1 endpoint; nil (older state files) or 2 for the current one.
    var version: Int?
}

struct ExtensionRecord: Codable, Sendable, Equatable {
    var originalTransactionId: String
    var webOrderLineItemId: String?
    var success: Bool
    var effectiveDate: Int64
}

struct MassExtensionRecord: Codable, Sendable, Equatable {
    var productId: String
    var completeDate: Int64
    var succeededCount: Int
    var failedCount: Int
}
