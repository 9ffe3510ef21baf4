import Foundation
import KakinCore
import KakinMetrics
import KakinService
import KakinTestPostgres
@testable import KakinServer
import Synchronization
import Testing

/// `kakin report rebuild` works one customer range per write, so purchases are credited while it runs (issue 28): here
/// each range is one customer, and a purchase is made and credited between two of the rebuild's writes; the rebuild
/// then leaves the numbers the facts give, and a second one finds nothing to correct.
@Suite struct RebuildInChunks {
    @Test func purchasesAreCreditedBetweenTheRebuildsWrites() async throws {
        try await Self.run(database: nil)
    }

    @Test(.postgreSQL) func theSameOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in try await Self.run(database: .postgresql(url: schema.url)) }
    }

    static func run(database: Configuration.Database?) async throws {
        try await SimulatedKakin.with(database: database) { k in
            let numbers = k.app.services.businessMetrics
            for c in ["A", "B", "C", "D"] { try await k.buy(c, c == "B" ? "premium.plus.monthly" : "coins.500") }
            try await numbers.catchUp()
            let credited = Mutex<[Int: Int]>([:])
            let result = try await numbers.rebuild(customersPerWrite: 1) { done in
                guard done == 2 else { return }
                // Mid-rebuild: a new customer buys and is credited (the app's POST answers once it is committed).
                let answer = try? await k.buy("E", "coins.500")
                let wallet = await k.kakin("GET", "/v1/customers/E/wallet").json
                credited.withLock { $0[done] = answer == nil ? -1 : Int(wallet["paid"]?.int64Value ?? 0) }
            }
            #expect(credited.withLock { $0 } == [2: 500], "E's coins credited between the rebuild's second and third writes")
            #expect(result.writes >= 4 && result.customers >= 4, "\(result)")
            try await numbers.catchUp()
            let again = try await numbers.rebuild()
            #expect(again.differing == 0, "\(again.sample)")
            let today = String(Timestamp.rfc3339(k.nowMs).prefix(10))
            let o = try await numbers.overview(from: today, to: today, filter: MetricsFilter())
            #expect(o.coinsSold == 2_000 && o.activeSubscriptions == 1, "\(o)")
            print("rebuild in chunks (\(database == nil ? "SQLite" : "PostgreSQL")): \(result.customers) customers in \(result.writes) writes; E credited mid-rebuild")
        }
    }
}
