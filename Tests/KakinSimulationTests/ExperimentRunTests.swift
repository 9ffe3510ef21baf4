import KakinCore
import Testing
@testable import KakinSimulation

/// `kakin simulate --experiment`: an A/B test through the whole system (KakinKit on simulated phones, the simulated
/// App Store, Kakin's use cases on SQLite). Kakin's results must count exactly what the world did, and see a clearly
/// better variant as better. (`Tests/KakinOfferingsTests` runs the 4,000-customer cases, 12 % against 8 % and 20
/// seeds of equal rates, at the level of the results; the command runs them here: see `Sources/KakinSimulation/README.md`.)
@Suite struct ExperimentRunTests {
    @Test func theResultsCountWhatTheCustomersBoughtAndFindTheBetterVariant() async throws {
        let rates = try #require(ExperimentRun.parse("a=0.05,b=0.30"))
        let outcome = try await ExperimentRun.run(SimulationOptions(seed: 7, customers: 600, faults: [], printDays: false), rates: rates)
        #expect(outcome.matches, "\(outcome.results)")
        #expect(outcome.enrolled.values.reduce(0, +) == 600)
        let b = outcome.results["variants"]?.arrayValue?.last
        #expect((b?["probabilityToBeatControl"]?.doubleValue ?? 0) > 0.95)
        let lines = ExperimentRun.lines(outcome, rates: rates, seed: 7)
        #expect(lines.last?.hasPrefix("results match the purchases made") == true && lines[2].contains("P(beats a)"))
    }

    @Test func theVariantsAreTwoToFourWithRatesFromZeroToOne() {
        #expect(ExperimentRun.parse("a=0.08,b=0.12")?.map(\.id) == ["a", "b"])
        for bad in ["a=0.08", "a=0.1,b=1.5", "a=0.1,a=0.2", "a=0.1,b=x", "a=.1,b=.1,c=.1,d=.1,e=.1", "a b=0.1,c=0.2"] {
            #expect(ExperimentRun.parse(bad) == nil, "\(bad)")
        }
    }
}
