@testable import AppStoreSimulator
import KakinCore
import Testing

/// Every line of seed 003's production observations (reference §8.0), with exact dates. Catalog: A and B
/// are monthly products of the same level, Q is 3-monthly with a 7-day trial, P is a higher tier and L a
/// lower one; promotional offers "1y", "6m" and "12m" are free periods.
@Suite struct Seed003Offers {
    let trialEnd = plus("P1M", startMs)

    func expectOffer(_ t: JSONValue, id: String, period: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(t["offerType"] == 2, sourceLocation: sourceLocation)
        #expect(t["offerIdentifier"]?.stringValue == id, sourceLocation: sourceLocation)
        #expect(t["offerDiscountType"] == "FREE_TRIAL", sourceLocation: sourceLocation)
        #expect(t["offerPeriod"]?.stringValue == period, sourceLocation: sourceLocation)
    }

    @Test func promoOnTheSameProductDuringTheIntroTrialStartsWhenTheTrialEnds() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        _ = s.advance(by: 10 * .day)
        let promo = try s.applyPromotionalOffer(otid, offerId: "1y", productId: nil)
        #expect(promo.kind == .offerPending)
        #expect(promo.effectiveDateMs == trialEnd)
        #expect(s.kinds(promo.notificationUUIDs) == ["OFFER_REDEEMED"])
        expectOffer(s.renewal(otid), id: "1y", period: "P1Y")
        #expect(s.renewal(otid)["renewalPrice"] == 0)
        // The trial transaction is untouched.
        #expect(s.latestTx(otid)["expiresDate"] == .int(trialEnd))
        let renewed = s.advance(toMs: trialEnd)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
        let t = s.latestTx(otid)
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(trialEnd))
        #expect(t["expiresDate"] == .int(plus("P1Y", trialEnd)))
        #expect(t["price"] == 0)
        #expect(s.renewal(otid)["offerType"] == nil)
        // 13 months free in all; then the regular price.
        _ = s.advance(toMs: plus("P1Y", trialEnd))
        #expect(s.latestTx(otid)["price"] == 4_990)
        #expect(s.latestTx(otid)["offerType"] == nil)
    }

    @Test func promoOnTheSameProductDuringAPaidPeriodStartsWhenThePeriodEnds() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        _ = s.advance(toMs: trialEnd + 5 * .day)
        #expect(s.latestTx(otid)["price"] == 4_990)
        let periodEnd = plus("P1M", trialEnd)
        let promo = try s.applyPromotionalOffer(otid, offerId: "1y", productId: nil)
        #expect(promo.effectiveDateMs == periodEnd)
        _ = s.advance(toMs: periodEnd)
        let t = s.latestTx(otid)
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(periodEnd))
        #expect(t["expiresDate"] == .int(plus("P1Y", periodEnd)))
    }

    @Test func promoOnAnotherProductOfSameLevelAndDurationDuringTheTrialCrossgradesNowAndDiscardsTheTrial() throws {
        var s = makeState()
        let first = try s.buy("A")
        let otid = first.originalTransactionId!
        let now = startMs + 10 * .day
        _ = s.advance(toMs: now)
        let cross = try s.applyPromotionalOffer(otid, offerId: "1y", productId: "B")
        #expect(cross.kind == .crossgraded)
        #expect(s.kinds(cross.notificationUUIDs) == ["OFFER_REDEEMED"])
        #expect(cross.proratedRefund == nil)
        let t = s.tx(cross.transactionId)
        #expect(t["productId"] == "B")
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(now))
        #expect(t["expiresDate"] == .int(plus("P1Y", now)))
        #expect(s.tx(first.transactionId)["isUpgraded"] == true)
        // The discarded trial's end is no renewal: nothing happens then.
        #expect(s.advance(toMs: trialEnd).isEmpty)
    }

    @Test func promoOnAnotherProductOfSameLevelAndDurationDuringAPaidPeriodRefundsTheRestProrated() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        _ = s.advance(toMs: trialEnd)
        let paid = s.latestTx(otid)
        let now = trialEnd + 12 * .day
        _ = s.advance(toMs: now)
        let cross = try s.applyPromotionalOffer(otid, offerId: "1y", productId: "B")
        #expect(cross.kind == .crossgraded)
        let periodEnd = plus("P1M", trialEnd)
        #expect(cross.proratedRefund?.amountMilli == 4_990 * (periodEnd - now) / (periodEnd - trialEnd))
        #expect(cross.proratedRefund?.transactionId == paid["transactionId"]?.stringValue)
        #expect(s.store.proratedRefunds.count == 1)
        let t = s.tx(cross.transactionId)
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(now))
        #expect(t["expiresDate"] == .int(plus("P1Y", now)))
        #expect(s.tx(paid["transactionId"]?.stringValue)["isUpgraded"] == true)
    }

    @Test func promoOnAnotherProductOfSameLevelButOtherDurationDuringTheTrialStartsAfterTheTrial() throws {
        var s = makeState()
        let otid = try s.buy("Q").originalTransactionId!
        let trial = startMs + 7 * .day
        #expect(s.latestTx(otid)["expiresDate"] == .int(trial))
        _ = s.advance(by: 2 * .day)
        let promo = try s.applyPromotionalOffer(otid, offerId: "1y", productId: "B")
        #expect(promo.kind == .scheduled)
        #expect(promo.effectiveDateMs == trial)
        #expect(s.kinds(promo.notificationUUIDs) == ["OFFER_REDEEMED"])
        #expect(s.renewal(otid)["autoRenewProductId"] == "B")
        expectOffer(s.renewal(otid), id: "1y", period: "P1Y")
        let renewed = s.advance(toMs: trial)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
        let t = s.latestTx(otid)
        #expect(t["productId"] == "B")
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(trial))
        #expect(t["expiresDate"] == .int(plus("P1Y", trial)))
    }

    @Test func promoOnAnotherProductOfSameLevelButOtherDurationDuringAPaidPeriodStartsAfterThePeriod() throws {
        var s = makeState()
        let otid = try s.buy("Q").originalTransactionId!
        let paidStart = startMs + 7 * .day
        _ = s.advance(toMs: paidStart + 10 * .day)
        #expect(s.latestTx(otid)["price"] == 12_990)
        let periodEnd = plus("P3M", paidStart)
        let promo = try s.applyPromotionalOffer(otid, offerId: "1y", productId: "B")
        #expect(promo.effectiveDateMs == periodEnd)
        _ = s.advance(toMs: periodEnd)
        let t = s.latestTx(otid)
        #expect(t["productId"] == "B")
        expectOffer(t, id: "1y", period: "P1Y")
        #expect(t["purchaseDate"] == .int(periodEnd))
        #expect(t["expiresDate"] == .int(plus("P1Y", periodEnd)))
    }

    /// Starts a 12-month promotional free period on A at the end of A's trial.
    func inTwelveMonthPromo() throws -> (SimulatorState, String) {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        _ = try s.applyPromotionalOffer(otid, offerId: "12m", productId: nil)
        _ = s.advance(toMs: trialEnd)
        expectOffer(s.latestTx(otid), id: "12m", period: "P12M")
        return (s, otid)
    }

    @Test func promoDuringAPromoKeepsTheCurrentOneAndPendsTheNew() throws {
        var (s, otid) = try inTwelveMonthPromo()
        let running = s.latestTx(otid)
        _ = s.advance(by: 30 * .day)
        let six = try s.applyPromotionalOffer(otid, offerId: "6m", productId: nil)
        #expect(six.kind == .offerPending)
        #expect(s.latestTx(otid) == running)
        expectOffer(s.renewal(otid), id: "6m", period: "P6M")
        let promoEnd = plus("P12M", trialEnd)
        _ = s.advance(toMs: promoEnd)
        expectOffer(s.latestTx(otid), id: "6m", period: "P6M")
        #expect(s.latestTx(otid)["expiresDate"] == .int(plus("P6M", promoEnd)))
    }

    @Test func aNewPromoReplacesThePendingOneSoTwelveSixTwelveIsTwelveTwelve() throws {
        var (s, otid) = try inTwelveMonthPromo()
        _ = try s.applyPromotionalOffer(otid, offerId: "6m", productId: nil)
        let twelve = try s.applyPromotionalOffer(otid, offerId: "12m", productId: nil)
        #expect(s.kinds(twelve.notificationUUIDs) == ["OFFER_REDEEMED"])
        expectOffer(s.renewal(otid), id: "12m", period: "P12M")
        let promoEnd = plus("P12M", trialEnd)
        _ = s.advance(toMs: promoEnd)
        expectOffer(s.latestTx(otid), id: "12m", period: "P12M")
        let secondEnd = plus("P12M", promoEnd)
        #expect(s.latestTx(otid)["expiresDate"] == .int(secondEnd))
        // Then the regular price: the 6-month offer was lost, 24 months free in all, not 30.
        _ = s.advance(toMs: secondEnd)
        #expect(s.latestTx(otid)["offerType"] == nil)
        #expect(s.latestTx(otid)["price"] == 4_990)
    }

    @Test func threePromosInARowKeepOnlyTheLatest() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        var notes: [String] = []
        for id in ["1y", "6m", "12m"] {
            notes += try s.applyPromotionalOffer(otid, offerId: id, productId: nil).notificationUUIDs
            _ = s.advance(by: .day)
        }
        #expect(s.kinds(notes) == ["OFFER_REDEEMED", "OFFER_REDEEMED", "OFFER_REDEEMED"])
        #expect(s.notes(notes).map { decodeJWS($0["data"]!["signedRenewalInfo"]!.stringValue!)["offerIdentifier"] } == ["1y", "6m", "12m"])
        expectOffer(s.renewal(otid), id: "12m", period: "P12M")
        let renewal = plus("P1M", startMs)
        _ = s.advance(toMs: renewal)
        expectOffer(s.latestTx(otid), id: "12m", period: "P12M")
        #expect(s.latestTx(otid)["expiresDate"] == .int(plus("P12M", renewal)))
    }

    @Test func aReplacedOneYearOfferNeverShowsUpInLaterTransactions() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.applyPromotionalOffer(otid, offerId: "1y", productId: nil)
        _ = try s.applyPromotionalOffer(otid, offerId: "6m", productId: nil)
        let renewal = plus("P1M", startMs)
        _ = s.advance(toMs: renewal)
        #expect(s.latestTx(otid)["expiresDate"] == .int(plus("P6M", renewal)))
        #expect(!s.chain(otid).contains { $0["expiresDate"] == .int(plus("P1Y", renewal)) })
    }

    /// The trap of seed 003: a 1-year free period replaced by a 6-month one leaves the larger, stale
    /// `expiresDate` in history; the current expiry is the latest transaction's.
    @Test func theLargestExpiresDateInHistoryIsStaleAfterA6MonthOfferReplacesA1YearOne() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        let cross = try s.applyPromotionalOffer(otid, offerId: "1y", productId: "B")
        let oneYear = plus("P1Y", startMs)
        #expect(s.tx(cross.transactionId)["expiresDate"] == .int(oneYear))
        let now = startMs + 20 * .day
        _ = s.advance(toMs: now)
        let back = try s.applyPromotionalOffer(otid, offerId: "6m", productId: "A")
        #expect(back.kind == .crossgraded)
        let latest = s.latestTx(otid)
        #expect(latest["expiresDate"] == .int(plus("P6M", now)))
        let largest = s.chain(otid).compactMap { $0["expiresDate"]?.int64Value }.max()
        #expect(largest == oneYear)
        #expect(largest! > latest["expiresDate"]!.int64Value!)
        // Get All Subscription Statuses hands out the latest transaction.
        let statuses = try s.statuses(cross.transactionId!, statusFilter: [])
        let signed = statuses["data"]?.arrayValue?.first?["lastTransactions"]?.arrayValue?.first?["signedTransactionInfo"]?.stringValue
        #expect(decodeJWS(signed!)["expiresDate"] == .int(plus("P6M", now)))
    }

    @Test func promoOnAHigherTierUpgradesNowAndOnALowerTierAtRenewal() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        let up = try s.applyPromotionalOffer(otid, offerId: "6m", productId: "P")
        #expect(up.kind == .upgraded)
        #expect(s.kinds(up.notificationUUIDs) == ["OFFER_REDEEMED/UPGRADE"])
        expectOffer(s.tx(up.transactionId), id: "6m", period: "P6M")
        #expect(s.tx(up.transactionId)["expiresDate"] == .int(plus("P6M", startMs)))
        var t = makeState()
        let o2 = try t.buy("B").originalTransactionId!
        let down = try t.buy("L", offer: .promotional(id: "1y"))
        #expect(down.kind == .scheduled)
        #expect(t.kinds(down.notificationUUIDs) == ["OFFER_REDEEMED/DOWNGRADE"])
        #expect(t.renewal(o2)["autoRenewProductId"] == "L")
        let renewal = plus("P1M", startMs)
        _ = t.advance(toMs: renewal)
        #expect(t.latestTx(o2)["productId"] == "L")
        expectOffer(t.latestTx(o2), id: "1y", period: "P1Y")
        #expect(t.latestTx(o2)["expiresDate"] == .int(plus("P1Y", renewal)))
    }

    @Test func payAsYouGoPromoAppliesForItsNumberOfPeriodsAfterTheCurrentOne() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        _ = try s.applyPromotionalOffer(otid, offerId: "half", productId: nil)
        #expect(s.renewal(otid)["offerDiscountType"] == "PAY_AS_YOU_GO")
        #expect(s.renewal(otid)["offerPeriod"] == "P3M")
        #expect(s.renewal(otid)["renewalPrice"] == 2_490)
        _ = s.advance(toMs: plus("P4M", startMs))
        #expect(s.chain(otid).map { $0["price"] } == [0, 2_490, 2_490, 2_490, 4_990])
        #expect(s.chain(otid).map { $0["offerType"] } == [1, 2, 2, 2, nil])
    }

    @Test func lapsedCustomerRedeemingAPromoResubscribesNow() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.setAutoRenew(otid, enabled: false)
        _ = s.advance(by: 40 * .day)
        let back = try s.applyPromotionalOffer(otid, offerId: "6m", productId: nil)
        #expect(back.kind == .resubscribed)
        #expect(s.kinds(back.notificationUUIDs) == ["SUBSCRIBED/RESUBSCRIBE"])
        expectOffer(s.tx(back.transactionId), id: "6m", period: "P6M")
        #expect(s.tx(back.transactionId)["purchaseDate"] == .int(startMs + 40 * .day))
    }
}
