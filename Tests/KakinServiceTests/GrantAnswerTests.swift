import KakinCore
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinService

/// A grant's answer and its event are written straight to bytes: the bytes are the documents' trees serialized.
@Suite struct GrantAnswerTests {
    @Test(arguments: Backend.available) func aGrantAnswersAndTellsTheDocumentsItsTreesSerializeTo(_ backend: Backend) async throws {
        try await withStore(backend) { store async throws in
            _ = try await ingest(store).present("u1", transaction("1"))
            let answer = try await wallets(store).grant(GrantRequest(customerId: "u1", idempotencyKey: "g1", amount: 7, reason: "sorry \"ß\"\n"))
            let wallet = try await store.wallet("u1")
            let tree: JSONValue = ["grantId": .string((try JSONParser.parse(answer.body))["grantId"]?.stringValue), "amount": 7,
                                   "reason": "sorry \"ß\"\n", "wallet": wallet.json]
            #expect(answer.status == 201 && answer.body == tree.serialized())
            // The event's customer is the status as a status read answers it: the status's tree with its version.
            let snapshot = try #require(try await store.customerStatusInputs("u1"))
            let status = StatusEngine.evaluate(snapshot.history, catalog: testCatalog, nowMs: TestClock().nowMs())
            guard case .object(var customer) = status.json(customerId: "u1", appAccountToken: snapshot.customer.appAccountToken,
                                                           wallet: snapshot.wallet) else { Issue.record("a status is an object"); return }
            customer["version"] = .int(snapshot.version)
            let granted = try #require(try await store.customerEvents(customerId: "u1", afterSequence: 0, limit: 50).last)
            #expect(granted.type == "coins.granted")
            #expect(try JSONParser.parse(granted.payload)["data"]?["customer"] == .object(customer))
        }
    }
}
