import Foundation

// Kakin's JSON bodies (the contract's HTTP API v1), decoded here because KakinKit cannot depend on the
// server's package. Enumerated values keep the raw string beside a typed view, so a value a newer Kakin
// adds never breaks an older app.

/// `GET /v1/customers/{id}`: who the customer is at launch (proactive restore, seed 004).
public struct CustomerStatus: Sendable, Equatable, Codable {
    public var customerId: String
    /// Pass it to every purchase (`StorePurchaseOptions.appAccountToken`).
    public var appAccountToken: String?
    /// `new`, `active` or `inactive` (raw).
    public var status: String
    public var subscriptions: [Subscription]
    public var nonConsumables: [NonConsumable]
    public var nonRenewing: [NonRenewing]
    public var wallet: Wallet
    public var eligibility: Eligibility?
    /// The customer's last event `sequence` when this status was read (0 before any event; nil from a Kakin older
    /// than events). Every change that reaches the customer raises it, and the event that told your backend about
    /// the change carries the same number: a status with a higher version is the newer one, so the app and the
    /// backend can tell which of two reads is current (`isNewer(than:)`).
    public var version: Int64?

    public enum Kind: String, Sendable {
        /// Never had an entitlement: show the shop.
        case new
        /// Something is active now: unlock, hide "buy".
        case active
        /// Had one, none active: a win-back offer, or "update your payment method" in billing retry.
        case inactive
        /// A value this version of KakinKit does not know.
        case unknown
    }

    public var kind: Kind { Kind(rawValue: status) ?? .unknown }

    /// Whether this status reflects changes `other` does not (a higher `version`). False when either lacks a version.
    public func isNewer(than other: CustomerStatus) -> Bool {
        guard let mine = version, let theirs = other.version else { return false }
        return mine > theirs
    }

    /// For an app's own tests and fakes; the app gets real ones from `Backend`.
    public init(customerId: String, appAccountToken: String?, status: String, subscriptions: [Subscription] = [],
                nonConsumables: [NonConsumable] = [], nonRenewing: [NonRenewing] = [], wallet: Wallet, eligibility: Eligibility? = nil, version: Int64? = nil) {
        self.customerId = customerId
        self.appAccountToken = appAccountToken
        self.status = status
        self.subscriptions = subscriptions
        self.nonConsumables = nonConsumables
        self.nonRenewing = nonRenewing
        self.wallet = wallet
        self.eligibility = eligibility
        self.version = version
    }

    public struct Subscription: Sendable, Equatable, Codable {
        public var groupId: String?
        public var productId: String
        public var originalTransactionId: String
        /// `subscribed`, `inGracePeriod`, `inBillingRetryPeriod`, `expired` or `revoked`.
        public var state: String
        public var expiresAt: String?
        public var gracePeriodExpiresAt: String?
        public var willAutoRenew: Bool?
        public var autoRenewProductId: String?
        public var ownership: String?
        public var offer: Offer?
        public var pendingOffer: Offer?
        public var expirationReason: String?
        /// Win-back offers the customer can redeem now (lapsed subscribers).
        public var eligibleWinBackOfferIds: [String]?

        /// The app should keep the service on (subscribed, or in the grace period while billing is retried).
        public var isEntitled: Bool { state == "subscribed" || state == "inGracePeriod" }
        /// Billing failed: nag gently ("update your payment method") instead of cutting the service.
        public var hasBillingIssue: Bool { state == "inGracePeriod" || state == "inBillingRetryPeriod" }

        public init(groupId: String?, productId: String, originalTransactionId: String, state: String, expiresAt: String? = nil,
                    gracePeriodExpiresAt: String? = nil, willAutoRenew: Bool? = nil, autoRenewProductId: String? = nil,
                    ownership: String? = nil, offer: Offer? = nil, pendingOffer: Offer? = nil, expirationReason: String? = nil,
                    eligibleWinBackOfferIds: [String]? = nil) {
            self.groupId = groupId
            self.productId = productId
            self.originalTransactionId = originalTransactionId
            self.state = state
            self.expiresAt = expiresAt
            self.gracePeriodExpiresAt = gracePeriodExpiresAt
            self.willAutoRenew = willAutoRenew
            self.autoRenewProductId = autoRenewProductId
            self.ownership = ownership
            self.offer = offer
            self.pendingOffer = pendingOffer
            self.expirationReason = expirationReason
            self.eligibleWinBackOfferIds = eligibleWinBackOfferIds
        }
    }

    public struct Offer: Sendable, Equatable, Codable {
        public var type: String
        public var id: String?
        public var period: String?

        public init(type: String, id: String?, period: String? = nil) {
            self.type = type
            self.id = id
            self.period = period
        }
    }

    public struct NonConsumable: Sendable, Equatable, Codable {
        public var productId: String
        public var transactionId: String
        public var ownership: String?

        public init(productId: String, transactionId: String, ownership: String? = nil) {
            self.productId = productId
            self.transactionId = transactionId
            self.ownership = ownership
        }
    }

    public struct NonRenewing: Sendable, Equatable, Codable {
        public var productId: String
        public var expiresAt: String?
        public var active: Bool

        public init(productId: String, expiresAt: String?, active: Bool) {
            self.productId = productId
            self.expiresAt = expiresAt
            self.active = active
        }
    }

    public struct Eligibility: Sendable, Equatable, Codable {
        /// Subscription group → whether an introductory offer would really apply (Kakin's answer wins over
        /// StoreKit's `isEligibleForIntroOffer`, which cannot see an active subscription on another device).
        public var introductoryOffer: [String: Bool]?

        public init(introductoryOffer: [String: Bool]?) {
            self.introductoryOffer = introductoryOffer
        }
    }
}

/// `GET /v1/customers/{id}/wallet`: coins, paid and free kept apart.
public struct Wallet: Sendable, Equatable, Codable {
    public var paid: Int64
    public var free: Int64
    public var total: Int64

    public init(paid: Int64, free: Int64, total: Int64) {
        self.paid = paid
        self.free = free
        self.total = total
    }
}

/// What Kakin granted for a transaction: coins for a consumable, an entitlement otherwise.
public struct Grant: Sendable, Equatable, Codable {
    public var coins: Coins?
    public var entitlement: Entitlement?

    public struct Coins: Sendable, Equatable, Codable {
        public var paid: Int64
        public var free: Int64

        public init(paid: Int64, free: Int64) {
            self.paid = paid
            self.free = free
        }
    }

    public struct Entitlement: Sendable, Equatable, Codable {
        public var productId: String
        public var type: String?
        public var originalTransactionId: String?
        public var expiresAt: String?

        public init(productId: String, type: String?, originalTransactionId: String?, expiresAt: String?) {
            self.productId = productId
            self.type = type
            self.originalTransactionId = originalTransactionId
            self.expiresAt = expiresAt
        }
    }

    public init(coins: Coins? = nil, entitlement: Entitlement? = nil) {
        self.coins = coins
        self.entitlement = entitlement
    }
}

/// Kakin's answer to `POST /v1/customers/{id}/transactions` when it holds the transaction as applied.
public struct Submission: Sendable, Equatable {
    public var transactionID: String
    /// 201 (applied now) or 409 (applied before, by any path: a notification, a restore, an earlier try).
    public var httpStatus: Int
    public var grant: Grant?
    /// The customer's status after the grant (wallet included), when Kakin sent it.
    public var customer: CustomerStatus?

    public init(transactionID: String, httpStatus: Int, grant: Grant?, customer: CustomerStatus?) {
        self.transactionID = transactionID
        self.httpStatus = httpStatus
        self.grant = grant
        self.customer = customer
    }
}

/// `GET /v1/customers/{id}/offerings?placement=…&platform=ios`: what a placement's paywall shows this customer, decided
/// by Kakin (targeting rules, or the customer's experiment variant), so a paywall changes without an app update.
public struct PaywallOffering: Sendable, Equatable, Codable {
    public var placement: String
    public var offering: Offering
    /// The experiment and variant the customer is enrolled in here (nil when none).
    public var experiment: Enrollment?

    public struct Offering: Sendable, Equatable, Codable {
        public var id: String
        /// The packages the App Store sells, in the order to show them.
        public var packages: [Package]
        /// Free-form: copy, colours, which package to highlight (whatever your paywall reads).
        public var metadata: PaywallMetadata?
    }

    public struct Package: Sendable, Equatable, Codable {
        /// `monthly`, `annual`, `coins_small`… (the offering's names).
        public var id: String
        /// The App Store product to load and buy (`PurchaseCoordinator.products`, `purchase`).
        public var productId: String
    }

    public struct Enrollment: Sendable, Equatable, Codable {
        public var id: String
        public var variant: String
    }
}

/// An offering's free-form `metadata`, any JSON.
public indirect enum PaywallMetadata: Sendable, Equatable, Codable {
    case string(String), number(Double), bool(Bool), null, array([PaywallMetadata]), object([String: PaywallMetadata])

    public init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null }
        else if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let n = try? c.decode(Double.self) { self = .number(n) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else if let a = try? c.decode([PaywallMetadata].self) { self = .array(a) }
        else { self = .object(try c.decode([String: PaywallMetadata].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.singleValueContainer()
        switch self {
        case .string(let s): try c.encode(s)
        case .number(let n): try c.encode(n)
        case .bool(let b): try c.encode(b)
        case .null: try c.encodeNil()
        case .array(let a): try c.encode(a)
        case .object(let o): try c.encode(o)
        }
    }

    public subscript(key: String) -> PaywallMetadata? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }
}
