/// The contract's event types ("Events out"), with their exact names on the wire.
public enum EventType: String, Sendable, CaseIterable, Hashable {
    case customerCreated = "customer.created"
    case customerTransferred = "customer.transferred"
    case coinsCredited = "coins.credited"
    case coinsSpent = "coins.spent"
    case coinsGranted = "coins.granted"
    case coinsClawedBack = "coins.clawed_back"
    case purchaseRefunded = "purchase.refunded"
    case entitlementGranted = "entitlement.granted"
    case entitlementRevoked = "entitlement.revoked"
    case subscriptionStarted = "subscription.started"
    case subscriptionRenewed = "subscription.renewed"
    case subscriptionPlanChanged = "subscription.plan_changed"
    case subscriptionOfferRedeemed = "subscription.offer_redeemed"
    case subscriptionAutoRenewChanged = "subscription.auto_renew_changed"
    case subscriptionBillingIssue = "subscription.billing_issue"
    case subscriptionRecovered = "subscription.recovered"
    case subscriptionExtended = "subscription.extended"
    case subscriptionExpired = "subscription.expired"
    case subscriptionRevoked = "subscription.revoked"
    case consentRescinded = "consent.rescinded"
    case externalPurchaseReported = "external_purchase.reported"
    case notificationDead = "notification.dead"
}

/// Which event types a webhook endpoint (config `types`) or a feed read (`?types=`) takes: exact names, prefixes
/// ending in `.*` (`subscription.*`), or `*`. A name that is no event type, or a prefix that matches none, is refused
/// rather than silently never matching.
public struct EventTypeFilter: Sendable, Hashable {
    /// Why a filter was refused: the pattern (its index in the list) and a sentence.
    public struct Invalid: Error, Sendable, Equatable {
        public var index: Int
        public var message: String
    }

    /// Every type the filter admits.
    public let admitted: Set<EventType>

    /// Every type.
    public static let all = EventTypeFilter(admitted: Set(EventType.allCases))

    init(admitted: Set<EventType>) { self.admitted = admitted }

    public init(patterns: [String]) throws(Invalid) {
        guard !patterns.isEmpty else { throw Invalid(index: 0, message: "must list at least one event type (or \"*\")") }
        guard patterns.count <= Self.patternsMax else { throw Invalid(index: Self.patternsMax, message: "lists more than \(Self.patternsMax) patterns") }
        var admitted = Set<EventType>()
        for (i, pattern) in patterns.enumerated() {
            if pattern == "*" {
                admitted.formUnion(EventType.allCases)
            } else if pattern.hasSuffix(".*"), pattern.utf8.count > 2, pattern.utf8.count <= 100 {
                let prefix = String(pattern.dropLast())
                let matching = EventType.allCases.filter { $0.rawValue.hasPrefix(prefix) }
                guard !matching.isEmpty else { throw Invalid(index: i, message: "\(pattern) matches no event type") }
                admitted.formUnion(matching)
            } else if let type = EventType(rawValue: pattern) {
                admitted.insert(type)
            } else {
                throw Invalid(index: i, message: "\(pattern.prefix(100)) is not an event type (exact names, a prefix ending in .*, or *)")
            }
        }
        self.admitted = admitted
    }

    /// The feed's `types=` parameter: patterns separated by commas.
    public init(query: String) throws(Invalid) {
        guard query.utf8.count <= 4096 else { throw Invalid(index: 0, message: "types is longer than 4096 characters") }
        try self.init(patterns: query.split(separator: ",", omittingEmptySubsequences: false).map { String($0) })
    }

    public func admits(_ type: EventType) -> Bool { admitted.contains(type) }

    /// The admitted types' names, as storage filters on them.
    public var admittedNames: Set<String> { Set(admitted.map(\.rawValue)) }
}
