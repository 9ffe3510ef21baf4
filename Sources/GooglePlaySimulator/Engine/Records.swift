import KakinCore

/// One purchase token: a one-time purchase or a subscription (one token per purchase; a plan change or a
/// resubscription before lapse makes a new token linked to the old one).
struct PurchaseRecord: Sendable, Hashable, Codable {
    var token: String
    var productId: String
    var kind: PlayProduct.Kind
    /// The first order (`GPA.dddd-dddd-dddd-ddddd`); renewals are `<orderBase>..0`, `..1`, ….
    var orderBase: String
    /// Renewal orders charged so far (the latest order is `..(renewals - 1)`, or `orderBase` when 0).
    var renewals: Int = 0
    var purchaseTimeMs: Int64
    var accountId: String?
    var test: Bool
    var acknowledged = false
    var developerPayload: String?
    /// Set when the purchase was refunded for want of acknowledgement, revoked or refunded whole.
    var voided = false

    // One-time products.
    var quantity = 1
    var refundableQuantity = 1
    var consumed = false

    // Subscriptions.
    var basePlanId: String?
    var offerId: String?
    var inTrial = false
    var state: String = PlaySubscriptionState.active.rawValue
    var expiryMs: Int64 = 0
    var autoRenew = true
    var linkedPurchaseToken: String?
    var replacement: Replacement?
    /// `user`, `system`, `developer` or `replacement` once cancelled.
    var cancellation: String?
    var cancelTimeMs: Int64?
    /// The next renewal charge fails (until `recover`).
    var billingFails = false
    /// When the failed renewal was due (the grace and hold are counted from it).
    var failedRenewalMs: Int64?
    var graceEndMs: Int64?
    var holdEndMs: Int64?
    /// A pause: scheduled (starts at `startMs`, the end of the paid period) or running until `resumeMs`.
    var pause: Pause?
    /// When the purchase stopped (expired, revoked): the token answers 410 sixty days later.
    var endedMs: Int64?

    struct Replacement: Sendable, Hashable, Codable {
        var productId: String
        var basePlanId: String?
        var offerId: String?
        var mode: String
    }

    struct Pause: Sendable, Hashable, Codable {
        var startMs: Int64
        var resumeMs: Int64
        var started: Bool
    }

    var subscriptionState: PlaySubscriptionState { PlaySubscriptionState(rawValue: state) }
    var latestOrderId: String { renewals == 0 ? orderBase : "\(orderBase)..\(renewals - 1)" }
    var isSubscription: Bool { kind == .subscription }
}

/// An order: the first charge of a purchase or one renewal.
struct OrderRecord: Sendable, Hashable, Codable {
    var orderId: String
    var token: String
    var timeMs: Int64
    var quantity: Int
    var refundedQuantity = 0
    /// What the buyer was charged (`orders.get`'s `total`), micros of `currency` (nil in a state saved before orders had it).
    var priceMicros: Int64?
    var currency: String?
}

/// A voided purchase as `voidedpurchases.list` answers it.
struct VoidedRecord: Sendable, Hashable, Codable {
    var token: String
    var orderId: String
    var purchaseTimeMs: Int64
    var voidedTimeMs: Int64
    var source: Int
    var reason: Int
    /// Set for a quantity-based partial refund.
    var quantity: Int?
    /// 1 subscription, 2 one-time (the RTDN's `productType`).
    var productType: Int

    var json: JSONValue {
        var o: [String: JSONValue] = ["kind": "androidpublisher#voidedPurchase", "purchaseToken": .string(token), "orderId": .string(orderId),
                                      "purchaseTimeMillis": .string(String(purchaseTimeMs)), "voidedTimeMillis": .string(String(voidedTimeMs)),
                                      "voidedSource": .int(Int64(source)), "voidedReason": .int(Int64(reason))]
        if let quantity { o["voidedQuantity"] = .int(Int64(quantity)) }
        return .object(o)
    }
}

/// One RTDN: the `DeveloperNotification` published, and each push attempt.
struct NotificationRecord: Sendable, Hashable, Codable {
    var messageId: String
    /// The `DeveloperNotification` JSON, as published (the push's base64 `data`).
    var data: String
    /// `SUBSCRIPTION_RENEWED`, `ONE_TIME_PRODUCT_PURCHASED`, `VOIDED_PURCHASE`, `TEST_NOTIFICATION`.
    var summary: String
    var purchaseToken: String?
    var publishTimeMs: Int64
    var attempts: [Attempt] = []
    /// When the next push is due; nil once acknowledged (2xx) or given up.
    var nextAttemptMs: Int64?
    var inFlight = false

    struct Attempt: Sendable, Hashable, Codable {
        var atMs: Int64
        /// The HTTP status the push endpoint answered, or 0 for no answer.
        var status: Int
    }

    var delivered: Bool { attempts.last.map { PlayPushStatus.acknowledges($0.status) } ?? false }
}

/// Pub/Sub's rule for push endpoints: 102, 200, 201, 202 and 204 acknowledge; anything else is redelivered.
public enum PlayPushStatus {
    public static func acknowledges(_ status: Int) -> Bool { [102, 200, 201, 202, 204].contains(status) }
}
