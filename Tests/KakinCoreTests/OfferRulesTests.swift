import KakinCore
import Testing

/// Who Kakin signs a promotional offer for: the app's `offerRules` over the customer's signed history.
@Suite struct OfferRulesTests {
    typealias F = StatusFixtures

    func refusal(_ rule: OfferRule, _ transactions: [TransactionPayload], _ renewals: [RenewalInfoPayload] = [], atDay day: Double,
                 group: String = "premium") -> OfferRefusal? {
        let history = CustomerHistory(transactions: transactions, renewalInfos: renewals)
        return OfferRules.refusal(rule: rule, groupId: group, status: F.evaluate(transactions, renewals, atDay: day), history: history,
                                  catalog: F.catalog)
    }

    /// Who is in which audience: never subscribed, current (paid, grace), lapsed (expired, billing retry, refunded),
    /// and a family member, whose shared subscription does not count.
    @Test func audiencesSplitCustomersByTheirSubscriptionInTheOffersGroup() {
        let paid = [F.monthly("1000", startDay: 0)]
        let grace = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 36), signed: F.at(day: 30))
        let cancelled = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, signed: F.at(day: 30))
        let refunded = [F.transaction("2000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), revoked: F.at(day: 3))]
        let shared = [F.transaction("3000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 30), familyShared: true)]
        let other = [F.transaction("4000", product: "extras.monthly", purchase: F.t0, expires: F.at(day: 30))]
        let customers: [(String, [TransactionPayload], [RenewalInfoPayload], Double)] = [
            ("new", [], [], 1), ("subscribed", paid, [], 10), ("in grace", paid, [grace], 33), ("in billing retry", paid, [grace], 40),
            ("expired", paid, [cancelled], 40), ("refunded", refunded, [], 10), ("family member", shared, [], 10),
            ("other group only", other, [], 10),
        ]
        let expected: [OfferAudience: Set<String>] = [
            .current: ["subscribed", "in grace"],
            .lapsed: ["in billing retry", "expired", "refunded"],
            .currentOrLapsed: ["subscribed", "in grace", "in billing retry", "expired", "refunded"],
            .anyone: Set(customers.map(\.0)),
        ]
        for audience in OfferAudience.allCases {
            let allowed = Set(customers.filter { refusal(OfferRule(offerId: "promo.6m.free", eligibility: audience), $0.1, $0.2, atDay: $0.3) == nil }.map(\.0))
            #expect(allowed == expected[audience], "\(audience)")
        }
        #expect(refusal(OfferRule(offerId: "promo.6m.free", eligibility: .current), paid, [cancelled], atDay: 40) == .notInAudience(.current))
    }

    @Test func anOfferAlreadyWaitingForTheRenewalIsNotSignedAgainButAnotherIs() {
        let paid = [F.monthly("1000", startDay: 0)]
        let pending = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.6m.free", offerPeriod: "P6M", signed: F.at(day: 10))
        #expect(refusal(OfferRule(offerId: "promo.6m.free"), paid, [pending], atDay: 12) == .alreadyPending)
        #expect(refusal(OfferRule(offerId: "promo.1y.free"), paid, [pending], atDay: 12) == nil)
    }

    @Test func redemptionsCountRunsOfTheOfferSoAPayAsYouGoOfferCountsOnce() {
        // Paid month, then 3 half-price months (one redemption), a paid month, then the offer again (a second one).
        var chain = [F.monthly("1000", startDay: 0)]
        for (i, day) in [30, 60, 90].enumerated() {
            chain.append(F.monthly("100\(i + 1)", startDay: Int64(day), offerType: 2, offerId: "promo.3m.half"))
        }
        chain.append(F.monthly("1004", startDay: 120))
        #expect(OfferRules.redemptions(of: "promo.3m.half", type: .promotional, groupId: "premium",
                                       history: CustomerHistory(transactions: chain), catalog: F.catalog) == 1)
        chain.append(F.monthly("1005", startDay: 150, offerType: 2, offerId: "promo.3m.half"))
        #expect(OfferRules.redemptions(of: "promo.3m.half", type: .promotional, groupId: "premium",
                                       history: CustomerHistory(transactions: chain), catalog: F.catalog) == 2)
        #expect(refusal(OfferRule(offerId: "promo.3m.half", maxRedemptions: 2), chain, atDay: 160) == .redemptionLimitReached(2))
        #expect(refusal(OfferRule(offerId: "promo.3m.half", maxRedemptions: 3), chain, atDay: 160) == nil)
        // The same id in another group is another offer.
        #expect(OfferRules.redemptions(of: "promo.3m.half", type: .promotional, groupId: "extras",
                                       history: CustomerHistory(transactions: chain), catalog: F.catalog) == 0)
    }

    @Test func signedRequestsNameTheLatestTransactionOfTheGroupElseAnyElseNone() {
        let history = CustomerHistory(transactions: [F.monthly("1000", startDay: 0), F.monthly("1001", startDay: 30),
                                                     F.transaction("4000", product: "extras.monthly", purchase: F.at(day: 50), expires: F.at(day: 80))])
        #expect(OfferRules.transactionIdForSigning(groupId: "premium", history: history, catalog: F.catalog) == "1001")
        #expect(OfferRules.transactionIdForSigning(groupId: "extras", history: history, catalog: F.catalog) == "4000")
        let onlyExtras = CustomerHistory(transactions: [F.transaction("4000", product: "extras.monthly", purchase: F.t0, expires: F.at(day: 30))])
        #expect(OfferRules.transactionIdForSigning(groupId: "premium", history: onlyExtras, catalog: F.catalog) == "4000")
        #expect(OfferRules.transactionIdForSigning(groupId: "premium", history: CustomerHistory(), catalog: F.catalog) == nil)
    }
}

/// Offer codes (3) and win-back offers (4) in the status, and what Apple says may win a customer back.
@Suite struct OfferCodeAndWinBackStatusTests {
    typealias F = StatusFixtures

    @Test func offerCodeAndWinBackOffersShowAsTheCurrentAndPendingOffer() throws {
        let code = F.transaction("1001", original: "1000", product: "premium.monthly", purchase: F.at(day: 30), expires: F.at(day: 60),
                                 offerType: 3, offerId: "Free month", discount: "FREE_TRIAL", offerPeriod: "P1M", price: 0)
        let winBackNext = F.renewal("1000", product: "premium.monthly", offerType: 4, offerId: "come.back", offerPeriod: "P1W", signed: F.at(day: 40))
        let sub = try #require(F.evaluate([F.monthly("1000", startDay: 0), code], [winBackNext], atDay: 45).subscriptions.first)
        #expect(sub.json["offer"] == ["type": "offerCode", "id": "Free month"])
        #expect(sub.json["pendingOffer"] == ["type": "winBack", "id": "come.back", "period": "P1W"])
    }

    @Test func expiredSubscriptionListsTheWinBackOffersAppleNamesButNotInBillingRetry() throws {
        let paid = F.monthly("1000", startDay: 0)
        let expired = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, winBack: ["come.back", "half.off"], signed: F.at(day: 30))
        let sub = try #require(F.evaluate([paid], [expired], atDay: 40).subscriptions.first)
        #expect(sub.state == .expired)
        #expect(sub.json["eligibleWinBackOfferIds"] == ["come.back", "half.off"])
        let retry = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, winBack: ["come.back"], signed: F.at(day: 30))
        #expect(try #require(F.evaluate([paid], [retry], atDay: 40).subscriptions.first).eligibleWinBackOfferIds == [])
        // Renewal info from before the latest period speaks of an older lapse.
        let resubscribed = F.monthly("1001", startDay: 60)
        #expect(try #require(F.evaluate([paid, resubscribed], [expired], atDay: 100).subscriptions.first).eligibleWinBackOfferIds == [])
    }

    @Test func catalogJSONDescribesOfferCodesAndWinBackOffers() throws {
        let json = try JSONParser.parse(#"""
            [{"productId": "m", "type": "autoRenewable", "groupId": "g", "offers": [
              {"type": "promotional", "id": "p", "mode": "freeTrial", "period": "P1M"},
              {"type": "offerCode", "id": "Spring code", "mode": "payUpFront", "period": "P3M", "price": 1.5, "eligibility": ["new", "expired"]},
              {"type": "winBack", "id": "w", "mode": "payAsYouGo", "period": "P1M", "numberOfPeriods": 2, "price": 0.99}]}]
            """#)
        let m = try #require(try Catalog(contractJSON: json)["m"])
        #expect(m.promotionalOffers.map(\.id) == ["p"])
        #expect(m.offerCodes.map(\.id) == ["Spring code"])
        #expect(m.offerCode(id: "Spring code")?.codeEligibility == [.new, .expired])
        #expect(m.winBackOffer(id: "w")?.totalPeriod == ISOPeriod(months: 2))
        #expect(try Catalog(contractJSON: .array([m.contractJSON]))["m"]?.offerCodes == m.offerCodes)
        func error(_ offer: String) -> String {
            do {
                _ = try Catalog(contractJSON: try JSONParser.parse(#"[{"productId": "m", "type": "autoRenewable", "groupId": "g", "offers": ["# + offer + "]}]"))
                return "no error"
            } catch {
                return String(describing: error)
            }
        }
        #expect(error(#"{"type": "offerCode", "mode": "freeTrial", "period": "P1M"}"#) == "products[0].offers[0].id: is required for a offerCode offer (an offer code's id is its reference name)")
        #expect(error(#"{"type": "promotional", "id": "p", "mode": "freeTrial", "period": "P1M", "eligibility": ["new"]}"#).hasPrefix("products[0].offers[0].eligibility"))
        #expect(error(#"{"type": "offerCode", "id": "c", "mode": "freeTrial", "period": "P1M", "eligibility": ["vip"]}"#).hasPrefix("products[0].offers[0].eligibility[0]"))
        #expect(error(#"{"type": "gift", "id": "c", "mode": "freeTrial", "period": "P1M"}"#).hasPrefix("products[0].offers[0].type"))
    }
}
