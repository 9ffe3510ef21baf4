import Foundation
import KakinCore
import KakinEvents
import KakinMetrics
import KakinOfferings
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinService

/// Offerings, placements and experiments over a real database, as two Kakin processes see them (on PostgreSQL two
/// connection pools on one schema; on SQLite two stores over one database): a change made through one is what the other
/// answers at its next read, an enrollment is recorded once with one event, an invalid change leaves everything as it was.
@Suite struct OfferingsService {
    static let catalogs = ProductCatalogs([.appStore: ["coins.100", "premium"], .web: ["coins.100", "premium"]])

    static func offerings(_ store: KakinStore, clock: any Clock) -> Offerings {
        Offerings(store: store, settings: .init(catalogs: catalogs), catalog: testCatalog, clock: clock, events: testEvents,
                  metricsSettings: MetricsSettings(apps: [AppMetricsSettings(bundleId: "com.example", calendar: FixedOffsetCalendar(), environments: [.sandbox])]))
    }

    /// Two processes' stores on one database of `backend`.
    static func withTwoProcesses(_ backend: Backend, _ body: (KakinStore, KakinStore, TestClock) async throws -> Void) async throws {
        let clock = TestClock()
        switch backend {
        case .sqlite:
            try await withDatabase(.sqlite) { db in
                let a = KakinStore(database: db, ids: CountingIDs(), clock: clock)
                try await a.migrate()
                try await body(a, KakinStore(database: db, ids: CountingIDs(), clock: clock), clock)
            }
        case .postgresql:
            try await TestPostgres.withSchema { schema in
                let one = try PostgresDatabase(url: schema.url, options: .init(connectTimeoutSeconds: 30))
                let two = try PostgresDatabase(url: schema.url, options: .init(connectTimeoutSeconds: 30))
                do {
                    let a = KakinStore(database: one, ids: CountingIDs(), clock: clock)
                    try await a.migrate()
                    try await body(a, KakinStore(database: two, ids: CountingIDs(), clock: clock), clock)
                } catch {
                    await one.close()
                    await two.close()
                    throw error
                }
                await one.close()
                await two.close()
            }
        }
    }

    static let ios = Offerings.Query(placement: "onboarding", platform: .ios)

    /// Offerings `coins` and `premium`, placement `onboarding` showing `coins`.
    static func defineTwoOfferingsAndAPlacement(_ o: Offerings) async throws {
        _ = try await o.put(.offering, id: "coins", body: ["packages": [["id": "c", "appStore": "coins.100"]]], actor: "aiko")
        _ = try await o.put(.offering, id: "premium", body: ["packages": [["id": "m", "appStore": "premium"]]], actor: "aiko")
        _ = try await o.put(.placement, id: "onboarding", body: ["default": "coins"], actor: "aiko")
    }

    @Test(arguments: Backend.available) func aChangeThroughOneProcessIsAnsweredByTheOtherAtItsNextRead(_ backend: Backend) async throws {
        try await Self.withTwoProcesses(backend) { a, b, clock in
            let one = Self.offerings(a, clock: clock), two = Self.offerings(b, clock: clock)
            try await Self.defineTwoOfferingsAndAPlacement(one)
            #expect(try await two.offering(customerId: "u1", query: Self.ios)["offering"]?["id"] == "coins")
            // The other process changes the placement; the first one, which compiled version 1, answers version 2 next.
            let stored = try await two.put(.placement, id: "onboarding", body: ["default": "premium"], actor: "ken")
            #expect(stored["version"] == 2 && stored["updatedBy"] == "ken")
            #expect(try await one.offering(customerId: "u1", query: Self.ios)["offering"]?["id"] == "premium")
            // An unchanged body is no new version and no audit entry.
            #expect(try await one.put(.placement, id: "onboarding", body: ["default": "premium"], actor: "aiko")["version"] == 2)
            let audit = try await two.audit(limit: 50, cursor: nil, kind: nil, id: nil)["entries"]?.arrayValue ?? []
            #expect(audit.map { "\($0["kind"]?.stringValue ?? "") \($0["objectId"]?.stringValue ?? "") v\($0["version"]?.int64Value ?? 0) \($0["actor"]?.stringValue ?? "")" }
                    == ["placement onboarding v2 ken", "placement onboarding v1 aiko", "offering premium v1 aiko", "offering coins v1 aiko"])
            #expect(audit.first?["change"] == ["changed": ["default": ["from": "coins", "to": "premium"]]])
        }
    }

    @Test(arguments: Backend.available) func anInvalidChangeIsRefusedAndNothingChanges(_ backend: Backend) async throws {
        try await Self.withTwoProcesses(backend) { a, _, clock in
            let o = Self.offerings(a, clock: clock)
            _ = try await o.put(.offering, id: "coins", body: ["packages": [["id": "c", "appStore": "coins.100"]]], actor: "aiko")
            _ = try await o.put(.placement, id: "onboarding", body: ["default": "coins"], actor: "aiko")
            let before = try await a.snapshot { r in (try r.offerings.revision(), try r.offerings.objects()) }
            for (kind, id, body, expected) in [
                (OfferingObjectKind.offering, "coins", ["packages": [["id": "c", "appStore": "coins.9999"]]] as JSONValue, ErrorKind.offeringUnknownProduct),
                (.offering, "play", ["packages": [["id": "c", "googlePlay": "coins_500"]]], .storeCatalogNotConfigured),
                (.placement, "onboarding", ["default": "missing"], .offeringNotDefined),
                (.experiment, "e1", ["placement": "onboarding", "enrollmentPercent": 50, "startsAt": "2026-01-01T00:00:00Z",
                                     "variants": [["id": "a", "offering": "coins", "weight": 1], ["id": "b", "offering": "coins", "weight": -1]]], .experimentInvalid),
                (.placement, "bad id!", ["default": "coins"], .placementInvalid),
            ] {
                do throws(KakinError) {
                    _ = try await o.put(kind, id: id, body: body, actor: "aiko")
                    Issue.record("\(kind) \(id) was accepted")
                } catch {
                    #expect(error.kind == expected && error.httpStatus == 422)
                }
            }
            let after = try await a.snapshot { r in (try r.offerings.revision(), try r.offerings.objects()) }
            #expect(after.0 == before.0 && after.1 == before.1)
            #expect(try await o.audit(limit: 50, cursor: nil, kind: nil, id: nil)["entries"]?.arrayValue?.count == 2)
        }
    }

    @Test(arguments: Backend.available) func anEnrollmentIsRecordedOnceWithOneEventWhateverAsksAtOnce(_ backend: Backend) async throws {
        try await Self.withTwoProcesses(backend) { a, b, clock in
            let one = Self.offerings(a, clock: clock), two = Self.offerings(b, clock: clock)
            try await Self.defineTwoOfferingsAndAPlacement(one)
            _ = try await one.put(.experiment, id: "e1", body: [
                "placement": "onboarding", "enrollmentPercent": 100, "startsAt": .string(Timestamp.rfc3339(clock.nowMs() - 1)),
                "variants": [["id": "a", "offering": "coins", "weight": 1], ["id": "b", "offering": "premium", "weight": 1]],
            ], actor: "aiko")
            let answers = try await withThrowingTaskGroup(of: JSONValue.self) { group in
                for i in 0..<16 { group.addTask { try await (i % 2 == 0 ? one : two).offering(customerId: "u1", query: Self.ios) } }
                return try await group.reduce(into: [JSONValue]()) { $0.append($1) }
            }
            #expect(Set(answers).count == 1, "\(Set(answers))")
            let variant = try #require(answers.first?["experiment"]?["variant"]?.stringValue)
            let events = try await a.customerEvents(customerId: "u1", afterSequence: 0, limit: 50)
            #expect(events.map(\.type) == ["customer.created", "experiment.enrolled"])
            let enrolled = try #require(events.last.flatMap { Event(payload: $0.payload) })
            #expect(enrolled.data["experiment"] == "e1" && enrolled.data["variant"] == .string(variant) && enrolled.data["placement"] == "onboarding")
            let rows = try await a.snapshot { r in try r.offerings.enrollments(experimentId: "e1", variantId: nil, afterCustomerId: nil, limit: 10) }
            #expect(rows.map(\.customerId) == ["u1"] && rows.map(\.variantId) == [variant])
            // Sticky: weights changed afterwards move no one.
            _ = try await two.put(.experiment, id: "e1", body: [
                "placement": "onboarding", "enrollmentPercent": 100, "startsAt": .string(Timestamp.rfc3339(clock.nowMs() - 1)),
                "variants": [["id": "a", "offering": "coins", "weight": variant == "a" ? 1 : 1_000], ["id": "b", "offering": "premium", "weight": variant == "b" ? 1 : 1_000]],
            ], actor: "ken")
            #expect(try await one.offering(customerId: "u1", query: Self.ios)["experiment"]?["variant"]?.stringValue == variant)
        }
    }
}
