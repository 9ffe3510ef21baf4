// Apple's Retention Messaging API: when a subscriber opens the cancel flow, the App Store asks the app's
// Get Retention Message endpoint which retention message to show. The answer (`RealtimeResponseBody`) is one
// of three mutually exclusive kinds: a `message`, an `alternateProduct` (a switch-plan message), or a
// `promotionalOffer` (a message and a signed offer). Apple waits about 700 ms (its performance test's
// `responseTimeThreshold`); past that, or on any failure, it shows the default message configured for the
// product and locale. Which answer Kakin gives is the app's `retentionMessaging` rules' choice, decided here:
// pure, from the request's product and the customer's status and history.

/// An app's `retentionMessaging` config: `{"rules": [{"productIds"?, "messageId"?, "offerId"?,
/// "alternateProductId"?}], "defaultMessageId"?}`.
public struct RetentionMessagingConfig: Sendable, Hashable {
    public struct Rule: Sendable, Hashable {
        /// The products (the subscription being cancelled) the rule applies to; nil: every product.
        public var productIds: [String]?
        /// The message to show (Apple's `messageIdentifier`, a UUID of a message uploaded with Upload Message).
        public var messageId: String?
        /// A promotional offer to sign and offer, on `alternateProductId` when given, else on the product being cancelled.
        public var offerId: String?
        /// A product of the same group to suggest instead (a switch-plan message).
        public var alternateProductId: String?

        public init(productIds: [String]? = nil, messageId: String? = nil, offerId: String? = nil, alternateProductId: String? = nil) {
            self.productIds = productIds
            self.messageId = messageId
            self.offerId = offerId
            self.alternateProductId = alternateProductId
        }

        public func applies(to productId: String) -> Bool { productIds.map { $0.contains(productId) } ?? true }
    }

    public var rules: [Rule]
    /// The message when no rule answers.
    public var defaultMessageId: String?

    public init(rules: [Rule] = [], defaultMessageId: String? = nil) {
        self.rules = rules
        self.defaultMessageId = defaultMessageId
    }

    /// Checks the config against the catalog: each rule says something (a message, an offer or an alternate
    /// product), its products, offers and alternates exist, an alternate is an auto-renewable product, and
    /// message ids are UUIDs (Apple's `messageIdentifier`). `path` names the config key in errors.
    public func validate(catalog: Catalog, path: String) throws(ConfigurationError) {
        guard rules.count <= Self.rulesMax else { throw ConfigurationError(path + ".rules", "has more than \(Self.rulesMax) rules") }
        if let d = defaultMessageId, !UUIDText.isValid(d) { throw ConfigurationError(path + ".defaultMessageId", "must be a UUID (Apple's messageIdentifier)") }
        for (i, rule) in rules.enumerated() {
            let at = path + ".rules[\(i)]"
            guard rule.messageId != nil || rule.offerId != nil || rule.alternateProductId != nil else {
                throw ConfigurationError(at, "needs messageId, offerId or alternateProductId")
            }
            if let m = rule.messageId, !UUIDText.isValid(m) { throw ConfigurationError(at + ".messageId", "must be a UUID (Apple's messageIdentifier)") }
            if let ids = rule.productIds {
                guard !ids.isEmpty, ids.count <= Self.productIdsMax else {
                    throw ConfigurationError(at + ".productIds", "must list 1 to \(Self.productIdsMax) products")
                }
                for id in ids where catalog[id]?.kind != .autoRenewable {
                    throw ConfigurationError(at + ".productIds", "\(id) is not an auto-renewable product of the catalog")
                }
            }
            if let alt = rule.alternateProductId, catalog[alt]?.kind != .autoRenewable {
                throw ConfigurationError(at + ".alternateProductId", "\(alt) is not an auto-renewable product of the catalog")
            }
            if let offer = rule.offerId {
                let candidates = rule.alternateProductId.map { [$0] } ?? rule.productIds ?? catalog.sortedProducts.map(\.productId)
                guard candidates.contains(where: { catalog[$0]?.promotionalOffer(id: offer) != nil }) else {
                    throw ConfigurationError(at + ".offerId", "\(offer) is not a promotional offer of the rule's product")
                }
            }
        }
    }

}

/// What Kakin answers the App Store, before signing: the three kinds of `RealtimeResponseBody`, or nothing
/// (the App Store then shows the product's default message).
public enum RetentionAnswer: Sendable, Hashable {
    case message(messageId: String)
    case alternateProduct(productId: String, messageId: String?)
    /// Signed by the caller (promotional offer V2 JWS whose `transactionId` is the request's
    /// `originalTransactionId`, as Apple requires in this reply).
    case promotionalOffer(productId: String, offerId: String, messageId: String?)
    case none

    /// A name for logs and the desk.
    public var kind: String {
        switch self {
        case .message: return "message"
        case .alternateProduct: return "alternateProduct"
        case .promotionalOffer: return "promotionalOffer"
        case .none: return "none"
        }
    }
}

public enum RetentionMessaging {
    /// The facts of one Get Retention Message request.
    public struct Facts: Sendable {
        /// The subscription being cancelled: the request's `productId` and `originalTransactionId`.
        public var productId: String
        public var originalTransactionId: String
        /// The customer's status and the history it came from (empty when Kakin doesn't know the customer).
        public var status: CustomerStatus
        public var history: CustomerHistory
        public var catalog: Catalog
        /// The app's `offerRules` by offer id (an offer without a rule is for current or lapsed subscribers).
        public var offerRules: [String: OfferRule]

        public init(productId: String, originalTransactionId: String, status: CustomerStatus, history: CustomerHistory, catalog: Catalog,
                    offerRules: [String: OfferRule] = [:]) {
            self.productId = productId
            self.originalTransactionId = originalTransactionId
            self.status = status
            self.history = history
            self.catalog = catalog
            self.offerRules = offerRules
        }
    }

    /// The first rule, in order, that applies to the product and can be honoured for this customer answers:
    /// - a rule with `offerId`: the offer (on `alternateProductId`, else the product being cancelled) when the
    ///   product has it and the app's offer rule lets this customer have it (`OfferRules.refusal`, the rule that
    ///   decides every signature Kakin makes); otherwise the rule is skipped;
    /// - a rule with `alternateProductId` (no offer): that product, when it is another product of the same
    ///   group; otherwise skipped;
    /// - a rule with only `messageId`: that message.
    /// No rule answering: `defaultMessageId` as a message, else `.none`.
    public static func choose(_ config: RetentionMessagingConfig, facts: Facts) -> (answer: RetentionAnswer, ruleIndex: Int?) {
        let current = facts.catalog[facts.productId]
        for (i, rule) in config.rules.enumerated() where rule.applies(to: facts.productId) {
            let message = rule.messageId
            if let offerId = rule.offerId {
                let productId = rule.alternateProductId ?? facts.productId
                guard let product = facts.catalog[productId], product.promotionalOffer(id: offerId) != nil,
                      let group = product.groupId, current == nil || current?.groupId == group else { continue }
                let offerRule = facts.offerRules[offerId] ?? OfferRule(offerId: offerId)
                if OfferRules.refusal(rule: offerRule, groupId: group, status: facts.status, history: facts.history,
                                      catalog: facts.catalog) != nil { continue }
                return (.promotionalOffer(productId: productId, offerId: offerId, messageId: message), i)
            }
            if let alternate = rule.alternateProductId {
                guard alternate != facts.productId, let product = facts.catalog[alternate], product.kind == .autoRenewable,
                      let current, product.groupId == current.groupId else { continue }
                return (.alternateProduct(productId: alternate, messageId: message), i)
            }
            if let message { return (.message(messageId: message), i) }
        }
        if let d = config.defaultMessageId { return (.message(messageId: d), nil) }
        return (.none, nil)
    }
}
