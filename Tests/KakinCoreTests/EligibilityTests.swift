import KakinCore
import Testing

/// Introductory-offer eligibility as the contract decides it (mission item 10, seed 002): a customer who ever
/// had a subscription in the group — intro or not, active or long gone — is not eligible. (StoreKit can say
/// "eligible" while an active subscription makes the offer unusable; Kakin's answer is what it signs.)
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

    @Test func anySubscriptionEverHadInTheGroupMakesItIneligibleEvenWithoutAnIntro() {
        // The contract's decision (Apple staff's reading): not only a used intro, any subscription in the group counts.
        let paid = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, signed: F.at(day: 10))
        for day in [10.0, 31, 800] {
            #expect(F.evaluate([paid], [renewal], atDay: day).introductoryOfferEligibility == ["premium": false, "extras": true])
        }
    }

    @Test func graceBillingRetryRevocationAndFamilySharingAllCountAsHavingHadOne() {
        let paid = F.monthly("1000", startDay: 0)
        let retry = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 36), signed: F.at(day: 30))
        #expect(F.evaluate([paid], [retry], atDay: 33).introductoryOfferEligibility["premium"] == false)
        #expect(F.evaluate([paid], [retry], atDay: 40).introductoryOfferEligibility["premium"] == false)
        let refunded = F.transaction("2000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), revoked: F.at(day: 3))
        #expect(F.evaluate([refunded], atDay: 10).introductoryOfferEligibility["premium"] == false)
        let shared = F.transaction("3000", product: "extras.monthly", purchase: F.t0, expires: F.at(day: 30), familyShared: true)
        #expect(F.evaluate([shared], atDay: 90).introductoryOfferEligibility["extras"] == false)
    }

    @Test func purchasesOutsideSubscriptionGroupsLeaveEligibilityAlone() {
        let noads = F.transaction("4000", product: "noads", type: .nonConsumable, purchase: F.t0)
        let pass = F.transaction("5000", product: "season.pass", type: .nonRenewing, purchase: F.t0)
        #expect(F.evaluate([noads, pass], atDay: 1).introductoryOfferEligibility == ["premium": true, "extras": true])
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
