import KakinCore

/// What is known about the customer and the app asking (`GET …/offerings?platform&appVersion&country`, the customer's
/// status and attributes), for a placement's rules. `status` is nil when no rule of the placement compares it (it is
/// then never evaluated).
public struct TargetingContext: Sendable, Hashable {
    public var platform: Platform
    public var country: String?
    public var appVersion: AppVersion?
    public var status: CustomerState?
    public var attributes: [String: String]

    public init(platform: Platform, country: String? = nil, appVersion: AppVersion? = nil, status: CustomerState? = nil,
                attributes: [String: String] = [:]) {
        self.platform = platform
        self.country = country
        self.appVersion = appVersion
        self.status = status
        self.attributes = attributes
    }
}

extension RuleConditions {
    /// Every condition given holds. A condition on something the app did not send (no `appVersion`, no `country`) does
    /// not hold: a rule for "2.0 and later" never catches an app that did not say its version.
    public func matches(_ c: TargetingContext) -> Bool {
        if let platform, platform != c.platform { return false }
        if let countries {
            guard let country = c.country, countries.contains(country) else { return false }
        }
        if appVersionMin != nil || appVersionMax != nil {
            guard let v = c.appVersion else { return false }
            if let lo = appVersionMin, v < lo { return false }
            if let hi = appVersionMax, hi < v { return false }
        }
        if let status {
            precondition(c.status != nil, "a placement comparing the status is asked with the customer's status")
            if c.status != status { return false }
        }
        for (k, v) in attributes where c.attributes[k] != v { return false }
        return true
    }
}

extension Placement {
    /// The first rule that matches names the offering (`rule` its index); none: the default (`rule` nil).
    public func offering(for context: TargetingContext) -> (offering: String, rule: Int?) {
        for (i, r) in rules.enumerated() where r.when.matches(context) { return (r.offering, i) }
        return (defaultOffering, nil)
    }
}

/// Sticky, deterministic assignment: a customer's place in an experiment is a pure function of the experiment's and
/// the customer's ids, so every process answers the same without asking the others, and the stored enrollment only
/// records what the function said (and keeps it if the experiment's weights later change).
public enum ExperimentAssignment {
    /// The variant `customerId` gets, or nil when it falls outside `enrollmentPercent`. Two independent draws: one
    /// decides enrollment (so raising the percent keeps everyone enrolled so far), one the variant by weight.
    public static func variant(for customerId: String, in experiment: Experiment) -> ExperimentVariant? {
        guard unit(experiment.id, customerId, "enroll") * 100 < experiment.enrollmentPercent else { return nil }
        let total = experiment.variants.reduce(0) { $0 + $1.weight }
        precondition(total > 0, "an experiment's weights are positive")
        var point = unit(experiment.id, customerId, "variant") * total
        for v in experiment.variants {
            if point < v.weight { return v }
            point -= v.weight
        }
        return experiment.variants.last
    }

    /// A uniform number in [0, 1) from the parts: FNV-1a over their bytes (a 0 byte between parts), then SplitMix64's
    /// finaliser, which spreads FNV's weak low bits over all 64; its top 53 bits make the double.
    static func unit(_ parts: String...) -> Double {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        for (i, part) in parts.enumerated() {
            if i > 0 { h = (h ^ 0) &* 0x0000_0100_0000_01B3 }
            for b in part.utf8 { h = (h ^ UInt64(b)) &* 0x0000_0100_0000_01B3 }
        }
        h = (h ^ (h >> 30)) &* 0xBF58_476D_1CE4_E5B9
        h = (h ^ (h >> 27)) &* 0x94D0_49BB_1331_11EB
        h ^= h >> 31
        return Double(h >> 11) / Double(UInt64(1) << 53)
    }
}
