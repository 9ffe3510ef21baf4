import KakinCore

/// The products each store sells, for checking the packages an offering names. A store absent here has no catalog
/// configured: a package naming a product there is refused (`store_catalog_not_configured`). The App Store's and the
/// web's are the apps' catalogs today; Google Play's arrives with its own catalog and is added here by the composition.
public struct ProductCatalogs: Sendable, Hashable {
    public var products: [PaywallStore: Set<String>]

    public init(_ products: [PaywallStore: Set<String>]) { self.products = products }
}

/// One edit of the admin API: the new version of one object.
public enum OfferingsChange: Sendable, Hashable {
    case offering(Offering)
    case placement(Placement)
    case experiment(Experiment)

    /// The PUT body of `kind`, read into the change it asks for (shape errors only).
    public init(kind: OfferingObjectKind, id: String, json: JSONValue) throws(KakinError) {
        switch kind {
        case .offering: self = .offering(try Offering(id: id, json: json))
        case .placement: self = .placement(try Placement(id: id, json: json))
        case .experiment: self = .experiment(try Experiment(id: id, json: json))
        }
    }

    public var kind: OfferingObjectKind {
        switch self {
        case .offering: .offering
        case .placement: .placement
        case .experiment: .experiment
        }
    }

    public var id: String {
        switch self {
        case .offering(let o): o.id
        case .placement(let p): p.id
        case .experiment(let e): e.id
        }
    }

    /// The stored body.
    public var json: JSONValue {
        switch self {
        case .offering(let o): o.json
        case .placement(let p): p.json
        case .experiment(let e): e.json
        }
    }
}

/// Every offering, placement and experiment, as one consistent whole: each write validates its change against all of
/// it (in the same database transaction), so every placement names offerings that exist, every experiment a placement
/// and offerings that exist, and no two experiments on a placement share an instant.
public struct OfferingsConfig: Sendable, Hashable {
    public var offerings: [String: Offering] = [:]
    public var placements: [String: Placement] = [:]
    public var experiments: [String: Experiment] = [:]

    public init() {}

    /// From the stored bodies (each validated when it was written).
    public init(stored: [(kind: OfferingObjectKind, id: String, body: JSONValue)]) {
        for s in stored {
            do {
                self = applying(try OfferingsChange(kind: s.kind, id: s.id, json: s.body))
            } catch {
                preconditionFailure("a stored \(s.kind.rawValue) is always readable: \(s.id): \(error)")
            }
        }
    }

    public func applying(_ change: OfferingsChange) -> OfferingsConfig {
        var c = self
        switch change {
        case .offering(let o): c.offerings[o.id] = o
        case .placement(let p): c.placements[p.id] = p
        case .experiment(let e): c.experiments[e.id] = e
        }
        return c
    }

    public func json(_ kind: OfferingObjectKind, _ id: String) -> JSONValue? {
        switch kind {
        case .offering: offerings[id]?.json
        case .placement: placements[id]?.json
        case .experiment: experiments[id]?.json
        }
    }

    // MARK: Validation

    /// Refuses a change that would leave the whole inconsistent or break a rule: a package naming a product its store
    /// does not sell (or a store with no catalog), a placement or variant naming an offering that does not exist, an
    /// experiment on a placement that does not exist or overlapping another on it, a started experiment whose placement,
    /// start or variants change, more objects than the limits allow. Nothing is changed by a refusal.
    public func validate(_ change: OfferingsChange, catalogs: ProductCatalogs, nowMs: Int64) throws(KakinError) {
        switch change {
        case .offering(let o):
            try check(count: offerings.count, isNew: offerings[o.id] == nil, max: OfferingLimits.offeringsMax, kind: .offeringInvalid, "offerings")
            for p in o.packages {
                for store in PaywallStore.allCases {
                    guard let product = p.products[store] else { continue }
                    guard let sold = catalogs.products[store] else {
                        throw KakinError(.storeCatalogNotConfigured,
                                         "Package \(p.id) names a \(store.rawValue) product, but this server has no \(store.rawValue) catalog configured.")
                    }
                    guard sold.contains(product) else {
                        throw KakinError(.offeringUnknownProduct, "Package \(p.id) names \(product), which is not in the \(store.rawValue) catalog.")
                    }
                }
            }
        case .placement(let p):
            try check(count: placements.count, isNew: placements[p.id] == nil, max: OfferingLimits.placementsMax, kind: .placementInvalid, "placements")
            for (i, rule) in p.rules.enumerated() where offerings[rule.offering] == nil {
                throw KakinError(.offeringNotDefined, "rules[\(i)] names offering \(rule.offering), which does not exist: PUT it first.")
            }
            guard offerings[p.defaultOffering] != nil else {
                throw KakinError(.offeringNotDefined, "default names offering \(p.defaultOffering), which does not exist: PUT it first.")
            }
        case .experiment(let e):
            try check(count: experiments.count, isNew: experiments[e.id] == nil, max: OfferingLimits.experimentsMax, kind: .experimentInvalid, "experiments")
            guard placements[e.placement] != nil else {
                throw KakinError(.placementNotDefined, "placement \(e.placement) does not exist: PUT it first.")
            }
            for v in e.variants where offerings[v.offering] == nil {
                throw KakinError(.offeringNotDefined, "Variant \(v.id) names offering \(v.offering), which does not exist: PUT it first.")
            }
            if let old = experiments[e.id], old.startsAtMs <= nowMs {
                guard old.placement == e.placement, old.startsAtMs == e.startsAtMs, old.variants.map(\.id) == e.variants.map(\.id) else {
                    throw KakinError(.experimentStarted,
                                     "Experiment \(e.id) has started: its placement, startsAt and variant ids (in order) stay as they are; weights, offerings, enrollmentPercent and endsAt may change.")
                }
            }
            for other in experiments.values.sorted(by: { $0.id < $1.id }) where other.id != e.id && other.placement == e.placement && other.overlaps(e) {
                throw KakinError(.experimentOverlaps, "Experiment \(other.id) runs on placement \(e.placement) at the same time; one placement runs one experiment at a time.")
            }
        }
    }

    private func check(count: Int, isNew: Bool, max: Int, kind: ErrorKind, _ what: String) throws(KakinError) {
        if isNew, count >= max { throw KakinError(kind, "This server holds at most \(max) \(what).") }
    }

    // MARK: Answering

    public func placement(_ id: String) throws(KakinError) -> Placement {
        guard let p = placements[id] else { throw KakinError(.placementNotFound, "No placement \(id) is defined.") }
        return p
    }

    /// The experiment enrolling on `placement` at `nowMs` (at most one: they never overlap).
    public func runningExperiment(on placement: String, atMs nowMs: Int64) -> Experiment? {
        experiments.values.first { $0.placement == placement && $0.isRunning(atMs: nowMs) }
    }

    /// A customer's place in an experiment: the stored variant (sticky), else the assignment's (`isNew`: to record).
    public struct Enrollment: Sendable, Hashable {
        public var experiment: Experiment
        public var variant: ExperimentVariant
        public var isNew: Bool
    }

    /// The customer's enrollment in `experiment`, if any: `storedVariant` (from an earlier ask) wins over today's
    /// assignment, so a change of weights or percent never moves an enrolled customer.
    public static func enrollment(in experiment: Experiment, customerId: String, storedVariant: String?) -> Enrollment? {
        if let stored = storedVariant, let v = experiment.variant(stored) { return Enrollment(experiment: experiment, variant: v, isNew: false) }
        return ExperimentAssignment.variant(for: customerId, in: experiment).map { Enrollment(experiment: experiment, variant: $0, isNew: true) }
    }

    /// What the placement shows: the enrolled variant's offering, else the first matching rule's, else the default.
    /// - Parameter context: the customer and app, needed only when there is no enrollment.
    public func decide(_ placement: Placement, enrollment: Enrollment?, context: TargetingContext?) -> OfferingDecision {
        var offeringId: String
        var rule: Int?
        if let enrollment {
            offeringId = enrollment.variant.offering
        } else {
            guard let context else { preconditionFailure("a placement's rules are read with the customer's context") }
            (offeringId, rule) = placement.offering(for: context)
        }
        guard let offering = offerings[offeringId] else { preconditionFailure("a placement and a variant name offerings that exist") }
        return OfferingDecision(placement: placement.id, offering: offering, rule: rule, enrollment: enrollment)
    }
}

/// The answer to `GET /v1/customers/{id}/offerings`.
public struct OfferingDecision: Sendable, Hashable {
    public var placement: String
    public var offering: Offering
    /// The rule that chose it (nil: the default, or the experiment).
    public var rule: Int?
    public var enrollment: OfferingsConfig.Enrollment?

    /// `{"placement", "offering": {"id", "packages": [{"id", "productId"}], "metadata"}, "experiment"?: {"id", "variant"}}`:
    /// the packages the platform's store sells; metadata `{}` when none was given.
    public func json(platform: Platform) -> JSONValue {
        var o: [String: JSONValue] = [
            "placement": .string(placement),
            "offering": ["id": .string(offering.id), "metadata": offering.metadata ?? .object([:]),
                         "packages": .array(offering.packages(for: platform).map { ["id": .string($0.id), "productId": .string($0.productId)] })],
        ]
        if let e = enrollment { o["experiment"] = ["id": .string(e.experiment.id), "variant": .string(e.variant.id)] }
        return .object(o)
    }
}

/// What an audit entry says changed: `{"created": true}` for a new object, else each top-level field that differs
/// `{"changed": {"field": {"from", "to"}}}` (absent fields as null).
public enum AuditChange {
    public static func between(_ before: JSONValue?, _ after: JSONValue) -> JSONValue {
        guard let old = before?.objectValue else { return ["created": true] }
        let new = after.objectValue ?? [:]
        var changed: [String: JSONValue] = [:]
        for key in Set(old.keys).union(new.keys) where old[key] != new[key] {
            changed[key] = ["from": old[key] ?? .null, "to": new[key] ?? .null]
        }
        return ["changed": .object(changed)]
    }
}
