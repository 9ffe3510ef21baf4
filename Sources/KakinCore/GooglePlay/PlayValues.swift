/// Google Play's enumerated strings. Like Apple's, each is a struct over the raw string (not a closed enum), so a
/// value Google adds tomorrow decodes, is stored and is shown instead of failing the whole resource.
public protocol PlayStringValue: RawRepresentable, Hashable, Sendable, CustomStringConvertible where RawValue == String {
    init(rawValue: String)
}

extension PlayStringValue {
    public var description: String { rawValue }
}

/// `SubscriptionPurchaseV2.subscriptionState`.
public struct PlaySubscriptionState: PlayStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let unspecified = Self(rawValue: "SUBSCRIPTION_STATE_UNSPECIFIED")
    public static let pending = Self(rawValue: "SUBSCRIPTION_STATE_PENDING")
    public static let active = Self(rawValue: "SUBSCRIPTION_STATE_ACTIVE")
    public static let paused = Self(rawValue: "SUBSCRIPTION_STATE_PAUSED")
    public static let inGracePeriod = Self(rawValue: "SUBSCRIPTION_STATE_IN_GRACE_PERIOD")
    public static let onHold = Self(rawValue: "SUBSCRIPTION_STATE_ON_HOLD")
    /// Auto-renew off (or replaced): still entitled until the line items' `expiryTime`.
    public static let canceled = Self(rawValue: "SUBSCRIPTION_STATE_CANCELED")
    public static let expired = Self(rawValue: "SUBSCRIPTION_STATE_EXPIRED")
    public static let pendingPurchaseCanceled = Self(rawValue: "SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED")
}

/// `acknowledgementState` of the v2 resources (the v1 `ProductPurchase` uses 0/1).
public struct PlayAcknowledgementState: PlayStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let unspecified = Self(rawValue: "ACKNOWLEDGEMENT_STATE_UNSPECIFIED")
    public static let pending = Self(rawValue: "ACKNOWLEDGEMENT_STATE_PENDING")
    public static let acknowledged = Self(rawValue: "ACKNOWLEDGEMENT_STATE_ACKNOWLEDGED")
}

/// `ItemReplacement.replacementMode`: how a plan change takes effect (Play Billing's `ReplacementMode`).
public struct PlayReplacementMode: PlayStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let withTimeProration = Self(rawValue: "WITH_TIME_PRORATION")
    public static let chargeProratedPrice = Self(rawValue: "CHARGE_PRORATED_PRICE")
    public static let withoutProration = Self(rawValue: "WITHOUT_PRORATION")
    public static let chargeFullPrice = Self(rawValue: "CHARGE_FULL_PRICE")
    public static let deferred = Self(rawValue: "DEFERRED")
    public static let keepExisting = Self(rawValue: "KEEP_EXISTING")
    public static let known: [Self] = [.withTimeProration, .chargeProratedPrice, .withoutProration, .chargeFullPrice, .deferred, .keepExisting]
}

/// `ProductPurchaseV2.purchaseStateContext.purchaseState`.
public struct PlayProductPurchaseState: PlayStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let purchased = Self(rawValue: "PURCHASED")
    public static let cancelled = Self(rawValue: "CANCELLED")
    public static let pending = Self(rawValue: "PENDING")
}

/// `ProductOfferDetails.consumptionState`.
public struct PlayConsumptionState: PlayStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let yetToBeConsumed = Self(rawValue: "CONSUMPTION_STATE_YET_TO_BE_CONSUMED")
    public static let consumed = Self(rawValue: "CONSUMPTION_STATE_CONSUMED")
}

/// RTDN `subscriptionNotification.notificationType` (an open set of integers: 14–16 and 21 are unused today).
public struct SubscriptionNotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let recovered = Self(rawValue: 1)
    public static let renewed = Self(rawValue: 2)
    public static let canceled = Self(rawValue: 3)
    public static let purchased = Self(rawValue: 4)
    public static let onHold = Self(rawValue: 5)
    public static let inGracePeriod = Self(rawValue: 6)
    public static let restarted = Self(rawValue: 7)
    /// Deprecated by Google; still defined.
    public static let priceChangeConfirmed = Self(rawValue: 8)
    public static let deferred = Self(rawValue: 9)
    public static let paused = Self(rawValue: 10)
    public static let pauseScheduleChanged = Self(rawValue: 11)
    public static let revoked = Self(rawValue: 12)
    public static let expired = Self(rawValue: 13)
    public static let itemsChanged = Self(rawValue: 17)
    /// Installment plans: a cancellation takes effect once the commitment is paid.
    public static let cancellationScheduled = Self(rawValue: 18)
    public static let priceChangeUpdated = Self(rawValue: 19)
    public static let pendingPurchaseCanceled = Self(rawValue: 20)
    /// South Korea's price step-up consent.
    public static let priceStepUpConsentUpdated = Self(rawValue: 22)

    public static let known: [Self] = [.recovered, .renewed, .canceled, .purchased, .onHold, .inGracePeriod, .restarted,
                                       .priceChangeConfirmed, .deferred, .paused, .pauseScheduleChanged, .revoked, .expired,
                                       .itemsChanged, .cancellationScheduled, .priceChangeUpdated, .pendingPurchaseCanceled,
                                       .priceStepUpConsentUpdated]

    /// Google's name without the `SUBSCRIPTION_` prefix (`RENEWED`), or the number for one not known here.
    public var name: String {
        switch rawValue {
        case 1: "RECOVERED"
        case 2: "RENEWED"
        case 3: "CANCELED"
        case 4: "PURCHASED"
        case 5: "ON_HOLD"
        case 6: "IN_GRACE_PERIOD"
        case 7: "RESTARTED"
        case 8: "PRICE_CHANGE_CONFIRMED"
        case 9: "DEFERRED"
        case 10: "PAUSED"
        case 11: "PAUSE_SCHEDULE_CHANGED"
        case 12: "REVOKED"
        case 13: "EXPIRED"
        case 17: "ITEMS_CHANGED"
        case 18: "CANCELLATION_SCHEDULED"
        case 19: "PRICE_CHANGE_UPDATED"
        case 20: "PENDING_PURCHASE_CANCELED"
        case 22: "PRICE_STEP_UP_CONSENT_UPDATED"
        default: String(rawValue)
        }
    }

    public var description: String { "SUBSCRIPTION_\(name)" }
}

/// RTDN `oneTimeProductNotification.notificationType`.
public struct OneTimeProductNotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let purchased = Self(rawValue: 1)
    /// A pending purchase was cancelled.
    public static let canceled = Self(rawValue: 2)
    public var description: String {
        switch rawValue {
        case 1: "ONE_TIME_PRODUCT_PURCHASED"
        case 2: "ONE_TIME_PRODUCT_CANCELED"
        default: "ONE_TIME_PRODUCT_\(rawValue)"
        }
    }
}

/// `VoidedPurchase.voidedSource`.
public struct PlayVoidedSource: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let user = Self(rawValue: 0)
    public static let developer = Self(rawValue: 1)
    public static let google = Self(rawValue: 2)
}

/// `VoidedPurchase.voidedReason`.
public struct PlayVoidedReason: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let other = Self(rawValue: 0)
    public static let remorse = Self(rawValue: 1)
    public static let notReceived = Self(rawValue: 2)
    public static let defective = Self(rawValue: 3)
    public static let accidentalPurchase = Self(rawValue: 4)
    public static let fraud = Self(rawValue: 5)
    public static let friendlyFraud = Self(rawValue: 6)
    public static let chargeback = Self(rawValue: 7)
    /// Play refunded a purchase the developer never acknowledged within three days.
    public static let unacknowledgedPurchase = Self(rawValue: 8)
}
