import KakinCore
import Testing

/// Google Play's adapter: Developer API answers → purchase facts and the entitlement the status shows.
@Suite struct PlayPurchaseFactsTests {
    static let day: Int64 = 86_400_000
    let catalog = Catalog([
        Product(productId: "premium", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1)),
        Product(productId: "coins_500", kind: .consumable, coins: 500, bonusCoins: 50),
    ])

    func subscription(state: String, order: String? = "GPA.1111-2222-3333-44444..2", expiry: String = "2026-02-01T00:00:00Z",
                      linked: String? = nil, trial: Bool = false, account: String? = "acct-1") throws -> SubscriptionPurchaseV2 {
        var item: [String: JSONValue] = [
            "productId": "premium", "expiryTime": .string(expiry),
            "autoRenewingPlan": ["autoRenewEnabled": true, "recurringPrice": ["currencyCode": "JPY", "units": "980", "nanos": 500_000_000]],
            "offerDetails": ["basePlanId": "monthly"], "offerPhase": trial ? ["freeTrial": .object([:])] : ["basePrice": .object([:])],
        ]
        if let order { item["latestSuccessfulOrderId"] = .string(order) }
        var o: [String: JSONValue] = ["startTime": "2026-01-01T00:00:00Z", "subscriptionState": .string(state), "lineItems": [.object(item)]]
        if let linked { o["linkedPurchaseToken"] = .string(linked) }
        if let account { o["externalAccountIdentifiers"] = ["obfuscatedExternalAccountId": .string(account)] }
        return try SubscriptionPurchaseV2(json: .object(o))
    }

    func product(state: String = "PURCHASED", quantity: Int = 3, refundable: Int? = nil) throws -> ProductPurchaseV2 {
        var details: [String: JSONValue] = ["quantity": .int(Int64(quantity))]
        if let refundable { details["refundableQuantity"] = .int(Int64(refundable)) }
        return try ProductPurchaseV2(json: [
            "orderId": "GPA.9999-0000-1111-22222", "purchaseCompletionTime": "2026-01-02T00:00:00Z",
            "purchaseStateContext": ["purchaseState": .string(state)], "obfuscatedExternalAccountId": "acct-2",
            "productLineItem": [["productId": "coins_500", "productOfferDetails": .object(details)]],
        ])
    }

    func voided(order: String, quantity: Int? = nil) throws -> VoidedPurchase {
        var o: [String: JSONValue] = ["purchaseToken": "tok", "orderId": .string(order), "voidedTimeMillis": "1767400000000"]
        if let quantity { o["voidedQuantity"] = .int(Int64(quantity)) }
        return try VoidedPurchase(json: .object(o))
    }

    @Test func aRenewalIsAPeriodOfTheChainNamedByItsFirstOrder() throws {
        let facts = PlayPurchaseFacts.subscription(try subscription(state: "SUBSCRIPTION_STATE_ACTIVE"), packageName: "dev.kakin.demo",
                                                   linkedChainId: nil, readAtMs: 5)
        #expect(facts.count == 1)
        let f = facts[0]
        #expect(f.store == .googlePlay && f.appId == "dev.kakin.demo")
        #expect(f.chainId == "GPA.1111-2222-3333-44444" && f.periodId == "GPA.1111-2222-3333-44444..2")
        #expect(f.owner.accountToken == "acct-1" && f.quantity == 1 && f.storeKind == .autoRenewable)
        #expect(f.priceMilli == 980_500 && f.currency == "JPY" && f.offer == PurchaseFact.Offer(type: "basePrice", id: nil))
        #expect(f.expiresAtMs == Timestamp.parseRFC3339("2026-02-01T00:00:00Z") && f.signedAtMs == 5 && f.revocation == nil)
    }

    @Test func aLinkedTokenKeepsTheChainItReplaced() throws {
        let s = try subscription(state: "SUBSCRIPTION_STATE_ACTIVE", order: "GPA.5555-6666-7777-88888", linked: "old-token")
        let f = PlayPurchaseFacts.subscription(s, packageName: "p", linkedChainId: "GPA.1111-2222-3333-44444", readAtMs: 1)[0]
        #expect(f.chainId == "GPA.1111-2222-3333-44444" && f.periodId == "GPA.5555-6666-7777-88888")
    }

    @Test func aFreeTrialIsAZeroPricedOrderAndAPendingSubscriptionHasNone() throws {
        let trial = PlayPurchaseFacts.subscription(try subscription(state: "SUBSCRIPTION_STATE_ACTIVE", trial: true), packageName: "p",
                                                   linkedChainId: nil, readAtMs: 1)[0]
        #expect(trial.priceMilli == 0 && trial.offer?.type == "freeTrial")
        #expect(PlayPurchaseFacts.subscription(try subscription(state: "SUBSCRIPTION_STATE_PENDING", order: nil), packageName: "p",
                                               linkedChainId: nil, readAtMs: 1).isEmpty)
    }

    @Test func aVoidedOrderIsRevokedInFullOrByQuantity() throws {
        let sub = try subscription(state: "SUBSCRIPTION_STATE_EXPIRED")
        let revoked = PlayPurchaseFacts.subscription(sub, packageName: "p", linkedChainId: nil,
                                                     voided: [try voided(order: "GPA.1111-2222-3333-44444..2")], readAtMs: 1)[0]
        #expect(revoked.revocation == PurchaseFact.Revocation(atMs: 1_767_400_000_000, refund: .full))
        // Another period's refund is not this one's.
        #expect(PlayPurchaseFacts.subscription(sub, packageName: "p", linkedChainId: nil,
                                               voided: [try voided(order: "GPA.1111-2222-3333-44444..1")], readAtMs: 1)[0].revocation == nil)

        let coins = try product()
        let partial = PlayPurchaseFacts.product(coins, packageName: "p", voided: [try voided(order: "GPA.9999-0000-1111-22222", quantity: 1)], readAtMs: 9)!
        #expect(partial.quantity == 3 && partial.revocation?.refund == .quantity(1))
        #expect(partial.revocation!.shareMilli(ofQuantity: 3) == 33_334)
        // One unit of three takes back exactly one unit's coins, paid and free.
        let oneOfThree = WalletRules.revocationDebit(paid: 1_500, free: 150, shareMilli: 33_334, of: WalletBalance(paid: 1_500, free: 150),
                                                     policy: WalletPolicy())
        #expect(oneOfThree.paid == 500 && oneOfThree.free == 50)
        #expect(PlayPurchaseFacts.product(try product(refundable: 1), packageName: "p", readAtMs: 9)!.revocation
                == PurchaseFact.Revocation(atMs: 9, refund: .quantity(2)))
        #expect(PlayPurchaseFacts.product(try product(state: "CANCELLED"), packageName: "p", readAtMs: 9)!.revocation
                == PurchaseFact.Revocation(atMs: 9, refund: .full))
        let plain = PlayPurchaseFacts.product(coins, packageName: "p", readAtMs: 9)!
        #expect(plain.chainId == "GPA.9999-0000-1111-22222" && plain.owner.accountToken == "acct-2" && plain.revocation == nil)
        #expect(plain.purchasedAtMs == Timestamp.parseRFC3339("2026-01-02T00:00:00Z"))
    }

    @Test func everySubscriptionStateMapsToWhatTheStatusServes() throws {
        let expected: [(String, ExternalEntitlement.Standing)] = [
            ("SUBSCRIPTION_STATE_ACTIVE", .active), ("SUBSCRIPTION_STATE_CANCELED", .active),
            ("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", .inGracePeriod), ("SUBSCRIPTION_STATE_ON_HOLD", .onHold),
            ("SUBSCRIPTION_STATE_PAUSED", .paused), ("SUBSCRIPTION_STATE_EXPIRED", .ended),
            ("SUBSCRIPTION_STATE_PENDING_PURCHASE_CANCELED", .ended), ("SUBSCRIPTION_STATE_PENDING", .pending),
            ("SUBSCRIPTION_STATE_UNSPECIFIED", .pending),
        ]
        for (state, standing) in expected {
            #expect(PlayPurchaseFacts.standing(PlaySubscriptionState(rawValue: state)) == standing, "\(state)")
        }
        let expiry = Timestamp.parseRFC3339("2026-02-01T00:00:00Z")!
        func served(_ state: String, at ms: Int64) throws -> SubscriptionStatus {
            let e = PlayPurchaseFacts.entitlement(try subscription(state: state), chainId: "GPA.1111-2222-3333-44444")!
            let status = StatusEngine.evaluate(CustomerHistory(external: [e]), catalog: catalog, nowMs: ms)
            return status.subscriptions[0]
        }
        let before = expiry - Self.day, after = expiry + Self.day
        let active = try served("SUBSCRIPTION_STATE_ACTIVE", at: before)
        #expect(active.state == .subscribed && active.source == "googlePlay" && active.groupId == "premium")
        #expect(active.originalTransactionId == "GPA.1111-2222-3333-44444" && active.expiresAtMs == expiry)
        // Grace is served past the old expiry Play keeps; hold and pause are not served, dates kept.
        let grace = try served("SUBSCRIPTION_STATE_IN_GRACE_PERIOD", at: after)
        #expect(grace.state == .inGracePeriod && grace.gracePeriodExpiresAtMs == expiry)
        let hold = try served("SUBSCRIPTION_STATE_ON_HOLD", at: after)
        #expect(hold.state == .inBillingRetryPeriod && hold.expiresAtMs == expiry)
        let paused = try served("SUBSCRIPTION_STATE_PAUSED", at: before)
        #expect(paused.state == .expired && paused.expiresAtMs == expiry)
        #expect(try served("SUBSCRIPTION_STATE_CANCELED", at: before).state == .subscribed)
        #expect(try served("SUBSCRIPTION_STATE_CANCELED", at: after).state == .expired)
        #expect(try served("SUBSCRIPTION_STATE_EXPIRED", at: before).state == .expired)
        #expect(try served("SUBSCRIPTION_STATE_EXPIRED", at: after).state == .expired)
    }
}
