import KakinCore
import KakinService
import Testing
@testable import KakinSimulation

/// Regressions found by `kakin simulate`, each replayed as a short script on the same world.
@Suite struct SimulationRegressionTests {
    /// Seed 280394968700754 (200 customers, 90 days): a customer signed in to another customer's Apple account restored
    /// with that account's season pass. The restore was refused (403), yet the account's family-shared subscription,
    /// not yet claimed, had been linked to the presenter first: its rightful member was then refused for good.
    @Test func aRefusedRestoreClaimsNothing() async throws {
        let world = try await World(SimulationOptions(seed: 99, customers: 2, days: 1, faults: [], printDays: false))
        try await world.createCustomers()
        let member = world.customers[1], other = world.customers[0]
        let bought = await world.buy(member, "season.pass")
        #expect(bought.contains("completed"), "\(bought)")
        let seasonPass = try #require(world.model.state.withLock { $0.chargesOf[member.index]?.last })
        let shared = await world.control("POST", "/simulator/v1/purchases",
                                         ["productId": "premium.monthly", "appAccountToken": .string(member.token), "familyShared": true])
        let otid = try #require(shared.json?["originalTransactionId"]?.stringValue)

        await #expect(throws: KakinError.self) {
            try await world.services.appStoreSync.restore(customerId: other.id, transactionId: seasonPass)
        }
        let linked = try await world.services.store.transaction { r in try r.linkOwner(originalTransactionId: otid) }
        #expect(linked == nil, "a refused restore linked \(otid) to \(linked ?? "")")
        // The member's own restore claims it.
        try await world.services.appStoreSync.restore(customerId: member.id, transactionId: seasonPass)
        let owner = try await world.services.store.transaction { r in try r.linkOwner(originalTransactionId: otid) }
        #expect(owner == member.id)
        await world.close()
    }
}
