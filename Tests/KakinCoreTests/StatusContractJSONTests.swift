import KakinCore
import Testing

/// The body of `GET /v1/customers/{customerId}` has the contract's exact shape.
@Suite struct StatusContractJSONTests {
    typealias F = StatusFixtures

    static func richStatus() -> CustomerStatus {
        let promo = F.transaction("1001", original: "1000", product: "premium.monthly", purchase: F.at(day: 30), expires: F.at(day: 395),
                                  offerType: 2, offerId: "promo.1y.free", discount: "FREE_TRIAL", offerPeriod: "P1Y", price: 0)
        let pending = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.6m.free", offerPeriod: "P6M", signed: F.at(day: 50))
        let extras = F.transaction("3000", product: "extras.monthly", purchase: F.at(day: 20), expires: F.at(day: 50))
        let extrasRenewal = F.renewal("3000", product: "extras.monthly", intent: 2, retry: true, grace: F.at(day: 66), signed: F.at(day: 50))
        let noads = F.transaction("4000", product: "noads", type: .nonConsumable, purchase: F.t0, familyShared: true)
        let pass = F.transaction("5000", product: "season.pass", type: .nonRenewing, purchase: F.at(day: 10))
        let coins = F.transaction("6000", product: "coins.100", type: .consumable, purchase: F.t0)
        return F.evaluate([F.monthly("1000", startDay: 0), promo, extras, noads, pass, coins], [pending, extrasRenewal], atDay: 60)
    }

    @Test func customerBodyHasExactlyTheContractKeysAndTypes() throws {
        let json = Self.richStatus().json(customerId: "u1", appAccountToken: "6f1c0e4c-2b7a-4a4e-9a6e-2f7a1d0b9c11",
                                          wallet: WalletBalance(paid: 60, free: 40))
        let top = try #require(json.objectValue)
        #expect(Set(top.keys) == ["customerId", "appAccountToken", "status", "subscriptions", "nonConsumables", "nonRenewing", "wallet", "eligibility"])
        #expect(top["customerId"] == "u1")
        #expect(top["appAccountToken"] == "6f1c0e4c-2b7a-4a4e-9a6e-2f7a1d0b9c11")
        #expect(top["status"] == "active")
        #expect(top["wallet"] == ["paid": 60, "free": 40, "total": 100])
        #expect(top["eligibility"] == ["introductoryOffer": ["premium": false, "extras": false]])

        let subs = try #require(top["subscriptions"]?.arrayValue)
        #expect(subs.count == 2)
        let subKeys: Set<String> = ["groupId", "productId", "originalTransactionId", "state", "expiresAt", "gracePeriodExpiresAt",
                                    "willAutoRenew", "autoRenewProductId", "ownership", "offer", "pendingOffer", "expirationReason",
                                    "eligibleWinBackOfferIds", "source"]
        for s in subs { #expect(Set(s.objectValue?.keys ?? [:].keys) == subKeys) }

        // Groups sort "extras" before "premium".
        #expect(subs[0] == [
            "groupId": "extras", "productId": "extras.monthly", "originalTransactionId": "3000", "state": "inGracePeriod",
            "expiresAt": "2026-07-21T00:00:00Z", "gracePeriodExpiresAt": "2026-08-06T00:00:00Z", "willAutoRenew": true,
            "autoRenewProductId": "extras.monthly", "ownership": "purchased", "offer": nil, "pendingOffer": nil, "expirationReason": nil,
            "eligibleWinBackOfferIds": [], "source": "appStore",
        ])
        #expect(subs[1] == [
            "groupId": "premium", "productId": "premium.monthly", "originalTransactionId": "1000", "state": "subscribed",
            "expiresAt": "2027-07-01T00:00:00Z", "gracePeriodExpiresAt": nil, "willAutoRenew": true,
            "autoRenewProductId": "premium.monthly", "ownership": "purchased",
            "offer": ["type": "promotional", "id": "promo.1y.free"],
            "pendingOffer": ["type": "promotional", "id": "promo.6m.free", "period": "P6M"], "expirationReason": nil,
            "eligibleWinBackOfferIds": [], "source": "appStore",
        ])
        #expect(top["nonConsumables"] == [["productId": "noads", "transactionId": "4000", "ownership": "familyShared", "source": "appStore"]])
        #expect(top["nonRenewing"] == [["productId": "season.pass", "expiresAt": "2026-09-09T00:00:00Z", "active": true, "source": "appStore"]])
    }

    @Test func missingAppAccountTokenIsNullAndEmptyListsStayLists() throws {
        let json = F.evaluate([], atDay: 0).json(customerId: "u2", appAccountToken: nil, wallet: WalletBalance())
        #expect(json == [
            "customerId": "u2", "appAccountToken": nil, "status": "new", "subscriptions": [], "nonConsumables": [], "nonRenewing": [],
            "wallet": ["paid": 0, "free": 0, "total": 0], "eligibility": ["introductoryOffer": ["premium": true, "extras": true]],
        ])
    }

    @Test func expiredSubscriptionWritesItsReasonAndNoOffers() throws {
        let tx = F.monthly("1000", startDay: 0, offerType: 2, offerId: "promo.3m.half")
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 3, signed: F.at(day: 30))
        let sub = try #require(F.evaluate([tx], [renewal], atDay: 40).subscriptions.first)
        #expect(sub.json["state"] == "expired")
        #expect(sub.json["expirationReason"] == "priceIncrease")
        #expect(sub.json["offer"] == .null)
        #expect(sub.json["willAutoRenew"] == false)
    }
}
