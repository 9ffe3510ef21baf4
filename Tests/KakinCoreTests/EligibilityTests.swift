import KakinCore
import Testing

/// Introductory-offer eligibility as it really is (mission item 10): StoreKit can say "eligible" while an
/// active subscription in the group makes the offer unusable.
@Suite struct EligibilityTests {
    typealias F = StatusFixtures

    @Test func customerWhoNeverHadAnIntroIsEligibleInEveryCatalogGroup() {
        #expect(F.evaluate([], atDay: 0).introductoryOfferEligibility == ["premium": true, "extras": true])
    }

    @Test func usedIntroMakesItsGroupIneligibleForeverButNotOtherGroups() {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7), offerType: 1, discount: "FREE_TRIAL")
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, signed: F.at(day: 7))
        for day in [3.0, 8, 800] {
            #expect(F.evaluate([trial], [renewal], atDay: day).introductoryOfferEligibility == ["premium": false, "extras": true])
        }
    }

    @Test func refundedIntroStillCountsAsUsed() {
        let trial = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 7), revoked: F.at(day: 1), offerType: 1)
        #expect(F.evaluate([trial], atDay: 2).introductoryOfferEligibility["premium"] == false)
    }

    @Test func activeSubscriptionWithoutIntroBlocksTheOfferUntilItEnds() {
        let paid = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, signed: F.at(day: 10))
        #expect(F.evaluate([paid], [renewal], atDay: 10).introductoryOfferEligibility["premium"] == false)
        #expect(F.evaluate([paid], [renewal], atDay: 31).introductoryOfferEligibility["premium"] == true)
    }

    @Test func gracePeriodBlocksTheOfferButBillingRetryDoesNot() {
        let paid = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 36), signed: F.at(day: 30))
        #expect(F.evaluate([paid], [renewal], atDay: 33).introductoryOfferEligibility["premium"] == false)
        #expect(F.evaluate([paid], [renewal], atDay: 40).introductoryOfferEligibility["premium"] == true)
    }

    @Test func groupSeenOnlyInHistoryIsReported() {
        let unknown = F.transaction("1000", product: "legacy.monthly", group: "20990001", purchase: F.t0, expires: F.at(day: 30), offerType: 1)
        let s = F.evaluate([unknown], atDay: 40)
        #expect(s.introductoryOfferEligibility == ["premium": true, "extras": true, "20990001": false])
        #expect(s.subscriptions.first?.groupId == "20990001")
    }

    @Test func appleGroupIdOfACatalogGroupIsReportedUnderTheCatalogName() {
        // Apple's numeric group id for the catalog's "premium"; legacy.monthly left the catalog but is in that group.
        let trial = F.transaction("1000", product: "premium.monthly", group: "20990002", purchase: F.t0, expires: F.at(day: 7), offerType: 1)
        let legacy = F.transaction("2000", product: "legacy.monthly", group: "20990002", purchase: F.at(day: 100), expires: F.at(day: 130))
        let s = F.evaluate([trial, legacy], atDay: 200)
        #expect(s.introductoryOfferEligibility == ["premium": false, "extras": true])
        #expect(s.subscriptions.map(\.groupId) == ["premium", "premium"])
    }
}
