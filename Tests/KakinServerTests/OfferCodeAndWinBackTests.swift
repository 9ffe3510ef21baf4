import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// Offer codes and win-back offers end to end: often redeemed outside the app, so the transaction carries no
/// `appAccountToken`; Kakin links it by its original transaction (a returning subscriber) or when the app
/// presents it (a new one), and shows the offer and the win-back offers Apple lists.
@Suite(.serialized) struct OfferCodeAndWinBackFlows {
    /// The demo catalog with a free-month offer code and a one-week free win-back offer on the monthly plan.
    static let catalog: Catalog = {
        var c = Catalog.demo
        var monthly = c["premium.monthly"]!
        monthly.offerCodes = [SubscriptionOffer(id: "Free month", type: .offerCode, mode: .freeTrial, period: ISOPeriod(months: 1))]
        monthly.winBackOffers = [SubscriptionOffer(id: "winback.1w", type: .winBack, mode: .freeTrial, period: ISOPeriod(weeks: 1))]
        c.upsert(monthly)
        return c
    }()

    func redeem(_ k: SimulatedKakin, _ customer: String, _ offer: JSONValue, outsideApp: Bool) async throws -> JSONValue {
        try await k.sim("POST", "/simulator/v1/purchases", ["productId": "premium.monthly", "appAccountToken": .string(try await k.token(customer)),
                                                           "offer": offer, "outsideApp": .bool(outsideApp)])
    }

    /// The free week, a paid month, cancelled, lapsed.
    func lapse(_ k: SimulatedKakin, _ customer: String) async throws -> String {
        let ot = try #require(try await k.buy(customer, "premium.monthly")["originalTransactionId"]?.stringValue)
        try await k.advance(days: 10)
        try await k.action(ot, "disableAutoRenew")
        try await k.advance(days: 40)
        return ot
    }

    @Test func lapsedSubscriberRedeemingAnOfferCodeInTheAppStoreIsLinkedByTheOriginalTransaction() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await lapse(k, "u1")
            let redeemed = try await redeem(k, "u1", ["type": "offerCode", "id": "Free month"], outsideApp: true)
            #expect(redeemed["originalTransactionId"] == .string(ot))
            #expect(StoredJWS.payload(redeemed["signedTransaction"]!.stringValue!)?["appAccountToken"] == nil)
            // Only the notification reached Kakin, and it found the customer by the original transaction.
            let sub = try await k.subscription("u1")
            #expect(sub["state"] == "subscribed")
            #expect(sub["offer"] == ["type": "offerCode", "id": "Free month"])
            #expect(try await k.status("u1")["status"] == "active")
        }
    }

    @Test func newCustomerRedeemingAnOfferCodeOutsideTheAppIsLinkedWhenTheAppPresentsIt() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let redeemed = try await redeem(k, "u2", ["type": "offerCode", "id": "Free month"], outsideApp: true)
            // SUBSCRIBED/INITIAL_BUY without a token: nobody to link it to yet.
            #expect(try await k.status("u2")["status"] == "new")
            // The app sees it in Transaction.updates and hands it over.
            let presented = await k.kakin("POST", "/v1/customers/u2/transactions", ["signedTransaction": redeemed["signedTransaction"]!])
            #expect(presented.status == 201)
            let sub = try await k.subscription("u2")
            #expect(sub["offer"] == ["type": "offerCode", "id": "Free month"])
            #expect(sub["state"] == "subscribed")
            // Renewals now follow it by the original transaction.
            try await k.advance(days: 35)
            #expect(try await k.subscription("u2")["state"] == "subscribed")
            #expect(try await k.subscription("u2")["offer"] == .null)
        }
    }

    @Test func currentSubscriberRedeemingAnOfferCodeHasItPendingForTheRenewal() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            _ = try await k.buy("u1", "premium.monthly")
            let redeemed = try await redeem(k, "u1", ["type": "offerCode", "id": "Free month"], outsideApp: false)
            #expect(redeemed["outcome"] == "offerPending")
            #expect(try await k.subscription("u1")["pendingOffer"] == ["type": "offerCode", "id": "Free month", "period": "P1M"])
        }
    }

    @Test func lapsedSubscriberSeesTheWinBackOffersAppleListsAndRedeemsOne() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await lapse(k, "u1")
            let lapsed = try await k.subscription("u1")
            #expect(lapsed["state"] == "expired")
            #expect(lapsed["eligibleWinBackOfferIds"] == ["winback.1w"])
            let redeemed = try await redeem(k, "u1", ["type": "winBack", "id": "winback.1w"], outsideApp: false)
            #expect(redeemed["originalTransactionId"] == .string(ot))
            let back = try await k.subscription("u1")
            #expect(back["state"] == "subscribed")
            #expect(back["offer"] == ["type": "winBack", "id": "winback.1w"])
            #expect(back["eligibleWinBackOfferIds"] == [])
        }
    }
}
