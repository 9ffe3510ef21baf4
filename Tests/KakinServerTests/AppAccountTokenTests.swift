import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import KakinStorage
import Testing

/// A purchase made outside the app carries no `appAccountToken`. Once Kakin links it to a customer it tells
/// Apple the customer's token (Set App Account Token, a durable background job), so the purchase's later
/// signed transactions name the customer by themselves — here at the simulator, which re-signs the chain.
@Suite(.serialized) struct AppAccountTokens {
    static let catalog = OfferCodeAndWinBackFlows.catalog

    func redeemOutsideTheApp(_ k: SimulatedKakin, _ customer: String) async throws -> JSONValue {
        try await k.sim("POST", "/simulator/v1/purchases", ["productId": "premium.monthly", "appAccountToken": .string(try await k.token(customer)),
                                                           "offer": ["type": "offerCode", "id": "Free month"], "outsideApp": true])
    }

    /// The newest signed copy Kakin holds of the customer's subscription, decoded.
    func latestTransaction(_ k: SimulatedKakin, _ customer: String) async throws -> JSONValue {
        let snapshot = try #require(try await k.app.store.customerSnapshot(customer))
        return try #require(snapshot.history.transactions.first?.raw)
    }

    @Test func anOfferCodeRedeemedOutsideTheAppIsLinkedAndItsRenewalCarriesTheCustomersToken() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let token = try await k.token("u2")
            let redeemed = try await redeemOutsideTheApp(k, "u2")
            let ot = try #require(redeemed["originalTransactionId"]?.stringValue)
            #expect(StoredJWS.payload(redeemed["signedTransaction"]!.stringValue!)?["appAccountToken"] == nil)
            #expect(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot) == nil, "nobody to link it to yet")

            // The app sees it in Transaction.updates and hands it over: linked, and Apple is to be told.
            #expect(await k.kakin("POST", "/v1/customers/u2/transactions", ["signedTransaction": redeemed["signedTransaction"]!]).status == 201)
            #expect(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot)?.state == .pending)
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 1)
            let sent = try #require(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot))
            #expect(sent.state == .sent)
            #expect(sent.appAccountToken == token)
            #expect(k.app.metrics.value(.appAccountTokensSet) == 1)
            // Presented again (a retry, a restore): nothing more to tell Apple.
            #expect(await k.kakin("POST", "/v1/customers/u2/transactions", ["signedTransaction": redeemed["signedTransaction"]!]).status == 409)
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 0)

            // The free month ends; the renewal Apple signs names the customer.
            try await k.advance(days: 35)
            let renewal = try await latestTransaction(k, "u2")
            #expect(renewal["originalTransactionId"] == .string(ot))
            #expect(renewal["transactionId"] != .string(ot), "a renewal, not the redemption")
            #expect(renewal["appAccountToken"] == .string(token))
            #expect(try await k.subscription("u2")["state"] == "subscribed")

            let events = try await k.app.services.timeline.page(customerId: "u2", limit: 100, after: nil).items.map(\.kind)
            #expect(events.contains("appAccountToken.scheduled"))
            #expect(events.contains("appAccountToken.sent"))
        }
    }

    @Test func aLapsedSubscriberLinkedByTheOriginalTransactionGetsTheTokenOnTheRedemptionsChain() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let token = try await k.token("u1")
            let ot = try await OfferCodeAndWinBackFlows().lapse(k, "u1")
            #expect(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot) == nil, "bought in the app: it has the token")
            // Redeemed in the App Store: only the notification reaches Kakin, linked by the original transaction.
            let redeemed = try await redeemOutsideTheApp(k, "u1")
            #expect(StoredJWS.payload(redeemed["signedTransaction"]!.stringValue!)?["appAccountToken"] == nil)
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 1)
            try await k.advance(days: 35)
            #expect(try await latestTransaction(k, "u1")["appAccountToken"] == .string(token))
        }
    }

    @Test func anAppStoreThatCannotBeReachedIsTriedAgainLater() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let redeemed = try await redeemOutsideTheApp(k, "u2")
            let ot = try #require(redeemed["originalTransactionId"]?.stringValue)
            #expect(await k.kakin("POST", "/v1/customers/u2/transactions", ["signedTransaction": redeemed["signedTransaction"]!]).status == 201)
            let connection = k.app.services.appStore.swap(nil)
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 1)
            let waiting = try #require(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot))
            #expect(waiting.state == .pending)
            #expect(waiting.attempts == 1)
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 0, "not due before its backoff")
            // Until Apple is told, its renewals don't name the customer.
            try await k.advance(days: 35)
            #expect(try await latestTransaction(k, "u2")["appAccountToken"] == nil)

            k.app.services.appStore.swap(connection)
            try await k.app.store.database.write { db in _ = try db.execute("UPDATE app_account_token_requests SET next_attempt_ms = 0", []) }
            #expect(await k.app.services.appStoreJobs.processDueAppAccountTokens() == 1)
            #expect(try await k.app.store.appAccountTokenRequest(originalTransactionId: ot)?.state == .sent)
            try await k.advance(days: 31)
            #expect(try await latestTransaction(k, "u2")["appAccountToken"] == .string(try await k.token("u2")))
        }
    }
}
