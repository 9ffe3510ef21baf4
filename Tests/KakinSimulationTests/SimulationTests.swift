import KakinSimulation
import KakinTestPostgres
import Testing

/// A few seeds of the whole-system simulation, briefly (CI's share of `kakin simulate`; `scripts/simulate --minutes N`
/// runs random seeds for longer). Every fault is on; a broken invariant fails with its seed, step and name.
@Suite struct SimulationTests {
    static func small(_ seed: UInt64, database: String? = nil) -> SimulationOptions {
        var o = SimulationOptions(seed: seed, customers: 25, days: 21, faults: .all, databaseURL: database)
        o.actionsPerCustomerDay = 0.15
        o.printDays = false
        return o
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func seedHoldsEveryInvariant(seed: UInt64) async throws {
        let result = try await Simulation.run(Self.small(seed))
        #expect(result.failure == nil, "\(result.failure.map(String.init(describing:)) ?? "")")
        #expect(result.actions > 0)
        #expect(result.faultsInjected > 0)
    }

    @Test func sameSeedSameDigest() async throws {
        let a = try await Simulation.run(Self.small(11))
        let b = try await Simulation.run(Self.small(11))
        #expect(a.failure == nil)
        #expect(a.digest == b.digest)
        #expect(a.steps == b.steps)
        let other = try await Simulation.run(Self.small(12))
        #expect(other.digest != a.digest)
    }

    @Test func replayStopsAtTheStep() async throws {
        var o = Self.small(5)
        o.untilStep = 20
        let r = try await Simulation.run(o)
        #expect(r.stoppedAt == 20)
        #expect(r.steps == 20)
    }

    @Test(.postgreSQL) func postgresqlToo() async throws {
        try await TestPostgres.withSchema { schema in
            let r = try await Simulation.run(Self.small(4, database: schema.url))
            #expect(r.failure == nil, "\(r.failure.map(String.init(describing:)) ?? "")")
        }
    }

    @Test func faultListsParse() {
        #expect(FaultSet(list: "none") == [])
        #expect(FaultSet(list: "all") == .all)
        #expect(FaultSet(list: "drop,crash") == [.drop, .crash])
        #expect(FaultSet(list: "drop,nonsense") == nil)
    }
}
