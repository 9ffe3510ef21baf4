import KakinCore
import KakinMetrics
import KakinService
import KakinStorage
import KakinTestPostgres
@testable import KakinServer
import Testing

/// The business numbers' worker (issue 26): one pass covers every event since the last, each customer recomputed once
/// however often it changed meanwhile; a pass stops before a customer beyond its limit and the next one goes on from
/// there; the numbers are exactly what the facts say (a rebuild finds nothing to correct), on both engines.
@Suite struct RollupPasses {
    @Test func aCustomerChangedManyTimesBetweenPassesIsRecomputedOnceAndTheNumbersAreExact() async throws {
        try await Self.run(database: nil)
    }

    @Test(.postgreSQL) func theSameOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in try await Self.run(database: .postgresql(url: schema.url)) }
    }

    static func run(database: Configuration.Database?) async throws {
        try await SimulatedKakin.with(database: database) { k in
            let numbers = k.app.services.businessMetrics, store = k.app.services.store
            await numbers.worker.stop()
            // A buys coins ten times between passes; B subscribes, C buys coins once.
            for _ in 0..<4 { try await k.buy("A", "coins.500") }
            try await k.buy("B", "premium.monthly")
            for _ in 0..<5 { try await k.buy("A", "coins.500") }
            try await k.buy("C", "coins.500")
            try await k.buy("A", "coins.500")

            // Every event readable (on PostgreSQL the feed serves a transaction's events once none older runs).
            var written = 0
            for c in ["A", "B", "C"] { written += try await store.customerEvents(customerId: c, afterSequence: 0, limit: 100).count }
            #expect(try await eventually {
                try await store.snapshot { r in try r.customersWithEvents(after: .start, eventsMax: 10_000, customersMax: 10).events } == written
            })

            // Two customers a read: the first stops before C's first event, the second takes the rest.
            let (first, second, one) = try await store.snapshot { r -> (MetricsEventsRead, MetricsEventsRead, MetricsEventsRead) in
                let first = try r.customersWithEvents(after: .start, eventsMax: 10_000, customersMax: 2)
                return (first, try r.customersWithEvents(after: first.next, eventsMax: 10_000, customersMax: 2),
                        try r.customersWithEvents(after: .start, eventsMax: 1, customersMax: 2))
            }
            #expect(first.customers == ["A", "B"] && !first.end)
            #expect(second.customers == ["C", "A"] && second.end)
            #expect(one.customers == ["A"] && one.events == 1 && !one.end, "a read stops at its events too")

            // One pass: every event, three customers recomputed; then nothing is left.
            let pass = try await numbers.step()
            #expect(pass.events == first.events + second.events && pass.customers == 3 && pass.caughtUp)
            let after = try await numbers.step()
            #expect(after.events == 0 && after.customers == 0 && after.caughtUp)

            let today = String(Timestamp.rfc3339(k.nowMs).prefix(10))
            let overview = try await numbers.overview(from: "2026-01-01", to: today, filter: MetricsFilter())
            #expect(overview.coinsSold == 11 * 500 && overview.coinsGrantedFree == 11 * 50)
            #expect(overview.revenue.first?.bySource["appStore"]?.gross == 11 * 600 && overview.activeSubscriptions == 1, "B is in its free week")
            let rebuilt = try await numbers.rebuild()
            #expect(rebuilt.differing == 0, "\(rebuilt.sample)")
        }
    }
}
