import AppStoreClient
import KakinCore
import Testing

/// Apple's published rate limits ("Identifying rate limits"): with a pacing clock, one client's calls to each endpoint
/// are spaced at the endpoint's rate (the sandbox's 10 % of production), whichever task makes them.
@Suite struct RateLimitTests {
    static let infoBody: JSONValue = ["signedTransactionInfo": "jws"]

    func harness(_ server: AppStoreServerAPIConfiguration.Server) throws -> (AppStoreServerAPIClient, ManualClock, AdvancingSleeper, ScriptedTransport) {
        let clock = ManualClock()
        let sleeper = AdvancingSleeper(clock: clock)
        let transport = ScriptedTransport([ok(Self.infoBody)])
        let client = try AppStoreServerAPIClient(configuration: makeConfiguration(server: server), clock: clock, transport: transport,
                                                 sleeper: sleeper, pacingClock: clock)
        return (client, clock, sleeper, transport)
    }

    @Test func callsToOneEndpointAreSpacedAtApplesRate() async throws {
        let (client, _, sleeper, transport) = try harness(.apple)
        for _ in 0..<5 { _ = try await client.transactionInfo(transactionId: "1") }
        // 50 requests per second in production: one every 20 ms, the first at once.
        #expect(sleeper.waitsMs == [20, 20, 20, 20])
        #expect(transport.requests.count == 5)
    }

    @Test func theSandboxHasATenthOfTheRate() async throws {
        let (client, _, sleeper, _) = try harness(.appleSandbox)
        for _ in 0..<3 { _ = try await client.transactionInfo(transactionId: "1") }
        #expect(sleeper.waitsMs == [200, 200])
    }

    @Test func endpointsHaveTheirOwnBudgetAndTheSimulatorIsNotPaced() async throws {
        let (client, _, sleeper, _) = try harness(.apple)
        _ = try await client.transactionInfo(transactionId: "1")
        _ = try? await client.lookUpOrderId("MK5TTTVWJH")
        #expect(sleeper.waitsMs.isEmpty)
        let (simulator, _, simulatorSleeper, _) = try harness(.baseURL("http://127.0.0.1:1/simulator", environment: .sandbox))
        for _ in 0..<3 { _ = try await simulator.transactionInfo(transactionId: "1") }
        #expect(simulatorSleeper.waitsMs.isEmpty)
    }
}
