import KakinCore

/// A subscription status as the provider names it. Stripe's values: `incomplete`, `incomplete_expired`,
/// `trialing`, `active`, `past_due`, `canceled`, `unpaid`, `paused`. A struct over the raw string so that a value
/// added tomorrow is kept, not refused.
public struct ExternalSubscriptionStatus: AppleStringValue {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let incomplete = Self(rawValue: "incomplete")
    public static let incompleteExpired = Self(rawValue: "incomplete_expired")
    public static let trialing = Self(rawValue: "trialing")
    public static let active = Self(rawValue: "active")
    public static let pastDue = Self(rawValue: "past_due")
    public static let canceled = Self(rawValue: "canceled")
    public static let unpaid = Self(rawValue: "unpaid")
    public static let paused = Self(rawValue: "paused")

    /// A Stripe subscription in one of these never comes back (a new subscription would have a new id).
    public var isTerminal: Bool { self == .canceled || self == .incompleteExpired }

    /// Whether the customer has the entitlement during the current period: paid or trial periods, and
    /// `past_due` while Stripe retries (like the App Store's grace period; Kakin's status shows the billing issue).
    public var grantsAccess: Bool { self == .active || self == .trialing || self == .pastDue }

    /// Tie-break among observations made in the same second with the same period end: later stages of a
    /// payment rank higher (incomplete → past due → trialing → active).
    var rank: Int {
        switch self {
        case .incomplete: return 0
        case .pastDue, .unpaid, .paused: return 1
        case .trialing: return 2
        case .active: return 3
        default: return 0
        }
    }
}

/// What one provider event says about a subscription: the subscription's own state as the event carries it.
/// Fields the event does not know are nil (an invoice knows the period it paid, not `cancel_at_period_end`).
public struct ExternalSubscriptionObservation: Sendable, Hashable {
    public var provider: String
    public var subscriptionId: String
    public var customerId: String?
    public var productId: String?
    public var status: ExternalSubscriptionStatus?
    public var currentPeriodStartMs: Int64?
    public var currentPeriodEndMs: Int64?
    public var cancelAtPeriodEnd: Bool?
    /// When the subscription ended (Stripe's `ended_at`), for ended ones.
    public var endedAtMs: Int64?
    /// When the provider made the event (Stripe's `created`, unix seconds).
    public var observedAtSeconds: Int64
    /// The event's id: the last tie-break, and what storage dedupes on.
    public var eventId: String

    public init(provider: String, subscriptionId: String, customerId: String? = nil, productId: String? = nil,
                status: ExternalSubscriptionStatus? = nil, currentPeriodStartMs: Int64? = nil, currentPeriodEndMs: Int64? = nil,
                cancelAtPeriodEnd: Bool? = nil, endedAtMs: Int64? = nil, observedAtSeconds: Int64, eventId: String) {
        self.provider = provider
        self.subscriptionId = subscriptionId
        self.customerId = customerId
        self.productId = productId
        self.status = status
        self.currentPeriodStartMs = currentPeriodStartMs
        self.currentPeriodEndMs = currentPeriodEndMs
        self.cancelAtPeriodEnd = cancelAtPeriodEnd
        self.endedAtMs = endedAtMs
        self.observedAtSeconds = observedAtSeconds
        self.eventId = eventId
    }

    /// The total order in which observations of one subscription supersede each other: the event's time, then
    /// (same second) the later period, then the later payment stage, then the event id. Never arrival order.
    public var orderKey: OrderKey {
        OrderKey(observedAtSeconds: observedAtSeconds, periodEndMs: currentPeriodEndMs ?? Int64.min, statusRank: status?.rank ?? -1,
                 eventId: eventId)
    }

    public struct OrderKey: Sendable, Hashable, Comparable {
        public var observedAtSeconds: Int64
        public var periodEndMs: Int64
        public var statusRank: Int
        public var eventId: String

        public static func < (a: OrderKey, b: OrderKey) -> Bool {
            (a.observedAtSeconds, a.periodEndMs, a.statusRank, a.eventId) < (b.observedAtSeconds, b.periodEndMs, b.statusRank, b.eventId)
        }
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "provider": .string(provider), "subscriptionId": .string(subscriptionId), "observedAt": .int(observedAtSeconds),
            "eventId": .string(eventId),
        ]
        if let customerId { o["customerId"] = .string(customerId) }
        if let productId { o["productId"] = .string(productId) }
        if let status { o["status"] = .string(status.rawValue) }
        if let currentPeriodStartMs { o["currentPeriodStartMs"] = .int(currentPeriodStartMs) }
        if let currentPeriodEndMs { o["currentPeriodEndMs"] = .int(currentPeriodEndMs) }
        if let cancelAtPeriodEnd { o["cancelAtPeriodEnd"] = .bool(cancelAtPeriodEnd) }
        if let endedAtMs { o["endedAtMs"] = .int(endedAtMs) }
        return .object(o)
    }

    /// Reads back what `json` wrote (storage keeps observations as JSON).
    public init?(json: JSONValue) {
        guard let provider = json["provider"]?.stringValue, let id = json["subscriptionId"]?.stringValue,
              case .int(let observed)? = json["observedAt"], let eventId = json["eventId"]?.stringValue else { return nil }
        self.init(provider: provider, subscriptionId: id, customerId: json["customerId"]?.stringValue,
                  productId: json["productId"]?.stringValue, status: json["status"]?.stringValue.map(ExternalSubscriptionStatus.init(rawValue:)),
                  currentPeriodStartMs: json["currentPeriodStartMs"]?.int64Value, currentPeriodEndMs: json["currentPeriodEndMs"]?.int64Value,
                  cancelAtPeriodEnd: json["cancelAtPeriodEnd"]?.boolValue, endedAtMs: json["endedAtMs"]?.int64Value,
                  observedAtSeconds: observed, eventId: eventId)
    }
}

/// A subscription's state decided from every observation of it, whatever order they arrived in: each field is
/// the value of the highest-ranked observation that knows it (`OrderKey`), and an ended subscription stays ended
/// (an ending observation outranks every other for the status). Merging is commutative, associative and
/// idempotent, so any permutation of a subscription's events — with duplicates — gives the same state.
public struct ExternalSubscriptionState: Sendable, Hashable {
    public let provider: String
    public let subscriptionId: String

    struct Field<Value: Hashable & Sendable>: Hashable, Sendable {
        var value: Value
        var key: ExternalSubscriptionObservation.OrderKey
    }

    var customer: Field<String>?
    var product: Field<String>?
    /// Keyed with `terminalFirst` so that an ending wins over any later-dated non-ending observation.
    var statusField: Field<ExternalSubscriptionStatus>?
    var statusIsTerminal = false
    var periodStart: Field<Int64>?
    var periodEnd: Field<Int64>?
    var cancel: Field<Bool>?
    var ended: Field<Int64>?
    var newest: ExternalSubscriptionObservation.OrderKey

    public init(_ first: ExternalSubscriptionObservation) {
        provider = first.provider
        subscriptionId = first.subscriptionId
        newest = first.orderKey
        absorb(first)
    }

    /// The state after every observation (nil for none). All must be of one subscription.
    public static func merge(_ observations: some Sequence<ExternalSubscriptionObservation>) -> ExternalSubscriptionState? {
        var state: ExternalSubscriptionState?
        for o in observations {
            if state == nil { state = ExternalSubscriptionState(o) } else { state!.absorb(o) }
        }
        return state
    }

    /// The same as merging this state's observations together with `observation`.
    public func merging(_ observation: ExternalSubscriptionObservation) -> ExternalSubscriptionState {
        var s = self
        s.absorb(observation)
        return s
    }

    public mutating func absorb(_ o: ExternalSubscriptionObservation) {
        precondition(o.provider == provider && o.subscriptionId == subscriptionId, "observations of another subscription")
        let key = o.orderKey
        if newest < key { newest = key }
        func take<V>(_ field: inout Field<V>?, _ value: V?) {
            guard let value else { return }
            if let current = field, !(current.key < key) { return }
            field = Field(value: value, key: key)
        }
        take(&customer, o.customerId)
        take(&product, o.productId)
        take(&periodStart, o.currentPeriodStartMs)
        take(&periodEnd, o.currentPeriodEndMs)
        take(&cancel, o.cancelAtPeriodEnd)
        take(&ended, o.endedAtMs)
        if let status = o.status {
            let terminal = status.isTerminal
            if statusField == nil || (terminal && !statusIsTerminal) || (terminal == statusIsTerminal && statusField!.key < key) {
                statusField = Field(value: status, key: key)
                statusIsTerminal = terminal
            }
        }
    }

    public var customerId: String? { customer?.value }
    public var productId: String? { product?.value }
    /// nil until an observation carried a status.
    public var status: ExternalSubscriptionStatus? { statusField?.value }
    public var currentPeriodStartMs: Int64? { periodStart?.value }
    public var currentPeriodEndMs: Int64? { periodEnd?.value }
    public var cancelAtPeriodEnd: Bool { cancel?.value ?? false }
    public var endedAtMs: Int64? { ended?.value }
    /// Ended for good (canceled, or never paid and expired), or carrying an end date.
    public var isEnded: Bool { statusIsTerminal || ended != nil }
    /// Unix seconds of the newest observation.
    public var lastObservedAtSeconds: Int64 { newest.observedAtSeconds }
    public var lastEventId: String { newest.eventId }

    /// When the entitlement this subscription gives ends: the end date for an ended one (or its period end),
    /// the current period's end while it grants access, nil while it grants none (incomplete, unpaid, paused).
    public var expiresAtMs: Int64? {
        if isEnded { return endedAtMs ?? currentPeriodEndMs }
        guard let status, status.grantsAccess else { return nil }
        return currentPeriodEndMs
    }

    /// Whether the customer has the entitlement at `ms`.
    public func isActive(atMs ms: Int64) -> Bool {
        guard let expiresAtMs else { return false }
        return ms < expiresAtMs
    }

    /// For answers and the support desk.
    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "provider": .string(provider), "subscriptionId": .string(subscriptionId), "cancelAtPeriodEnd": .bool(cancelAtPeriodEnd),
            "ended": .bool(isEnded), "lastEventId": .string(lastEventId),
        ]
        if let customerId { o["customerId"] = .string(customerId) }
        if let productId { o["productId"] = .string(productId) }
        if let status { o["status"] = .string(status.rawValue) }
        if let currentPeriodEndMs { o["currentPeriodEnd"] = .string(Timestamp.rfc3339(currentPeriodEndMs)) }
        if let endedAtMs { o["endedAt"] = .string(Timestamp.rfc3339(endedAtMs)) }
        if let expiresAtMs { o["expiresAt"] = .string(Timestamp.rfc3339(expiresAtMs)) }
        return .object(o)
    }
}
