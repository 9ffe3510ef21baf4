import KakinCore
import KakinEvents
import KakinMetrics
import KakinOfferings
import KakinStorage
import Synchronization

/// What a customer's paywall shows, experiments on it, and their results (issue 29): the use cases over
/// `KakinOfferings`' pure rules and the store's `OfferingsRecords`.
///
/// Offerings, placements and experiments live in the database with a version each; every change bumps one revision
/// row in the same write. A process keeps the configuration it last compiled with that revision and compares it on
/// every read (one indexed row in the read's own snapshot), so a change made through any process is seen by every
/// process at its next read: no restart, no cache that never refreshes.
public final class Offerings: Sendable {
    public struct Settings: Sendable {
        /// The products each store sells, for validating packages (a store absent: no catalog configured).
        public var catalogs: ProductCatalogs

        public init(catalogs: ProductCatalogs) { self.catalogs = catalogs }
    }

    /// `GET /v1/customers/{id}/offerings?placement&platform&appVersion&country`.
    public struct Query: Sendable, Hashable {
        public var placement: String
        public var platform: Platform
        public var appVersion: AppVersion?
        public var country: String?

        public init(placement: String, platform: Platform, appVersion: AppVersion? = nil, country: String? = nil) {
            self.placement = placement
            self.platform = platform
            self.appVersion = appVersion
            self.country = country
        }
    }

    let store: any Repository
    let settings: Settings
    /// Every app's catalog, for evaluating a customer's status when a rule compares it.
    let catalog: Catalog
    let clock: any Clock
    let events: CustomerEvents
    let metricsSettings: MetricsSettings
    /// The configuration this process compiled last, with the revision it was read at.
    let compiled = Mutex<Compiled?>(nil)

    struct Compiled: Sendable {
        var revision: Int64
        var config: OfferingsConfig
    }

    init(store: any Repository, settings: Settings, catalog: Catalog, clock: any Clock, events: CustomerEvents, metricsSettings: MetricsSettings) {
        self.store = store
        self.settings = settings
        self.catalog = catalog
        self.clock = clock
        self.events = events
        self.metricsSettings = metricsSettings
    }

    // MARK: The configuration

    /// Inside a read or write: the configuration as of its snapshot, compiled again only when the revision moved.
    func configuration(_ r: Records, cached: Compiled?) throws -> (config: OfferingsConfig, compiled: Compiled?) {
        let revision = try r.offerings.revision()
        if let cached, cached.revision == revision { return (cached.config, nil) }
        let config = Self.config(try r.offerings.objects())
        return (config, Compiled(revision: revision, config: config))
    }

    /// Inside the offerings read: the configuration, the experiment running on the placement and the customer's stored
    /// variant in it. When the cached configuration runs one there, its revision and the enrollment are read in one
    /// statement; only a moved revision (or another experiment after it) costs more.
    func configuration(_ r: Records, cached: Compiled?, enrollmentOf customerId: String, on placementId: String) throws
        -> (config: OfferingsConfig, compiled: Compiled?, experiment: Experiment?, storedVariant: String?) {
        guard let cached, let guess = cached.config.runningExperiment(on: placementId, atMs: r.nowMs) else {
            let (config, fresh) = try configuration(r, cached: cached)
            let experiment = config.runningExperiment(on: placementId, atMs: r.nowMs)
            return (config, fresh, experiment, try experiment.flatMap { try r.offerings.enrolledVariant(experimentId: $0.id, customerId: customerId) })
        }
        let (revision, stored) = try r.offerings.revision(andVariantOf: customerId, in: guess.id)
        if cached.revision == revision { return (cached.config, nil, guess, stored) }
        let config = Self.config(try r.offerings.objects())
        let experiment = config.runningExperiment(on: placementId, atMs: r.nowMs)
        let variant = experiment?.id == guess.id ? stored
            : try experiment.flatMap { try r.offerings.enrolledVariant(experimentId: $0.id, customerId: customerId) }
        return (config, Compiled(revision: revision, config: config), experiment, variant)
    }

    static func config(_ objects: [OfferingsRecords.StoredObject]) -> OfferingsConfig {
        OfferingsConfig(stored: objects.compactMap { o in
            guard let kind = OfferingObjectKind(rawValue: o.kind), let body = try? JSONParser.parse(o.body) else { return nil }
            return (kind, o.id, body)
        })
    }

    /// Keeps the newer of what this process holds and what a read compiled.
    func remember(_ c: Compiled?) {
        guard let c else { return }
        compiled.withLock { held in if (held?.revision ?? -1) < c.revision { held = c } }
    }

    /// The current configuration (one snapshot).
    public func current() async throws(KakinError) -> OfferingsConfig {
        let cached = compiled.withLock { $0 }
        let (config, fresh) = try await store.snapshot { [self] r in try configuration(r, cached: cached) }
        remember(fresh)
        return config
    }

    // MARK: A customer's offering

    /// The offering the placement shows the customer: an enrolled customer gets its variant's (a first enrollment is
    /// recorded once, with its `experiment.enrolled` event, in one write); others the first matching rule's, else the
    /// default. One snapshot reads the revision, the stored enrollment, and only when a rule needs them the attributes
    /// and the status; nothing is written unless the customer enrolls now.
    public func offering(customerId: String, query: Query) async throws(KakinError) -> JSONValue {
        let cached = compiled.withLock { $0 }
        let catalog = catalog
        let (decision, fresh) = try await store.snapshot { [self] r -> (OfferingDecision, Compiled?) in
            let (config, fresh, experiment, stored) = try configuration(r, cached: cached, enrollmentOf: customerId, on: query.placement)
            let placement = try config.placement(query.placement)
            let enrollment = experiment.flatMap { OfferingsConfig.enrollment(in: $0, customerId: customerId, storedVariant: stored) }
            var context: TargetingContext?
            if enrollment == nil {
                var c = TargetingContext(platform: query.platform, country: query.country, appVersion: query.appVersion)
                if placement.needsAttributes { c.attributes = CustomerAttributes.parse(try r.offerings.attributes(customerId) ?? "{}") }
                if placement.needsStatus { c.status = try Self.status(r, customerId: customerId, catalog: catalog) }
                context = c
            }
            return (config.decide(placement, enrollment: enrollment, context: context), fresh)
        }
        remember(fresh)
        var answer = decision
        if let e = decision.enrollment, e.isNew { answer.enrollment = try await enroll(customerId, e) }
        return answer.json(platform: query.platform)
    }

    /// `new`, `active` or `inactive`, as `GET /v1/customers/{id}` says it (a customer Kakin never saw is new).
    static func status(_ r: Records, customerId: String, catalog: Catalog) throws -> CustomerState {
        guard var snapshot = try r.statusInputs(customerId) else { return .new }
        if StatusInputs.needsWholeHistory(snapshot.history.transactions) { snapshot = try r.wholeHistory(snapshot.customer) }
        return StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: r.nowMs).status
    }

    /// Records a first enrollment once (the customer created if Kakin never saw it), with its event and timeline
    /// entry; when another request recorded one first, that one's variant is the answer.
    func enroll(_ customerId: String, _ e: OfferingsConfig.Enrollment) async throws(KakinError) -> OfferingsConfig.Enrollment {
        let events = events
        let stored = try await store.transaction { r -> String? in
            let experiment = e.experiment.id
            guard try r.offerings.enroll(experimentId: experiment, customerId: customerId, variantId: e.variant.id, placementId: e.experiment.placement) else {
                return try r.offerings.enrolledVariant(experimentId: experiment, customerId: customerId)
            }
            let data: [String: JSONValue] = ["experiment": .string(experiment), "variant": .string(e.variant.id), "placement": .string(e.experiment.placement)]
            var facts: [EventDraft] = []
            if try r.ensureCustomer(customerId).created { facts.append(EventDraft(type: .customerCreated)) }
            facts.append(EventDraft(type: .experimentEnrolled, data: data))
            try events.record(r, customerId: customerId, facts: facts)
            try r.recordTimeline(customerId: customerId, kind: "experiment.enrolled", reference: experiment, detail: .object(data))
            return nil
        }
        events.wake()
        guard let stored else { return e }
        return OfferingsConfig.enrollment(in: e.experiment, customerId: customerId, storedVariant: stored) ?? e
    }

    // MARK: Editing

    /// `PUT /v1/admin/{offerings|placements|experiments}/{id}`: validated against the whole configuration in the same
    /// write (`OfferingsConfig.validate`), stored as the next version with an audit entry, the revision bumped. A body
    /// equal to the stored one changes nothing (same version, no audit entry). A refusal changes nothing.
    public func put(_ kind: OfferingObjectKind, id: String, body: JSONValue, actor: String) async throws(KakinError) -> JSONValue {
        guard OfferingIDs.isValid(id) else {
            throw KakinError(kind.invalid, "The \(kind.rawValue) id must be 1 to \(OfferingLimits.idLengthMax) characters of A-Z a-z 0-9 . _ -")
        }
        let change = try OfferingsChange(kind: kind, id: id, json: body)
        let catalogs = settings.catalogs
        let stored = try await store.transaction { r -> OfferingsRecords.StoredObject in
            let objects = try r.offerings.objects()
            let config = Self.config(objects)
            try config.validate(change, catalogs: catalogs, nowMs: r.nowMs)
            let existing = objects.first { $0.kind == kind.rawValue && $0.id == id }
            let before = existing.flatMap { try? JSONParser.parse($0.body) }
            if let existing, before == change.json { return existing }
            let body = change.json.jsonString
            let version = try r.offerings.put(kind: kind.rawValue, id: id, body: body, actor: actor,
                                              change: AuditChange.between(before, change.json).jsonString)
            return OfferingsRecords.StoredObject(kind: kind.rawValue, id: id, version: version, body: body, updatedAtMs: r.nowMs, updatedBy: actor)
        }
        return objectJSON(stored)
    }

    /// `GET /v1/admin/{…}/{id}`: the stored object with its version.
    public func object(_ kind: OfferingObjectKind, id: String) async throws(KakinError) -> JSONValue {
        guard let o = try await store.snapshot({ r in try r.offerings.object(kind: kind.rawValue, id: id) }) else {
            throw KakinError(kind.notFound, "No \(kind.rawValue) \(id) is defined.")
        }
        return objectJSON(o)
    }

    /// Every stored object of `kind`, by id (the desk's lists; `GET /v1/admin/{offerings|placements|experiments}`).
    public func objects(_ kind: OfferingObjectKind) async throws(KakinError) -> [JSONValue] {
        try await store.snapshot { r in try r.offerings.objects() }.filter { $0.kind == kind.rawValue }.map(objectJSON)
    }

    /// `{"id", …the body…, "version", "updatedAt", "updatedBy"}`, and an experiment's `state` now.
    func objectJSON(_ o: OfferingsRecords.StoredObject) -> JSONValue {
        var fields = (try? JSONParser.parse(o.body))?.objectValue ?? [:]
        fields["id"] = .string(o.id)
        fields["version"] = .int(o.version)
        fields["updatedAt"] = .string(Timestamp.rfc3339(o.updatedAtMs))
        fields["updatedBy"] = .string(o.updatedBy)
        if o.kind == OfferingObjectKind.experiment.rawValue, let body = try? JSONParser.parse(o.body), let e = try? Experiment(id: o.id, json: body) {
            fields["state"] = .string(e.state(atMs: clock.nowMs()))
        }
        return .object(fields)
    }

    /// `GET /v1/admin/audit?limit&cursor&kind&id` → `{"entries": [{"id", "at", "actor", "kind", "objectId", "version",
    /// "change"}], "nextCursor"}`, newest first.
    public func audit(limit: Int, cursor: String?, kind: OfferingObjectKind?, id: String?) async throws(KakinError) -> JSONValue {
        precondition((1...OfferingLimits.auditPageMax).contains(limit), "an audit page is bounded")
        var before: Int64?
        if let cursor {
            guard let n = Int64(cursor), n > 0 else { throw KakinError(.invalidCursor) }
            before = n
        }
        let entries = try await store.snapshot { [before] r in try r.offerings.audit(beforeSeq: before, kind: kind?.rawValue, id: id, limit: limit) }
        let json: [JSONValue] = entries.map { e in
            ["id": .int(e.seq), "at": .string(Timestamp.rfc3339(e.atMs)), "actor": .string(e.actor), "kind": .string(e.kind), "objectId": .string(e.id),
             "version": .int(e.version), "change": (try? JSONParser.parse(e.change)) ?? .null]
        }
        return ["entries": .array(json), "nextCursor": entries.count == limit ? .string(String(entries.last!.seq)) : .null]
    }

    /// Seeds objects the database does not hold yet (the config file's `paywalls`), in the order given, as `actor`;
    /// an object already stored is left as it is (the database is where edits live). Answers how many were written.
    public func seed(_ objects: [(kind: OfferingObjectKind, id: String, body: JSONValue)], actor: String) async throws(KakinError) -> Int {
        var written = 0
        for o in objects {
            let exists = try await store.snapshot { r in try r.offerings.object(kind: o.kind.rawValue, id: o.id) != nil }
            if exists { continue }
            _ = try await put(o.kind, id: o.id, body: o.body, actor: actor)
            written += 1
        }
        return written
    }

    // MARK: Customer attributes

    /// `PUT /v1/customers/{id}/attributes`: merged into what is stored (null removes a key); answers the whole set.
    public func setAttributes(customerId: String, body: JSONValue) async throws(KakinError) -> JSONValue {
        let merged = try await store.transaction { r -> [String: String] in
            let merged = try CustomerAttributes.merging(body, into: CustomerAttributes.parse(try r.offerings.attributes(customerId) ?? "{}"))
            try r.offerings.setAttributes(customerId, CustomerAttributes.json(merged).jsonString)
            return merged
        }
        return ["customerId": .string(customerId), "attributes": CustomerAttributes.json(merged)]
    }

    // MARK: Results

    /// `GET /v1/admin/experiments/{id}/results`: every enrolled customer's purchase facts of every store after its
    /// enrollment (`CustomerOutcome`), summed per variant and judged against the control (`ExperimentResults`). Read
    /// page by page (`metricFactsCustomersMax` customers per snapshot), at most `resultsEnrollmentsMax` enrollments.
    public func results(experimentId: String) async throws(KakinError) -> JSONValue {
        guard let experiment = try await current().experiments[experimentId] else {
            throw KakinError(.experimentNotFound, "No experiment \(experimentId) is defined.")
        }
        let settings = metricsSettings
        let now = clock.nowMs()
        var tallies: [String: VariantTally] = [:]
        var after: String?
        var read = 0
        var complete = true
        while true {
            if read >= OfferingLimits.resultsEnrollmentsMax {
                complete = false
                break
            }
            let page = try await store.snapshot { [after] r -> [(variant: String, customerId: String, outcome: CustomerOutcome)] in
                let enrollments = try r.offerings.enrollments(experimentId: experimentId, variantId: nil, afterCustomerId: after,
                                                              limit: KakinStore.metricFactsCustomersMax)
                let facts = try r.metricFacts(customerIds: enrollments.map(\.customerId), ledgerSpanMs: CivilDay.quarterHourMs)
                return zip(enrollments, facts).map { e, stored in
                    let customer = BusinessMetrics.facts(stored)
                    let facts = RevenueFact.appStore(customer, settings: settings) + RevenueFact.external(customer.externalPurchases)
                    return (e.variantId, e.customerId, CustomerOutcome.of(facts, enrolledAtMs: e.enrolledAtMs, nowMs: now))
                }
            }
            for item in page { tallies[item.variant, default: VariantTally()].add(item.outcome) }
            read += page.count
            guard page.count == KakinStore.metricFactsCustomersMax, let last = page.last else { break }
            after = last.customerId
        }
        return ExperimentResults.json(experiment, tallies: tallies, nowMs: now, complete: complete)
    }

    /// The customers of one variant, in id order after `after` (the export's filter).
    public func enrolledCustomers(experimentId: String, variantId: String, after: String?, limit: Int) async throws(KakinError) -> [String] {
        try await store.snapshot { r in
            try r.offerings.enrollments(experimentId: experimentId, variantId: variantId, afterCustomerId: after, limit: limit).map(\.customerId)
        }
    }

    /// The cohort a query's `experiment` and `variant` name (nil when neither is given); `variant` alone is a 400.
    public func cohort(query: [String: String]) async throws(KakinError) -> MetricsCohort? {
        guard let experiment = query["experiment"], !experiment.isEmpty else {
            if let v = query["variant"], !v.isEmpty { throw KakinError(.invalidMetricsQuery, "variant goes with experiment.") }
            return nil
        }
        return try await cohort(experimentId: experiment, variantId: query["variant"])
    }

    /// The cohort `?experiment=E&variant=V` names, checked: 404 for an unknown experiment, 400 for a variant it lacks.
    public func cohort(experimentId: String, variantId: String?) async throws(KakinError) -> MetricsCohort {
        guard let experiment = try await current().experiments[experimentId] else {
            throw KakinError(.experimentNotFound, "No experiment \(experimentId) is defined.")
        }
        guard let variantId, experiment.variant(variantId) != nil else {
            throw KakinError(.invalidMetricsQuery, "variant must be one of \(experiment.variants.map(\.id).joined(separator: ", ")) with experiment.")
        }
        return MetricsCohort(experimentId: experimentId, variantId: variantId)
    }
}
