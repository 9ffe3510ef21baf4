import KakinCore
import Testing

/// Seed 004 (proactive restore): at launch the app learns whether the customer is new, active or inactive.
@Suite struct StatusClassificationTests {
    typealias F = StatusFixtures

    @Test func customerWithoutHistoryIsNew() {
        let s = F.evaluate([], atDay: 0)
        #expect(s.status == .new)
        #expect(s.subscriptions.isEmpty && s.nonConsumables.isEmpty && s.nonRenewing.isEmpty)
    }

    @Test func consumablesAloneLeaveTheCustomerNew() {
        let coins = F.transaction("1", product: "coins.100", type: .consumable, purchase: F.t0)
        let refunded = F.transaction("2", product: "coins.500", type: .consumable, purchase: F.t0, revoked: F.at(day: 1))
        #expect(F.evaluate([coins, refunded], atDay: 2).status == .new)
    }

    @Test func paidMonthlySubscriptionIsActiveUntilItsExpiry() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", signed: F.t0)
        let s = F.evaluate([tx], [renewal], atDay: 10)
        #expect(s.status == .active)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .subscribed)
        #expect(sub.groupId == "premium")
        #expect(sub.productId == "premium.monthly")
        #expect(sub.expiresAtMs == F.at(day: 30))
        #expect(sub.willAutoRenew)
        #expect(sub.autoRenewProductId == "premium.monthly")
        #expect(sub.ownership == .purchased)
        #expect(sub.expirationReason == nil)
    }

    @Test func gracePeriodKeepsServiceAndSaysUntilWhen() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 46), signed: F.at(day: 30))
        let s = F.evaluate([tx], [renewal], atDay: 35)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .inGracePeriod)
        #expect(sub.gracePeriodExpiresAtMs == F.at(day: 46))
        #expect(sub.willAutoRenew)
        #expect(sub.expirationReason == nil)
        #expect(s.status == .active)
    }

    @Test func billingRetryAfterGraceIsInactiveButStillRenewable() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", intent: 2, retry: true, grace: F.at(day: 46), signed: F.at(day: 30))
        let s = F.evaluate([tx], [renewal], atDay: 50)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .inBillingRetryPeriod)
        #expect(sub.gracePeriodExpiresAtMs == nil)
        #expect(sub.willAutoRenew)
        #expect(s.status == .inactive)
    }

    @Test func voluntaryCancellationExpiresWithItsReason() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: 1, signed: F.at(day: 30))
        let s = F.evaluate([tx], [renewal], atDay: 31)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .expired)
        #expect(sub.expirationReason == .voluntary)
        #expect(!sub.willAutoRenew)
        #expect(s.status == .inactive)
    }

    @Test func autoRenewTurnedOffWithoutIntentIsInferredVoluntary() throws {
        let tx = F.monthly("1000", startDay: 0)
        let renewal = F.renewal("1000", product: "premium.monthly", autoRenew: 0, signed: F.at(day: 12))
        let before = try #require(F.evaluate([tx], [renewal], atDay: 20).subscriptions.first)
        #expect(before.state == .subscribed && !before.willAutoRenew && before.expirationReason == nil)
        let after = try #require(F.evaluate([tx], [renewal], atDay: 31).subscriptions.first)
        #expect(after.state == .expired && after.expirationReason == .voluntary)
    }

    @Test func expiryIntentsMapToDocumentedReasons() {
        let expected: [Int: ExpirationReason] = [1: .voluntary, 2: .billingError, 3: .priceIncrease, 4: .productUnavailable, 5: .other, 9: .other]
        for (intent, reason) in expected {
            let s = F.evaluate([F.monthly("1000", startDay: 0)],
                               [F.renewal("1000", product: "premium.monthly", autoRenew: 0, intent: intent, signed: F.at(day: 31))], atDay: 32)
            #expect(s.subscriptions.first?.expirationReason == reason)
        }
    }

    @Test func refundedSubscriptionIsRevokedAndEndsAtTheRefund() throws {
        let tx = F.transaction("1000", product: "premium.yearly", purchase: F.t0, expires: F.at(day: 365), signed: F.at(day: 20), revoked: F.at(day: 20))
        let renewal = F.renewal("1000", product: "premium.yearly", autoRenew: 0, signed: F.at(day: 20))
        let s = F.evaluate([tx], [renewal], atDay: 21)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .revoked)
        #expect(sub.expiresAtMs == F.at(day: 20))
        #expect(!sub.willAutoRenew)
        #expect(s.status == .inactive)
    }

    @Test func familySharingRemovedIsRevokedForTheFamilyMember() throws {
        let shared = F.transaction("2000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 30), signed: F.at(day: 5),
                                   revoked: F.at(day: 5), familyShared: true)
        let s = F.evaluate([shared], atDay: 6)
        let sub = try #require(s.subscriptions.first)
        #expect(sub.state == .revoked)
        #expect(sub.ownership == .familyShared)
        #expect(s.status == .inactive)
    }

    @Test func familySharedSubscriptionIsActiveForTheMember() throws {
        let shared = F.transaction("2000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 30), familyShared: true)
        let s = F.evaluate([shared], atDay: 6)
        #expect(s.status == .active)
        #expect(s.subscriptions.first?.ownership == .familyShared)
    }

    @Test func ownedNonConsumableMakesTheCustomerActive() throws {
        let shared = F.transaction("7", product: "noads", type: .nonConsumable, purchase: F.t0, familyShared: true)
        let bought = F.transaction("9", product: "noads", type: .nonConsumable, purchase: F.at(day: 3))
        let s = F.evaluate([shared, bought], atDay: 400)
        #expect(s.status == .active)
        #expect(s.nonConsumables == [NonConsumableOwnership(productId: "noads", transactionId: "9", ownership: .purchased)])

        let onlyShared = F.evaluate([shared], atDay: 400)
        #expect(onlyShared.nonConsumables == [NonConsumableOwnership(productId: "noads", transactionId: "7", ownership: .familyShared)])
    }

    @Test func refundedNonConsumableIsNotOwnedAndLeavesTheCustomerInactive() {
        let refunded = F.transaction("7", product: "noads", type: .nonConsumable, purchase: F.t0, revoked: F.at(day: 2))
        let s = F.evaluate([refunded], atDay: 3)
        #expect(s.nonConsumables.isEmpty)
        #expect(s.status == .inactive)
    }

    @Test func nonRenewingPassLastsItsConfiguredLength() throws {
        // season.pass lasts 90 days in the demo catalog; Apple sends no expiry.
        let pass = F.transaction("5", product: "season.pass", type: .nonRenewing, purchase: F.t0)
        let during = F.evaluate([pass], atDay: 89.9)
        #expect(during.status == .active)
        #expect(during.nonRenewing == [NonRenewingStatus(productId: "season.pass", expiresAtMs: F.at(day: 90), active: true)])

        let after = F.evaluate([pass], atDay: 90)
        #expect(after.status == .inactive)
        #expect(after.nonRenewing == [NonRenewingStatus(productId: "season.pass", expiresAtMs: F.at(day: 90), active: false)])
    }

    @Test func nonRenewingPassReportsTheLatestEndOfItsStandingPurchases() {
        let first = F.transaction("5", product: "season.pass", type: .nonRenewing, purchase: F.t0)
        let second = F.transaction("6", product: "season.pass", type: .nonRenewing, purchase: F.at(day: 60))
        let refundedThird = F.transaction("8", product: "season.pass", type: .nonRenewing, purchase: F.at(day: 80), revoked: F.at(day: 81))
        let s = F.evaluate([first, second, refundedThird], atDay: 100)
        #expect(s.nonRenewing == [NonRenewingStatus(productId: "season.pass", expiresAtMs: F.at(day: 150), active: true)])
    }

    @Test func subscriptionWithoutRenewalInfoIsJudgedByItsDates() throws {
        let tx = F.monthly("1000", startDay: 0)
        let during = try #require(F.evaluate([tx], atDay: 29).subscriptions.first)
        #expect(during.state == .subscribed)
        #expect(!during.willAutoRenew && during.autoRenewProductId == nil)
        let after = try #require(F.evaluate([tx], atDay: 30).subscriptions.first)
        #expect(after.state == .expired && after.expirationReason == nil)
    }

    @Test func eachSubscriptionInstanceIsReportedInGroupThenIdOrder() {
        let extras = F.transaction("30", product: "extras.monthly", purchase: F.t0, expires: F.at(day: 30))
        let premiumB = F.transaction("200", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 30), familyShared: true)
        let premiumA = F.transaction("1000", product: "premium.monthly", purchase: F.t0, expires: F.at(day: 30))
        let s = F.evaluate([premiumA, extras, premiumB], atDay: 1)
        #expect(s.subscriptions.map(\.originalTransactionId) == ["30", "200", "1000"])
        #expect(s.subscriptions.map(\.groupId) == ["extras", "premium", "premium"])
    }
}
