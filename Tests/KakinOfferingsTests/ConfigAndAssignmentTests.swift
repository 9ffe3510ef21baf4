import KakinCore
import Testing
@testable import KakinOfferings

@Suite struct ConfigAndAssignment {
    static let catalogs = ProductCatalogs([.appStore: ["premium.monthly", "premium.yearly", "coins.500"], .web: ["premium.monthly"]])
    static let t0: Int64 = 1_800_000_000_000

    static func config() throws -> OfferingsConfig {
        var c = OfferingsConfig()
        for change in [
            OfferingsChange.offering(try Offering(id: "standard", json: ["packages": [["id": "monthly", "appStore": "premium.monthly", "web": "premium.monthly"]]])),
            .offering(try Offering(id: "annual-first", json: ["packages": [["id": "annual", "appStore": "premium.yearly"], ["id": "monthly", "appStore": "premium.monthly"]],
                                                              "metadata": ["highlight": "annual"]])),
            .placement(try Placement(id: "onboarding", json: ["default": "standard"])),
            .experiment(try Experiment(id: "paywall-test", json: [
                "placement": "onboarding", "enrollmentPercent": 100, "startsAt": "2027-01-15T08:00:00Z",
                "variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "b", "offering": "annual-first", "weight": 1]],
            ])),
        ] {
            try c.validate(change, catalogs: catalogs, nowMs: t0)
            c = c.applying(change)
        }
        return c
    }

    @Test func theSplitFollowsTheWeightsAndEachCustomerAlwaysGetsTheSameVariant() throws {
        for (weights, percent) in [([1.0, 1.0], 100.0), ([1.0, 3.0], 100.0), ([2.0, 1.0, 1.0], 50.0), ([1.0, 1.0, 1.0, 5.0], 20.0)] {
            let experiment = Experiment(id: "e-\(weights.count)-\(Int(percent))", placement: "p",
                                        variants: weights.enumerated().map { ExperimentVariant(id: "v\($0.offset)", offering: "o", weight: $0.element) },
                                        enrollmentPercent: percent, startsAtMs: 0)
            let n = 10_000
            var counts: [String: Int] = [:]
            var enrolled = 0
            for i in 0..<n {
                guard let v = ExperimentAssignment.variant(for: "customer-\(i)", in: experiment) else { continue }
                enrolled += 1
                counts[v.id, default: 0] += 1
                #expect(ExperimentAssignment.variant(for: "customer-\(i)", in: experiment) == v)
            }
            // Enrollment within 3 standard deviations of its share, and each variant of its weight's share.
            let p = percent / 100
            #expect(abs(Double(enrolled) - Double(n) * p) <= 3 * (Double(n) * p * (1 - p)).squareRoot() + 1, "\(enrolled) of \(n) at \(percent)%")
            let total = weights.reduce(0, +)
            for (i, w) in weights.enumerated() {
                let share = w / total, got = Double(counts["v\(i)"] ?? 0)
                #expect(abs(got - Double(enrolled) * share) <= 3 * (Double(enrolled) * share * (1 - share)).squareRoot(), "v\(i): \(got) of \(enrolled)")
            }
        }
    }

    @Test func raisingTheEnrollmentKeepsEveryoneEnrolledSoFarInTheirVariant() {
        var e = Experiment(id: "grow", placement: "p", variants: [ExperimentVariant(id: "a", offering: "o", weight: 1), ExperimentVariant(id: "b", offering: "o", weight: 1)],
                           enrollmentPercent: 10, startsAtMs: 0)
        let before = (0..<2_000).compactMap { i in ExperimentAssignment.variant(for: "c\(i)", in: e).map { ("c\(i)", $0.id) } }
        e.enrollmentPercent = 60
        for (c, v) in before { #expect(ExperimentAssignment.variant(for: c, in: e)?.id == v) }
    }

    @Test func aStoredEnrollmentWinsOverTodaysAssignment() throws {
        let c = try Self.config()
        let e = try #require(c.experiments["paywall-test"])
        let customer = (0..<100).map { "c\($0)" }.first { ExperimentAssignment.variant(for: $0, in: e)?.id == "a" }!
        let fresh = try #require(OfferingsConfig.enrollment(in: e, customerId: customer, storedVariant: nil))
        #expect(fresh.isNew && fresh.variant.id == "a")
        let sticky = try #require(OfferingsConfig.enrollment(in: e, customerId: customer, storedVariant: "b"))
        #expect(!sticky.isNew && sticky.variant.id == "b")
        let decision = c.decide(try c.placement("onboarding"), enrollment: sticky, context: nil)
        #expect(decision.json(platform: .ios) == [
            "placement": "onboarding", "experiment": ["id": "paywall-test", "variant": "b"],
            "offering": ["id": "annual-first", "metadata": ["highlight": "annual"],
                         "packages": [["id": "annual", "productId": "premium.yearly"], ["id": "monthly", "productId": "premium.monthly"]]],
        ])
        // The web gets the packages its store sells; no experiment outside its window.
        let plain = c.decide(try c.placement("onboarding"), enrollment: nil, context: TargetingContext(platform: .web))
        #expect(plain.json(platform: .web) == ["placement": "onboarding",
                                               "offering": ["id": "standard", "metadata": [:], "packages": [["id": "monthly", "productId": "premium.monthly"]]]])
        #expect(c.runningExperiment(on: "onboarding", atMs: e.startsAtMs - 1) == nil)
        #expect(c.runningExperiment(on: "onboarding", atMs: e.startsAtMs)?.id == "paywall-test")
        #expect(errorKind { () throws(KakinError) in _ = try c.placement("nowhere") } == .placementNotFound)
    }

    func refusal(_ c: OfferingsConfig, _ change: OfferingsChange, nowMs: Int64 = t0) -> ErrorKind? {
        do {
            try c.validate(change, catalogs: Self.catalogs, nowMs: nowMs)
            return nil
        } catch {
            return error.kind
        }
    }

    @Test func anInvalidChangeIsRefusedWithItsError() throws {
        let c = try Self.config()
        #expect(refusal(c, .offering(try Offering(id: "x", json: ["packages": [["id": "m", "appStore": "premium.weekly"]]]))) == .offeringUnknownProduct)
        #expect(refusal(c, .offering(try Offering(id: "x", json: ["packages": [["id": "m", "web": "coins.500"]]]))) == .offeringUnknownProduct)
        #expect(refusal(c, .offering(try Offering(id: "x", json: ["packages": [["id": "m", "googlePlay": "premium"]]]))) == .storeCatalogNotConfigured)
        var withPlay = Self.catalogs
        withPlay.products[.googlePlay] = ["premium"]
        #expect(throws: Never.self) {
            try c.validate(.offering(try Offering(id: "x", json: ["packages": [["id": "m", "googlePlay": "premium"]]])), catalogs: withPlay, nowMs: Self.t0)
        }
        #expect(refusal(c, .placement(try Placement(id: "settings", json: ["default": "missing"]))) == .offeringNotDefined)
        #expect(refusal(c, .placement(try Placement(id: "settings", json: ["rules": [["offering": "missing"]], "default": "standard"]))) == .offeringNotDefined)

        func experiment(_ id: String, _ fields: [String: JSONValue]) throws(KakinError) -> OfferingsChange {
            var body: [String: JSONValue] = ["placement": "onboarding", "enrollmentPercent": 50, "startsAt": "2027-03-01T00:00:00Z",
                                             "variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "b", "offering": "annual-first", "weight": 1]]]
            for (k, v) in fields { body[k] = v }
            return .experiment(try Experiment(id: id, json: .object(body)))
        }
        // Overlapping experiments on one placement: the earlier one never ends.
        #expect(refusal(c, try experiment("second", [:])) == .experimentOverlaps)
        let ended = c.applying(try experiment("paywall-test", ["startsAt": "2027-01-15T08:00:00Z", "endsAt": "2027-02-01T00:00:00Z"]))
        #expect(refusal(ended, try experiment("second", [:])) == nil)
        #expect(refusal(c, try experiment("second", ["placement": "nowhere"])) == .placementNotDefined)
        #expect(refusal(c, try experiment("second", ["variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "b", "offering": "gone", "weight": 1]]])) == .offeringNotDefined)
        // A started experiment keeps its variants; its weights may change.
        let started = Self.t0 + 100 * 86_400_000
        #expect(refusal(c, try experiment("paywall-test", ["startsAt": "2027-01-15T08:00:00Z",
                                                           "variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "c", "offering": "annual-first", "weight": 1]]]),
                        nowMs: started) == .experimentStarted)
        #expect(refusal(c, try experiment("paywall-test", ["startsAt": "2027-01-15T08:00:00Z", "enrollmentPercent": 80,
                                                           "variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "b", "offering": "annual-first", "weight": 3]]]),
                        nowMs: started) == nil)
        // Shapes: weights must be positive, 2–4 variants, the window in order.
        for (fields, message) in [
            (["variants": [["id": "a", "offering": "standard", "weight": 0], ["id": "b", "offering": "standard", "weight": 1]]] as [String: JSONValue], "variants[0].weight"),
            (["variants": [["id": "a", "offering": "standard", "weight": -2], ["id": "b", "offering": "standard", "weight": 1]]], "variants[0].weight"),
            (["variants": [["id": "a", "offering": "standard", "weight": 1]]], "variants must list 2 to 4"),
            (["variants": [["id": "a", "offering": "standard", "weight": 1], ["id": "a", "offering": "standard", "weight": 1]]], "repeats variant a"),
            (["enrollmentPercent": 101], "enrollmentPercent"),
            (["endsAt": "2027-02-01T00:00:00Z"], "endsAt must be later"),
            (["startsAt": "tomorrow"], "startsAt must be an RFC 3339"),
        ] {
            #expect(throws: KakinError.self) { _ = try experiment("bad", fields) }
            do {
                _ = try experiment("bad", fields)
            } catch {
                #expect(error.kind == .experimentInvalid && error.message.contains(message), "\(error.message)")
            }
        }
        #expect(throws: KakinError.self) { _ = try Offering(id: "x", json: ["packages": [["id": "m"]]]) }
        #expect(throws: KakinError.self) { _ = try Offering(id: "x", json: ["packages": []]) }
        #expect(throws: KakinError.self) { _ = try Offering(id: "x", json: ["packages": [["id": "m", "appStore": "a"], ["id": "m", "appStore": "b"]]]) }
    }

    @Test func storedBodiesReadBackToTheSameConfig() throws {
        let c = try Self.config()
        var stored: [(kind: OfferingObjectKind, id: String, body: JSONValue)] = []
        for o in c.offerings.values { stored.append((.offering, o.id, o.json)) }
        for p in c.placements.values { stored.append((.placement, p.id, p.json)) }
        for e in c.experiments.values { stored.append((.experiment, e.id, e.json)) }
        #expect(OfferingsConfig(stored: stored) == c)
    }

    @Test func auditEntriesSayWhatChanged() {
        #expect(AuditChange.between(nil, ["default": "a"]) == ["created": true])
        #expect(AuditChange.between(["default": "a", "rules": []], ["default": "b", "rules": []])
                == ["changed": ["default": ["from": "a", "to": "b"]]])
    }

    @Test func attributesMergeAndANullRemovesOne() throws {
        let merged = try CustomerAttributes.merging(["plan": "pro", "old": nil], into: ["old": "x", "cohort": "b"])
        #expect(merged == ["plan": "pro", "cohort": "b"])
        #expect(errorKind { () throws(KakinError) in _ = try CustomerAttributes.merging(["n": 3], into: [:]) } == .invalidAttributes)
        #expect(errorKind { () throws(KakinError) in _ = try CustomerAttributes.merging(.array([]), into: [:]) } == .invalidAttributes)
        let many = JSONValue.object(Dictionary(uniqueKeysWithValues: (0...OfferingLimits.customerAttributesMax).map { ("k\($0)", JSONValue.string("v")) }))
        #expect(errorKind { () throws(KakinError) in _ = try CustomerAttributes.merging(many, into: [:]) } == .invalidAttributes)
    }
}

/// The kind of error `body` throws, nil when it throws none.
func errorKind(_ body: () throws(KakinError) -> Void) -> ErrorKind? {
    do {
        try body()
        return nil
    } catch {
        return error.kind
    }
}
