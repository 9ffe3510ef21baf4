@testable import AppStoreSimulator
import KakinCore
import Testing

@Suite struct OneTimePurchases {
    @Test func consumablePurchaseIsSignedWithEveryTransactionFieldAndSendsOneTimeCharge() throws {
        var s = makeState()
        let out = try s.buy("coins", quantity: 3)
        #expect(out.kind == .purchased)
        let t = s.tx(out.transactionId)
        #expect(t["transactionId"]?.stringValue == out.transactionId)
        #expect(t["originalTransactionId"]?.stringValue == out.transactionId)
        #expect(t["bundleId"] == "com.example.app")
        #expect(t["productId"] == "coins")
        #expect(t["type"] == "Consumable")
        #expect(t["quantity"] == 3)
        #expect(t["price"] == .int(2_970))
        #expect(t["currency"] == "USD")
        #expect(t["purchaseDate"] == .int(startMs))
        #expect(t["originalPurchaseDate"] == .int(startMs))
        #expect(t["signedDate"] == .int(startMs))
        #expect(t["environment"] == "Sandbox")
        #expect(t["storefront"] == "USA")
        #expect(t["storefrontId"] == "143441")
        #expect(t["transactionReason"] == "PURCHASE")
        #expect(t["inAppOwnershipType"] == "PURCHASED")
        #expect(t["appAccountToken"]?.stringValue == tokenA)
        #expect(t["appTransactionId"]?.stringValue?.isEmpty == false)
        #expect(t["webOrderLineItemId"] == nil)
        #expect(t["expiresDate"] == nil)
        #expect(s.kinds(out.notificationUUIDs) == ["ONE_TIME_CHARGE"])
        let n = s.notes(out.notificationUUIDs)[0]
        #expect(n["version"] == "2.0")
        #expect(n["data"]?["signedTransactionInfo"]?.stringValue == s.store.transactions[out.transactionId!]!.jws)
        #expect(n["data"]?["signedRenewalInfo"] == nil)
        #expect(n["data"]?["status"] == nil)
        #expect(n["data"]?["appAppleId"] == 1234)
        #expect(n["data"]?["bundleVersion"] == "1.0")
    }

    @Test func transactionIdsAreDecimalStringsAndReplayIdentically() throws {
        var a = makeState(), b = makeState()
        let x = try a.buy("coins"), y = try b.buy("coins")
        #expect(x.transactionId == y.transactionId)
        #expect(x.transactionId!.allSatisfy { $0.isNumber })
        #expect(a.store.notifications[0].notificationUUID == b.store.notifications[0].notificationUUID)
        #expect(a.tx(x.transactionId) == b.tx(y.transactionId))
    }

    @Test func nonConsumableCannotBeBoughtTwiceAndNonRenewingHasNoExpiry() throws {
        var s = makeState()
        _ = try s.buy("lifetime")
        #expect(throws: KakinError.self) { try s.buy("lifetime") }
        let pass = try s.buy("pass")
        #expect(s.tx(pass.transactionId)["type"] == "Non-Renewing Subscription")
        #expect(s.tx(pass.transactionId)["expiresDate"] == nil)
        #expect(s.kinds(pass.notificationUUIDs) == ["ONE_TIME_CHARGE"])
    }

    @Test func badPurchasesAreRefusedAndChangeNothing() throws {
        var s = makeState()
        let before = s.store
        #expect(throws: KakinError.self) { try s.buy("nope") }
        #expect(throws: KakinError.self) { try s.buy("coins", token: "not-a-uuid") }
        #expect(throws: KakinError.self) { try s.buy("lifetime", quantity: 2) }
        #expect(throws: KakinError.self) { try s.buy("coins", quantity: 11) }
        #expect(throws: KakinError.self) { try s.buy("coins", offer: .introductory) }
        #expect(throws: KakinError.self) { try s.buy("coins", family: true) }
        #expect(throws: KakinError.self) { try s.buy("B", offer: .promotional(id: "nope")) }
        #expect(throws: KakinError.self) { try s.buy("B", offer: .introductory) }
        #expect(s.store == before)
        let unknown = #expect(throws: KakinError.self) { try s.buy("nope") }
        #expect(unknown?.kind == .simulatorUnknownProduct)
    }

    @Test func familySharedNonConsumableIsAFamilyCopyWithoutTheToken() throws {
        var s = makeState()
        let out = try s.buy("lifetime", family: true)
        let t = s.tx(out.transactionId)
        #expect(t["inAppOwnershipType"] == "FAMILY_SHARED")
        #expect(t["appAccountToken"] == nil)
        #expect(s.kinds(out.notificationUUIDs) == ["ONE_TIME_CHARGE"])
        let revoke = try s.revokeFamilySharing(transactionId: out.transactionId!)
        #expect(s.kinds(revoke.notificationUUIDs) == ["REVOKE"])
        #expect(s.tx(out.transactionId)["revocationType"] == "FAMILY_REVOKE")
        #expect(s.tx(out.transactionId)["revocationReason"] == 0)
    }
}

@Suite struct SubscriptionLifecycle {
    @Test func firstSubscriptionGetsTheIntroTrialAndInitialBuy() throws {
        var s = makeState()
        let out = try s.buy("A")
        let otid = out.originalTransactionId!
        #expect(s.kinds(out.notificationUUIDs) == ["SUBSCRIBED/INITIAL_BUY"])
        let t = s.tx(out.transactionId)
        #expect(t["type"] == "Auto-Renewable Subscription")
        #expect(t["subscriptionGroupIdentifier"] == "g")
        #expect(t["expiresDate"] == .int(plus("P1M", startMs)))
        #expect(t["offerType"] == 1)
        #expect(t["offerIdentifier"] == nil)
        #expect(t["offerDiscountType"] == "FREE_TRIAL")
        #expect(t["offerPeriod"] == "P1M")
        #expect(t["price"] == 0)
        #expect(t["webOrderLineItemId"]?.stringValue?.isEmpty == false)
        let r = s.renewal(otid)
        #expect(r["originalTransactionId"]?.stringValue == otid)
        #expect(r["productId"] == "A")
        #expect(r["autoRenewProductId"] == "A")
        #expect(r["autoRenewStatus"] == 1)
        #expect(r["isInBillingRetryPeriod"] == false)
        #expect(r["renewalDate"] == .int(plus("P1M", startMs)))
        #expect(r["recentSubscriptionStartDate"] == .int(startMs))
        #expect(r["renewalPrice"] == 4_990)
        #expect(r["currency"] == "USD")
        #expect(r["appAccountToken"]?.stringValue == tokenA)
        #expect(r["environment"] == "Sandbox")
        #expect(r["signedDate"] == .int(startMs))
        #expect(s.notes(out.notificationUUIDs)[0]["data"]?["status"] == 1)
    }

    @Test func renewalsHappenAtEachExpiryInOrderAcrossAYear() throws {
        var s = makeState()
        let otid = try s.buy("A").originalTransactionId!
        let notes = s.advance(by: 365 * .day)
        #expect(s.kinds(notes) == Array(repeating: "DID_RENEW", count: 12))
        let chain = s.chain(otid)
        #expect(chain.count == 13)
        var expected = plus("P1M", startMs)
        for t in chain.dropFirst() {
            #expect(t["purchaseDate"] == .int(expected))
            expected = plus("P1M", expected)
            #expect(t["expiresDate"] == .int(expected))
            #expect(t["transactionReason"] == "RENEWAL")
            #expect(t["originalTransactionId"]?.stringValue == otid)
            #expect(t["originalPurchaseDate"] == .int(startMs))
            #expect(t["price"] == 4_990)
            #expect(t["offerType"] == nil)
            #expect(t["signedDate"] == t["purchaseDate"])
        }
        #expect(Set(chain.compactMap { $0["webOrderLineItemId"]?.stringValue }).count == 13)
        #expect(Set(chain.compactMap { $0["transactionId"]?.stringValue }).count == 13)
        // Each DID_RENEW was signed at its own renewal instant.
        #expect(s.notes(notes).map { $0["signedDate"] } == chain.dropFirst().map { $0["purchaseDate"] })
    }

    @Test func autoRenewOffExpiresVoluntarilyAtTheEndOfThePeriod() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = s.advance(by: 3 * .day)
        let off = try s.setAutoRenew(otid, enabled: false)
        #expect(s.kinds(off.notificationUUIDs) == ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"])
        #expect(s.renewal(otid)["autoRenewStatus"] == 0)
        #expect(throws: KakinError.self) { try s.setAutoRenew(otid, enabled: false) }
        let notes = s.advance(by: 40 * .day)
        #expect(s.kinds(notes) == ["EXPIRED/VOLUNTARY"])
        #expect(s.notes(notes)[0]["signedDate"] == .int(plus("P1M", startMs)))
        #expect(s.renewal(otid)["expirationIntent"] == 1)
        #expect(s.status(of: s.store.subscriptions[otid]!) == 2)
    }

    @Test func autoRenewBackOnKeepsRenewing() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.setAutoRenew(otid, enabled: false)
        let on = try s.setAutoRenew(otid, enabled: true)
        #expect(s.kinds(on.notificationUUIDs) == ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_ENABLED"])
        let renewed = s.advance(by: 32 * .day)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
    }

    @Test func lapsedCustomerResubscribesOnTheSameOriginalTransactionWithoutAnotherIntro() throws {
        var s = makeState()
        let first = try s.buy("A")
        let otid = first.originalTransactionId!
        _ = try s.setAutoRenew(otid, enabled: false)
        _ = s.advance(by: 40 * .day)
        #expect(throws: KakinError.self) { try s.buy("A", offer: .introductory) }
        let again = try s.buy("B")
        #expect(again.kind == .resubscribed)
        #expect(again.originalTransactionId == otid)
        #expect(s.kinds(again.notificationUUIDs) == ["SUBSCRIBED/RESUBSCRIBE"])
        let t = s.tx(again.transactionId)
        #expect(t["offerType"] == nil)
        #expect(t["originalPurchaseDate"] == .int(startMs))
        #expect(t["purchaseDate"] == .int(startMs + 40 * .day))
        // The gap (9 days) is under 60 days: the continuous run still starts at the first purchase.
        #expect(s.renewal(otid)["recentSubscriptionStartDate"] == .int(startMs))
    }

    @Test func introIsOncePerGroupPerAccountAndNeverWhileSubscribed() throws {
        var s = makeState()
        _ = try s.buy("B")
        // Subscribed in the group: an explicit intro on another product is refused...
        #expect(throws: KakinError.self) { try s.buy("A", offer: .introductory) }
        #expect(!s.isEligibleForIntro(account: tokenA, group: "g"))
        // ...while another account (and the anonymous one) still gets it automatically.
        let other = try s.buy("A", token: tokenB)
        #expect(s.tx(other.transactionId)["offerType"] == 1)
        let anon = try s.buy("Q", token: nil)
        #expect(s.tx(anon.transactionId)["offerType"] == 1)
        #expect(s.tx(anon.transactionId)["appAccountToken"] == nil)
    }

    @Test func payAsYouGoIntroIsOneTransactionPerDiscountedPeriodThenRegular() throws {
        let month = ISOPeriod(months: 1)
        let catalog = Catalog([Product(productId: "social", kind: .autoRenewable, priceMilli: 4_990, currency: "USD", groupId: "s", period: month,
                                       introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .payAsYouGo, period: month, numberOfPeriods: 3, priceMilli: 2_490))])
        var s = makeState(catalog: catalog)
        let otid = try s.buy("social").originalTransactionId!
        #expect(s.renewal(otid)["offerType"] == 1)
        #expect(s.renewal(otid)["renewalPrice"] == 2_490)
        _ = s.advance(by: 100 * .day)
        let chain = s.chain(otid)
        #expect(chain.map { $0["price"] } == [2_490, 2_490, 2_490, 4_990])
        #expect(chain.map { $0["offerType"] } == [1, 1, 1, nil])
        #expect(chain[0]["offerPeriod"] == "P3M")
        #expect(chain[0]["offerDiscountType"] == "PAY_AS_YOU_GO")
        #expect(chain[3]["purchaseDate"] == .int(plus("P3M", startMs)))
    }

    @Test func payUpFrontIntroIsOneTransactionSpanningTheOffer() throws {
        let catalog = Catalog([Product(productId: "yearly", kind: .autoRenewable, priceMilli: 49_990, currency: "USD", groupId: "s", period: ISOPeriod(years: 1),
                                       introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .payUpFront, period: ISOPeriod(months: 3), priceMilli: 8_990))])
        var s = makeState(catalog: catalog)
        let out = try s.buy("yearly")
        let t = s.tx(out.transactionId)
        #expect(t["price"] == 8_990)
        #expect(t["offerDiscountType"] == "PAY_UP_FRONT")
        #expect(t["expiresDate"] == .int(plus("P3M", startMs)))
        _ = s.advance(by: 100 * .day)
        #expect(s.latestTx(out.originalTransactionId!)["expiresDate"] == .int(plus("P1Y", plus("P3M", startMs))))
    }
}
