@testable import AppStoreSimulator
import KakinCore
import Testing

/// Offer codes (`offerType` 3) and win-back offers (`offerType` 4), and purchases outside the app: the
/// App Store's side of what Kakin must link and show.
@Suite struct OfferCodeAndWinBackTests {
    /// The seed-003 catalog plus: on A, a free-month code for anyone, a half-price code for new subscribers only,
    /// and a one-week free win-back offer; on B, a win-back offer switched off (Xcode's `isEligible: false`).
    static func catalog() -> Catalog {
        var c = offersCatalog()
        var a = c["A"]!
        a.offerCodes = [
            SubscriptionOffer(id: "Free month", type: .offerCode, mode: .freeTrial, period: ISOPeriod(months: 1)),
            SubscriptionOffer(id: "New half off", type: .offerCode, mode: .payUpFront, period: ISOPeriod(months: 3), priceMilli: 7_000,
                              codeEligibility: [.new]),
        ]
        a.winBackOffers = [SubscriptionOffer(id: "come.back", type: .winBack, mode: .freeTrial, period: ISOPeriod(weeks: 1))]
        var p = c["P"]!
        p.offerCodes = [SubscriptionOffer(id: "Plus month", type: .offerCode, mode: .freeTrial, period: ISOPeriod(months: 1))]
        var b = c["B"]!
        b.winBackOffers = [SubscriptionOffer(id: "off", type: .winBack, mode: .freeTrial, period: ISOPeriod(weeks: 1), isEligible: false)]
        c.upsert(a)
        c.upsert(p)
        c.upsert(b)
        return c
    }

    func expectOffer(_ tx: JSONValue, type: Int, id: String, period: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(tx["offerType"] == .int(Int64(type)), sourceLocation: sourceLocation)
        #expect(tx["offerIdentifier"] == .string(id), sourceLocation: sourceLocation)
        #expect(tx["offerPeriod"] == .string(period), sourceLocation: sourceLocation)
    }

    /// A's free trial month, a paid month, then lapsed (auto-renew off).
    func lapsedAfterAPaidMonth(_ s: inout SimulatorState) throws -> String {
        let otid = try s.buy("A").originalTransactionId!
        _ = s.advance(toMs: plus("P1M", startMs) + .day)  // the trial month ended, a paid month started
        _ = try s.setAutoRenew(otid, enabled: false)
        _ = s.advance(toMs: plus("P2M", startMs) + .day)
        return otid
    }

    @Test func offerCodeForANewCustomerStartsTheSubscriptionWithoutAnAppAccountToken() throws {
        var s = makeState(catalog: Self.catalog())
        let out = try s.buy("A", offer: .offerCode(id: "Free month"))
        #expect(out.kind == .purchased)
        #expect(s.kinds(out.notificationUUIDs) == ["SUBSCRIBED/INITIAL_BUY"])
        let tx = s.tx(out.transactionId)
        expectOffer(tx, type: 3, id: "Free month", period: "P1M")
        #expect(tx["offerDiscountType"] == "FREE_TRIAL")
        #expect(tx["appAccountToken"] == nil, "the redeem sheet and the App Store pass no appAccountToken")
        #expect(s.renewal(out.originalTransactionId!)["appAccountToken"] == nil)
    }

    @Test func offerCodeForACurrentSubscriberIsRedeemedAtTheNextRenewalOrUpgradesNow() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try s.buy("A").originalTransactionId!
        let same = try s.buy("A", offer: .offerCode(id: "Free month"))
        #expect(same.kind == .offerPending)
        #expect(s.kinds(same.notificationUUIDs) == ["OFFER_REDEEMED"])
        #expect(s.renewal(otid)["offerType"] == 3)
        #expect(s.renewal(otid)["offerIdentifier"] == "Free month")
        let up = try s.buy("P", offer: .offerCode(id: "Plus month"))
        #expect(up.kind == .upgraded)
        #expect(s.kinds(up.notificationUUIDs) == ["OFFER_REDEEMED/UPGRADE"])
        expectOffer(s.tx(up.transactionId), type: 3, id: "Plus month", period: "P1M")
        #expect(s.tx(up.transactionId)["appAccountToken"] == nil)
    }

    @Test func offerCodeEligibilityAndUnknownCodesAreRefusedAsTheAppStoreWould() throws {
        var s = makeState(catalog: Self.catalog())
        #expect(throws: KakinError.self) { try s.buy("A", offer: .offerCode(id: "nope")) }
        _ = try lapsedAfterAPaidMonth(&s)
        let before = s.store
        let notEligible = #expect(throws: KakinError.self, "a code for new subscribers was redeemed by a lapsed one") {
            try s.buy("A", offer: .offerCode(id: "New half off"))
        }
        #expect(notEligible?.kind == .simulatorNotEligible)
        let unknown = #expect(throws: KakinError.self) { try s.buy("A", offer: .offerCode(id: "nope")) }
        #expect(unknown?.kind == .simulatorInvalidOfferIdentifier)
        #expect(s.store == before)
        let back = try s.buy("A", offer: .offerCode(id: "Free month"))
        #expect(s.kinds(back.notificationUUIDs) == ["SUBSCRIBED/RESUBSCRIBE"])
    }

    @Test func winBackOffersAreListedInRenewalInfoOnlyOnceLapsedAfterPaying() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try s.buy("A").originalTransactionId!
        #expect(s.renewal(otid)["eligibleWinBackOfferIds"] == nil, "live: none")
        // Lapsed during the free trial: never paid, no win-back.
        var t = makeState(catalog: Self.catalog())
        let trial = try t.buy("A").originalTransactionId!
        _ = try t.setAutoRenew(trial, enabled: false)
        _ = t.advance(by: 40 * .day)
        #expect(t.renewal(trial)["eligibleWinBackOfferIds"] == nil)
        #expect(throws: KakinError.self) { try t.buy("A", offer: .winBack(id: "come.back")) }
        // Lapsed after a paid month: listed in the EXPIRED notification's renewal info.
        var u = makeState(catalog: Self.catalog())
        _ = try lapsedAfterAPaidMonth(&u)
        let expired = u.notes(u.store.notifications.map(\.notificationUUID)).last { $0["notificationType"] == "EXPIRED" }!
        let renewal = decodeJWS(expired["data"]!["signedRenewalInfo"]!.stringValue!)
        #expect(renewal["eligibleWinBackOfferIds"] == ["come.back"], "B's offer is switched off, A's is listed")
    }

    @Test func redeemingAWinBackOfferResubscribesOnceAndIsRefusedToLiveSubscribers() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try lapsedAfterAPaidMonth(&s)
        let back = try s.buy("A", offer: .winBack(id: "come.back"))
        #expect(back.kind == .resubscribed)
        #expect(back.originalTransactionId == otid)
        #expect(s.kinds(back.notificationUUIDs) == ["SUBSCRIBED/RESUBSCRIBE"])
        expectOffer(s.tx(back.transactionId), type: 4, id: "come.back", period: "P1W")
        #expect(s.tx(back.transactionId)["appAccountToken"] == .string(tokenA), "StoreKit's .winBackOffer purchase option comes with the token")
        do {
            _ = try s.buy("A", offer: .winBack(id: "come.back"))
            Issue.record("a live subscriber redeemed a win-back offer")
        } catch {
            #expect(error.kind == .simulatorNotEligible)
        }
        // Lapsing again: this offer was used.
        _ = try s.setAutoRenew(otid, enabled: false)
        _ = s.advance(by: 40 * .day)
        #expect(s.renewal(otid)["eligibleWinBackOfferIds"] == nil)
    }

    @Test func aPurchaseOutsideTheAppKeepsTheInstanceButCarriesNoToken() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try lapsedAfterAPaidMonth(&s)
        var request = PurchaseRequest(productId: "A", appAccountToken: tokenA, offer: .winBack(id: "come.back"))
        request.outsideApp = true
        let back = try s.purchase(request)
        #expect(back.originalTransactionId == otid, "same Apple account, same subscription instance")
        #expect(s.tx(back.transactionId)["appAccountToken"] == nil)
        // The next renewal carries the token the instance had.
        _ = s.advance(by: 8 * .day)
        #expect(s.latestTx(otid)["appAccountToken"] == .string(tokenA))
        var promo = PurchaseRequest(productId: "A", appAccountToken: tokenA, offer: .promotional(id: "6m"))
        promo.outsideApp = true
        #expect(throws: KakinError.self) { try s.purchase(promo) }
    }
}
