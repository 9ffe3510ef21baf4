import KakinCore
import Testing

/// Seed 003: the current expiry comes from the latest transaction, and offers never stack.
@Suite struct StatusOffersTests {
    typealias F = StatusFixtures

    /// Paid month, then a 1-year free promo, later replaced by a 6-month one: the 1-year date stays in history.
    static let replacedOfferHistory = [
        F.monthly("1000", startDay: 0),
        F.transaction("1001", original: "1000", product: "premium.monthly", purchase: F.at(day: 30), expires: F.at(day: 395),
                      offerType: 2, offerId: "promo.1y.free", discount: "FREE_TRIAL", offerPeriod: "P1Y", price: 0),
        F.transaction("1002", original: "1000", product: "premium.monthly", purchase: F.at(day: 40), expires: F.at(day: 222),
                      offerType: 2, offerId: "promo.6m.free", discount: "FREE_TRIAL", offerPeriod: "P6M", price: 0),
    ]

    @Test func expiryComesFromTheLatestTransactionNotTheLargestDate() throws {
        let sub = try #require(F.evaluate(Self.replacedOfferHistory, atDay: 100).subscriptions.first)
        #expect(sub.expiresAtMs == F.at(day: 222))
        #expect(sub.offer == StatusOffer(type: .promotional, id: "promo.6m.free"))

        let later = F.evaluate(Self.replacedOfferHistory, atDay: 300)
        #expect(later.subscriptions.first?.state == .expired)
        #expect(later.subscriptions.first?.expiresAtMs == F.at(day: 222))
        #expect(later.status == .inactive)
    }

    @Test func pendingOfferIsShownBesideTheCurrentOne() throws {
        let current = F.transaction("1001", original: "1000", product: "premium.monthly", purchase: F.at(day: 30), expires: F.at(day: 395),
                                    offerType: 2, offerId: "promo.1y.free", discount: "FREE_TRIAL", offerPeriod: "P1Y", price: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.6m.free", offerPeriod: "P6M", signed: F.at(day: 50))
        let sub = try #require(F.evaluate([F.monthly("1000", startDay: 0), current], [renewal], atDay: 60).subscriptions.first)
        #expect(sub.offer == StatusOffer(type: .promotional, id: "promo.1y.free"))
        #expect(sub.pendingOffer == StatusOffer(type: .promotional, id: "promo.6m.free", period: "P6M"))
        #expect(sub.expiresAtMs == F.at(day: 395))
    }

    @Test func newerPendingOfferReplacesTheOlderOneWhateverTheArrivalOrder() {
        let current = F.transaction("1001", original: "1000", product: "premium.monthly", purchase: F.at(day: 30), expires: F.at(day: 395),
                                    offerType: 2, offerId: "promo.1y.free", offerPeriod: "P1Y")
        let older = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.6m.free", offerPeriod: "P6M", signed: F.at(day: 50))
        let newer = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.1y.free", offerPeriod: "P1Y", signed: F.at(day: 60))
        for renewals in [[older, newer], [newer, older], [newer, older, newer, older]] {
            let sub = F.evaluate([current], renewals, atDay: 70).subscriptions.first
            // 12 + 6 + 12 is really 12 + 12: one pending slot.
            #expect(sub?.pendingOffer == StatusOffer(type: .promotional, id: "promo.1y.free", period: "P1Y"))
        }
    }

    @Test func introductoryTrialIsTheCurrentOfferWithoutAnId() throws {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7),
                                  offerType: 1, discount: "FREE_TRIAL", offerPeriod: "P1W", price: 0)
        let sub = try #require(F.evaluate([trial], atDay: 3).subscriptions.first)
        #expect(sub.offer == StatusOffer(type: .introductory, id: nil))
        #expect(sub.offer?.type.contractName == "introductory")
    }

    @Test func currentOfferEndsWithItsPeriod() throws {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7),
                                  offerType: 1, discount: "FREE_TRIAL", offerPeriod: "P1W", price: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 10), signed: F.at(day: 7))
        let sub = try #require(F.evaluate([trial], [renewal], atDay: 8).subscriptions.first)
        #expect(sub.state == .inGracePeriod)
        #expect(sub.offer == nil)
    }

    @Test func expiredSubscriptionHasNoPendingOffer() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, offerType: 2, offerId: "promo.6m.free",
                                offerPeriod: "P6M", signed: F.at(day: 31))
        let sub = try #require(F.evaluate([tx], [renewal], atDay: 32).subscriptions.first)
        #expect(sub.pendingOffer == nil)
    }

    @Test func subscriberInAFreeTrialIsWarnedThatAnImmediateChangeDiscardsIt() {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7),
                                  offerType: 1, discount: "FREE_TRIAL", offerPeriod: "P1W", price: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", offerType: 2, offerId: "promo.1y.free", offerPeriod: "P1Y", signed: F.at(day: 2))
        let s = F.evaluate([trial], [renewal], atDay: 3)
        // premium.plus.monthly is an upgrade (level 1); premium.yearly is the same level with another
        // duration, so it waits for the renewal and discards nothing.
        #expect(s.notices == [
            StatusNotice(kind: .immediateChangeDiscardsFreePeriod, originalTransactionId: "1000", productIds: ["premium.plus.monthly"]),
            StatusNotice(kind: .pendingOfferWouldBeReplaced, originalTransactionId: "1000", productIds: []),
        ])
    }

    @Test func paidSubscriberIsWarnedThatAnImmediateChangeRefundsProRata() {
        let s = F.evaluate([F.monthly("1000", startDay: 0)], atDay: 3)
        #expect(s.notices == [
            StatusNotice(kind: .immediateChangeRefundsProrated, originalTransactionId: "1000", productIds: ["premium.plus.monthly"]),
        ])
        #expect(F.evaluate([F.monthly("1000", startDay: 0)], atDay: 31).notices.isEmpty)
    }
}

/// Upgrades: the old transaction keeps a future `expiresDate` that must not be read.
@Suite struct StatusUpgradeTests {
    typealias F = StatusFixtures

    @Test func upgradeWithinTheInstanceReadsTheHigherLevelTransaction() throws {
        let old = F.transaction("1000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), signed: F.at(day: 40), upgraded: true)
        let new = F.transaction("1001", original: "1000", product: "premium.plus.monthly", purchase: F.at(day: 40), expires: F.at(day: 70))
        let renewal = F.renewal("1000", product: "premium.plus.monthly", signed: F.at(day: 40))
        for transactions in [[old, new], [new, old]] {
            let s = F.evaluate(transactions, [renewal], atDay: 50)
            let sub = try #require(s.subscriptions.first)
            #expect(s.subscriptions.count == 1)
            #expect(sub.state == .subscribed)
            #expect(sub.productId == "premium.plus.monthly")
            #expect(sub.expiresAtMs == F.at(day: 70))
            #expect(sub.latestTransactionId == "1001")
        }
        // After the new period, not the old far-future date: expired.
        #expect(F.evaluate([old, new], atDay: 100).subscriptions.first?.state == .expired)
    }

    @Test func upgradedInstanceEndsWhenAnotherInstanceTookOver() throws {
        let old = F.transaction("1000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), signed: F.at(day: 41), upgraded: true)
        let other = F.transaction("3000", product: "premium.plus.monthly", purchase: F.at(day: 40), expires: F.at(day: 70))
        let s = F.evaluate([old, other], atDay: 50)
        #expect(s.status == .active)
        let upgraded = try #require(s.subscriptions.first { $0.originalTransactionId == "1000" })
        #expect(upgraded.state == .expired)
        #expect(upgraded.expirationReason == .upgraded)
        #expect(upgraded.expiresAtMs == F.at(day: 40))
        #expect(s.subscriptions.first { $0.originalTransactionId == "3000" }?.state == .subscribed)
    }

    @Test func upgradedCopyAloneIsNotAnEntitlement() throws {
        // The higher-level transaction hasn't arrived yet: the upgraded copy must not keep the old year alive.
        let old = F.transaction("1000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), signed: F.at(day: 41), upgraded: true)
        let sub = try #require(F.evaluate([old], atDay: 50).subscriptions.first)
        #expect(sub.state == .expired)
        #expect(sub.expiresAtMs == F.at(day: 41))
    }
}

/// Billing retry lasts at most 60 days; grace is honoured even when Apple's retry flag says otherwise.
@Suite struct StatusBillingRetryTests {
    typealias F = StatusFixtures

    @Test func billingRetryEndsSixtyDaysAfterExpiryWithoutAnExpiredNotification() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", retry: true, signed: F.at(day: 30))
        let during = try #require(F.evaluate([tx], [renewal], atDay: 89.9).subscriptions.first)
        #expect(during.state == .inBillingRetryPeriod)
        let after = try #require(F.evaluate([tx], [renewal], atDay: 90).subscriptions.first)
        #expect(after.state == .expired)
        #expect(after.expirationReason == .billingError)
        #expect(!after.willAutoRenew)
    }

    @Test func futureGraceDateCountsEvenWithoutTheRetryFlag() throws {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7), offerType: 1, discount: "FREE_TRIAL")
        let renewal = F.renewal("1000", product: "premium.monthly", retry: false, grace: F.at(day: 10), signed: F.at(day: 7))
        let s = F.evaluate([trial], [renewal], atDay: 8)
        #expect(s.subscriptions.first?.state == .inGracePeriod)
        #expect(s.subscriptions.first?.gracePeriodExpiresAtMs == F.at(day: 10))
        #expect(s.status == .active)
        #expect(F.evaluate([trial], [renewal], atDay: 10).subscriptions.first?.state == .expired)
    }

    @Test func customerWhoCancelledDuringGraceIsExpired() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, retry: false, grace: F.at(day: 46), signed: F.at(day: 33))
        let sub = try #require(F.evaluate([tx], [renewal], atDay: 35).subscriptions.first)
        #expect(sub.state == .expired)
        #expect(sub.expirationReason == .voluntary)
    }

    @Test func renewalInfoFromAnEarlierPeriodCannotPutTheCurrentOneInRetry() throws {
        // Retry during period 1, recovered by the renewal of day 35; no newer renewal info arrived.
        let first = F.monthly("1000", startDay: 0)
        let second = F.monthly("1001", original: "1000", startDay: 35)
        let stale = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, signed: F.at(day: 31))
        let sub = try #require(F.evaluate([first, second], [stale], atDay: 66).subscriptions.first)
        #expect(sub.state == .expired)
        #expect(sub.expirationReason == nil)
    }
}
