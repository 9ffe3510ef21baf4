import KakinCore
import Testing

/// The status engine merges what was bought outside the App Store with the App Store's transactions.
@Suite struct ExternalEntitlementStatusTests {
    static let day: Int64 = 86_400_000
    let catalog = Catalog([
        Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1)),
        Product(productId: "noads", kind: .nonConsumable),
        Product(productId: "season.pass", kind: .nonRenewing, durationDays: 90),
    ])

    func sub(_ standing: ExternalEntitlement.Standing, expires: Int64?, renew: Bool = true, revoked: Int64? = nil) -> ExternalEntitlement {
        ExternalEntitlement(source: "stripe", id: "sub_1", productId: "premium.monthly", kind: .autoRenewable, latestId: "sub_1@\(expires ?? 0)",
                            purchasedAtMs: 0, expiresAtMs: expires, standing: standing, willAutoRenew: renew, revokedAtMs: revoked)
    }

    func status(_ external: [ExternalEntitlement], at ms: Int64) -> CustomerStatus {
        StatusEngine.evaluate(CustomerHistory(external: external), catalog: catalog, nowMs: ms)
    }

    @Test func aWebSubscriptionIsServedUntilItsPeriodEndsAndCarriesItsSource() {
        let s = status([sub(.active, expires: 30 * Self.day)], at: Self.day)
        #expect(s.status == .active)
        #expect(s.subscriptions.map(\.state) == [.subscribed] && s.subscriptions[0].source == "stripe")
        #expect(s.subscriptions[0].json["source"] == "stripe" && s.subscriptions[0].groupId == "premium")
        // Introductory offers stay the App Store's to judge.
        #expect(s.introductoryOfferEligibility["premium"] == true)
        #expect(status([sub(.pastDue, expires: 30 * Self.day)], at: Self.day).subscriptions[0].state == .inGracePeriod)
        #expect(status([sub(.pending, expires: 30 * Self.day)], at: Self.day).status == .inactive)
        let ended = status([sub(.ended, expires: 10 * Self.day, renew: false)], at: 11 * Self.day)
        #expect(ended.status == .inactive && ended.subscriptions[0].expirationReason == .voluntary && !ended.subscriptions[0].willAutoRenew)
        #expect(status([sub(.active, expires: 30 * Self.day, revoked: 2 * Self.day)], at: 3 * Self.day).subscriptions[0].state == .revoked)
    }

    @Test func oneTimePurchasesOutsideTheAppStoreOwnAndPassesLast() {
        let noads = ExternalEntitlement(source: "web", id: "ord_1", productId: "noads", kind: .nonConsumable, latestId: "ord_1", purchasedAtMs: 0,
                                        expiresAtMs: nil, standing: .active, willAutoRenew: false)
        let pass = ExternalEntitlement(source: "web", id: "ord_2", productId: "season.pass", kind: .nonRenewing, latestId: "ord_2", purchasedAtMs: 0,
                                       expiresAtMs: nil, standing: .active, willAutoRenew: false)
        let s = status([noads, pass], at: Self.day)
        #expect(s.nonConsumables.map(\.source) == ["web"] && s.nonRenewing.map(\.expiresAtMs) == [90 * Self.day])
        #expect(status([pass], at: 91 * Self.day).status == .inactive)
        var refunded = noads
        refunded.revokedAtMs = 5
        #expect(status([refunded], at: Self.day).status == .inactive)
        // Duplicates and order never matter.
        #expect(status([pass, noads, noads, pass], at: Self.day) == s)
        #expect(ExternalEntitlement(json: noads.json) == noads)
    }
}
