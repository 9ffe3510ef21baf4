import KakinCore

/// A store a package names a product in (the contract's package keys).
public enum PaywallStore: String, Sendable, CaseIterable, Hashable {
    case appStore, googlePlay, web
}

/// Where the app asking runs (`?platform=`), and so which store's product each package answers.
public enum Platform: String, Sendable, CaseIterable, Hashable {
    case ios, android, web

    public var store: PaywallStore {
        switch self {
        case .ios: .appStore
        case .android: .googlePlay
        case .web: .web
        }
    }
}

/// The three kinds of object the admin API edits, with their path segment (`/v1/admin/offerings/{id}`…).
public enum OfferingObjectKind: String, Sendable, CaseIterable, Hashable {
    case offering, placement, experiment

    public var pathSegment: String { rawValue + "s" }

    /// The 422 for a malformed body (or id) of this kind.
    public var invalid: ErrorKind {
        switch self {
        case .offering: .offeringInvalid
        case .placement: .placementInvalid
        case .experiment: .experimentInvalid
        }
    }

    /// The 404 for an id of this kind that does not exist.
    public var notFound: ErrorKind {
        switch self {
        case .offering: .offeringNotFound
        case .placement: .placementNotFound
        case .experiment: .experimentNotFound
        }
    }
}

/// One package of an offering: its id (`monthly`, `annual`, `coins_small`…) and the product it sells in each store.
public struct OfferingPackage: Sendable, Hashable {
    public var id: String
    public var products: [PaywallStore: String]

    public init(id: String, products: [PaywallStore: String]) {
        self.id = id
        self.products = products
    }
}

/// A named set of packages plus free-form `metadata` the app's paywall renders (copy, colours, which to highlight).
public struct Offering: Sendable, Hashable {
    public var id: String
    public var packages: [OfferingPackage]
    /// A JSON object, or nil when none was given.
    public var metadata: JSONValue?

    public init(id: String, packages: [OfferingPackage], metadata: JSONValue? = nil) {
        self.id = id
        self.packages = packages
        self.metadata = metadata
    }

    /// The packages a platform can buy (those naming a product in its store), each with that product.
    public func packages(for platform: Platform) -> [(id: String, productId: String)] {
        packages.compactMap { p in p.products[platform.store].map { (p.id, $0) } }
    }
}

/// What a targeting rule asks of the customer and the app; every condition given must hold (none given: always).
public struct RuleConditions: Sendable, Hashable {
    public var platform: Platform?
    /// ISO 3166-1 alpha-2 codes, upper case; the app's `country` must be one of them.
    public var countries: Set<String>?
    /// Inclusive bounds on the app's version.
    public var appVersionMin: AppVersion?
    public var appVersionMax: AppVersion?
    /// The customer's `new` / `active` / `inactive` (the status engine's).
    public var status: CustomerState?
    /// Attributes the customer's backend set, each equal.
    public var attributes: [String: String]

    public init(platform: Platform? = nil, countries: Set<String>? = nil, appVersionMin: AppVersion? = nil, appVersionMax: AppVersion? = nil,
                status: CustomerState? = nil, attributes: [String: String] = [:]) {
        self.platform = platform
        self.countries = countries
        self.appVersionMin = appVersionMin
        self.appVersionMax = appVersionMax
        self.status = status
        self.attributes = attributes
    }
}

public struct PlacementRule: Sendable, Hashable {
    public var when: RuleConditions
    public var offering: String

    public init(when: RuleConditions, offering: String) {
        self.when = when
        self.offering = offering
    }
}

/// Where the app shows a paywall (`onboarding`, `settings`, `out_of_coins`): rules in order, the first that matches
/// names the offering, else `defaultOffering`.
public struct Placement: Sendable, Hashable {
    public var id: String
    public var rules: [PlacementRule]
    public var defaultOffering: String

    public init(id: String, rules: [PlacementRule], defaultOffering: String) {
        self.id = id
        self.rules = rules
        self.defaultOffering = defaultOffering
    }

    /// Whether answering needs the customer's status (a rule compares it): only then is it evaluated.
    public var needsStatus: Bool { rules.contains { $0.when.status != nil } }
    /// Whether answering needs the customer's attributes.
    public var needsAttributes: Bool { rules.contains { !$0.when.attributes.isEmpty } }
}

public struct ExperimentVariant: Sendable, Hashable {
    public var id: String
    public var offering: String
    /// A positive share: the variant gets `weight / sum of weights` of the enrolled customers.
    public var weight: Double

    public init(id: String, offering: String, weight: Double) {
        self.id = id
        self.offering = offering
        self.weight = weight
    }
}

/// Two to four variants of a placement's offering, tested on `enrollmentPercent` of the customers who ask there
/// between `startsAtMs` and `endsAtMs` (open-ended when nil). The first variant is the control.
public struct Experiment: Sendable, Hashable {
    public var id: String
    public var placement: String
    public var variants: [ExperimentVariant]
    /// 0…100.
    public var enrollmentPercent: Double
    public var startsAtMs: Int64
    public var endsAtMs: Int64?

    public init(id: String, placement: String, variants: [ExperimentVariant], enrollmentPercent: Double, startsAtMs: Int64, endsAtMs: Int64? = nil) {
        self.id = id
        self.placement = placement
        self.variants = variants
        self.enrollmentPercent = enrollmentPercent
        self.startsAtMs = startsAtMs
        self.endsAtMs = endsAtMs
    }

    public var control: ExperimentVariant { variants[0] }

    public func variant(_ id: String) -> ExperimentVariant? { variants.first { $0.id == id } }

    /// Enrolling now: started and not ended.
    public func isRunning(atMs now: Int64) -> Bool { startsAtMs <= now && endsAtMs.map { now < $0 } ?? true }

    /// `scheduled`, `running` or `ended` at `now`.
    public func state(atMs now: Int64) -> String {
        if now < startsAtMs { return "scheduled" }
        return isRunning(atMs: now) ? "running" : "ended"
    }

    /// Whether two experiments' windows share an instant (an open end runs forever).
    public func overlaps(_ other: Experiment) -> Bool {
        let endA = endsAtMs ?? .max, endB = other.endsAtMs ?? .max
        return startsAtMs < endB && other.startsAtMs < endA
    }
}
