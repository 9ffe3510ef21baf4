import Foundation
import KakinCore
import KakinService
import KakinServer
import Testing

/// One test per App Store notification type and subtype (reference §5.3): each is delivered to
/// `POST /v1/notifications/appstore`, applied by the inbox, and checked through `GET /v1/customers/{id}`.
@Suite(.serialized) struct NotificationTypes {
    static let day = TestAppStore.day

    /// A monthly subscription bought 10 days ago by customer u1, announced by SUBSCRIBED/INITIAL_BUY.
    struct Subscribed {
        let k: TestKakin
        let token: String
        let now: Int64
        let start: Int64
        let original = "700000001"
        var expires: Int64 { start + 30 * NotificationTypes.day }

        init(_ k: TestKakin) async throws {
            self.k = k
            token = try await k.token("u1")
            now = k.clock.nowMs()
            start = now - 10 * NotificationTypes.day
            try await k.deliver([try notify("SUBSCRIBED", "INITIAL_BUY", tx: try tx(original, start, expires, signed: start),
                                            renewal: try renewal(signed: start), at: start)])
        }

        func tx(_ id: String, _ purchase: Int64, _ expires: Int64, product: String = "premium.monthly", signed: Int64,
                revokedMs: Int64? = nil, offerType: Int? = nil, offerId: String? = nil, isUpgraded: Bool = false,
                familyShared: Bool = false) throws -> String {
            try k.appStore.subscriptionTransaction(id: id, original: original, productId: product, token: token, purchaseMs: purchase,
                                                   expiresMs: expires, signedMs: signed, offerType: offerType, offerId: offerId,
                                                   revokedMs: revokedMs, isUpgraded: isUpgraded, familyShared: familyShared)
        }

        func renewal(product: String = "premium.monthly", next: String? = nil, autoRenew: Bool = true, signed: Int64,
                     renewalMs: Int64? = nil, intent: Int? = nil, retry: Bool = false, graceUntil: Int64? = nil,
                     pendingOffer: String? = nil, priceIncrease: Int? = nil) throws -> String {
            try k.appStore.renewalInfo(original: original, productId: product, autoRenewProductId: next, autoRenew: autoRenew,
                                       signedMs: signed, renewalMs: renewalMs ?? expires, expirationIntent: intent,
                                       billingRetry: retry, graceUntilMs: graceUntil, pendingOfferId: pendingOffer,
                                       priceIncreaseStatus: priceIncrease)
        }

        func notify(_ type: String, _ subtype: String?, tx: String?, renewal: String? = nil, at: Int64) throws -> String {
            try k.appStore.notification(type, subtype, transaction: tx, renewal: renewal, signedMs: at)
        }

        func status() async throws -> (customer: JSONValue, subscription: JSONValue) {
            let c = try await k.customer("u1")
            return (c, c["subscriptions"]?.arrayValue?.first ?? .null)
        }

        /// Moves the server's clock past the current period's end.
        func pastExpiry(days: Int64 = 1) { k.clock.advance(ms: expires - now + days * NotificationTypes.day) }
    }

    @Test func subscribedInitialBuyMakesTheCustomerActive() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["state"] == "subscribed")
            #expect(sub["originalTransactionId"] == .string(s.original))
            #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(s.expires)))
            #expect(sub["willAutoRenew"] == true)
            #expect(c["eligibility"]?["introductoryOffer"]?["premium"] == false)
        }
    }

    @Test func subscribedResubscribeReactivatesAnExpiredCustomer() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            s.pastExpiry(days: 20)
            #expect(try await s.status().customer["status"] == "inactive")
            let back = k.clock.nowMs()
            try await k.deliver([try s.notify("SUBSCRIBED", "RESUBSCRIBE", tx: try s.tx("700000002", back, back + 30 * Self.day, signed: back),
                                              renewal: try s.renewal(signed: back, renewalMs: back + 30 * Self.day), at: back)])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(back + 30 * Self.day)))
        }
    }

    @Test func didRenewMovesExpiryToTheNewTransaction() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let next = s.expires + 30 * Self.day
            try await k.deliver([try s.notify("DID_RENEW", nil, tx: try s.tx("700000002", s.expires, next, signed: s.expires),
                                              renewal: try s.renewal(signed: s.expires, renewalMs: next), at: s.expires)])
            s.pastExpiry(days: 2)
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(next)))
        }
    }

    @Test func didFailToRenewGracePeriodKeepsAccessUntilGraceEnds() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let grace = s.expires + 16 * Self.day
            try await k.deliver([try s.notify("DID_FAIL_TO_RENEW", "GRACE_PERIOD", tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                                              renewal: try s.renewal(signed: s.expires, retry: true, graceUntil: grace), at: s.expires)])
            s.pastExpiry(days: 3)
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["state"] == "inGracePeriod")
            #expect(sub["gracePeriodExpiresAt"] == .string(Timestamp.rfc3339(grace)))
        }
    }

    @Test func didFailToRenewWithoutGraceIsBillingRetry() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            try await k.deliver([try s.notify("DID_FAIL_TO_RENEW", nil, tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                                              renewal: try s.renewal(signed: s.expires, retry: true), at: s.expires)])
            s.pastExpiry(days: 3)
            let (c, sub) = try await s.status()
            #expect(c["status"] == "inactive")
            #expect(sub["state"] == "inBillingRetryPeriod")
        }
    }

    @Test func gracePeriodExpiredLeavesBillingRetry() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let grace = s.expires + 3 * Self.day
            try await k.deliver([
                try s.notify("DID_FAIL_TO_RENEW", "GRACE_PERIOD", tx: nil, renewal: try s.renewal(signed: s.expires, retry: true, graceUntil: grace), at: s.expires),
                try s.notify("GRACE_PERIOD_EXPIRED", nil, tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                             renewal: try s.renewal(signed: grace, retry: true), at: grace),
            ])
            s.pastExpiry(days: 5)
            #expect(try await s.status().subscription["state"] == "inBillingRetryPeriod")
        }
    }

    @Test func didRenewBillingRecoveryRestoresAccess() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            try await k.deliver([try s.notify("DID_FAIL_TO_RENEW", nil, tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                                              renewal: try s.renewal(signed: s.expires, retry: true), at: s.expires)])
            s.pastExpiry(days: 5)
            let recovered = k.clock.nowMs()
            try await k.deliver([try s.notify("DID_RENEW", "BILLING_RECOVERY", tx: try s.tx("700000002", recovered, recovered + 30 * Self.day, signed: recovered),
                                              renewal: try s.renewal(signed: recovered, renewalMs: recovered + 30 * Self.day), at: recovered)])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["state"] == "subscribed")
        }
    }

    @Test func upgradeSwitchesToTheHigherProductNow() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([
                try s.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", tx: try s.tx("700000002", now, now + 30 * Self.day, product: "premium.plus", signed: now),
                             renewal: try s.renewal(product: "premium.plus", signed: now, renewalMs: now + 30 * Self.day), at: now),
                try s.notify("DID_CHANGE_RENEWAL_PREF", "UPGRADE", tx: try s.tx(s.original, s.start, s.expires, signed: now, isUpgraded: true), at: now),
            ])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["productId"] == "premium.plus")
            #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(now + 30 * Self.day)))
        }
    }

    @Test func downgradeKeepsTheLevelAndSchedulesTheNextProduct() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([try s.notify("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                                              renewal: try s.renewal(next: "premium.lite", signed: now), at: now)])
            let sub = try await s.status().subscription
            #expect(sub["productId"] == "premium.monthly")
            #expect(sub["autoRenewProductId"] == "premium.lite")
            let later = now + Self.day
            try await k.deliver([try s.notify("DID_CHANGE_RENEWAL_PREF", nil, tx: nil, renewal: try s.renewal(signed: later), at: later)])
            #expect(try await s.status().subscription["autoRenewProductId"] == "premium.monthly")
        }
    }

    @Test func renewalStatusChangesShowInWillAutoRenew() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([try s.notify("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", tx: nil, renewal: try s.renewal(autoRenew: false, signed: now), at: now)])
            var (c, sub) = try await s.status()
            #expect(sub["willAutoRenew"] == false)
            #expect(c["status"] == "active")
            try await k.deliver([try s.notify("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", tx: nil, renewal: try s.renewal(signed: now + 1000), at: now + 1000)])
            (c, sub) = try await s.status()
            #expect(sub["willAutoRenew"] == true)
        }
    }

    @Test func offerRedeemedShowsTheSinglePendingOffer() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([
                try s.notify("OFFER_REDEEMED", nil, tx: try s.tx(s.original, s.start, s.expires, signed: s.start), renewal: try s.renewal(signed: now, pendingOffer: "promo.1y"), at: now),
                try s.notify("OFFER_REDEEMED", nil, tx: nil, renewal: try s.renewal(signed: now + 1000, pendingOffer: "promo.6m"), at: now + 1000),
            ])
            let sub = try await s.status().subscription
            #expect(sub["pendingOffer"]?["id"] == "promo.6m")
            #expect(sub["pendingOffer"]?["type"] == "promotional")
        }
    }

    @Test func offerRedeemedUpgradeAndDowngradeFollowThePlanChangeRules() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([try s.notify("OFFER_REDEEMED", "DOWNGRADE", tx: nil, renewal: try s.renewal(next: "premium.lite", signed: now, pendingOffer: "lite.promo"), at: now)])
            #expect(try await s.status().subscription["autoRenewProductId"] == "premium.lite")
            try await k.deliver([try s.notify("OFFER_REDEEMED", "UPGRADE", tx: try s.tx("700000002", now + 1000, now + 1000 + 365 * Self.day, product: "premium.plus", signed: now + 1000, offerType: 2, offerId: "plus.promo"),
                                              renewal: try s.renewal(product: "premium.plus", signed: now + 1000), at: now + 1000)])
            let sub = try await s.status().subscription
            #expect(sub["productId"] == "premium.plus")
            #expect(sub["offer"]?["id"] == "plus.promo")
        }
    }

    @Test func priceIncreaseNoticesChangeNothingYet() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            for (subtype, consent) in [("PENDING", 0), ("ACCEPTED", 1)] {
                try await k.deliver([try s.notify("PRICE_INCREASE", subtype, tx: nil, renewal: try s.renewal(signed: now + Int64(consent), priceIncrease: consent), at: now + Int64(consent))])
                let (c, sub) = try await s.status()
                #expect(c["status"] == "active")
                #expect(sub["state"] == "subscribed")
            }
        }
    }

    @Test(arguments: [("VOLUNTARY", 1, "voluntary"), ("BILLING_RETRY", 2, "billingError"), ("PRICE_INCREASE", 3, "priceIncrease"),
                      ("PRODUCT_NOT_FOR_SALE", 4, "productUnavailable"), (nil, 5, "other")] as [(String?, Int, String)])
    func expiredEndsAccessWithItsReason(_ subtype: String?, _ intent: Int, _ reason: String) async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            s.pastExpiry()
            let at = s.expires + 1000
            try await k.deliver([try s.notify("EXPIRED", subtype, tx: try s.tx(s.original, s.start, s.expires, signed: s.start),
                                              renewal: try s.renewal(autoRenew: false, signed: at, intent: intent), at: at)])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "inactive")
            #expect(sub["state"] == "expired")
            #expect(sub["expirationReason"] == .string(reason))
        }
    }

    @Test func refundOfASubscriptionRevokesIt() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([try s.notify("REFUND", nil, tx: try s.tx(s.original, s.start, s.expires, signed: now, revokedMs: now),
                                              renewal: try s.renewal(autoRenew: false, signed: now), at: now)])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "inactive")
            #expect(sub["state"] == "revoked")
        }
    }

    @Test func refundDeclinedAndConsumptionRequestChangeNothing() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            let before = try await s.status().customer
            try await k.deliver([
                try s.notify("CONSUMPTION_REQUEST", nil, tx: try s.tx(s.original, s.start, s.expires, signed: now), at: now),
                try s.notify("REFUND_DECLINED", nil, tx: try s.tx(s.original, s.start, s.expires, signed: now + 1), at: now + 1),
            ])
            #expect(try await s.status().customer == before)
        }
    }

    @Test func refundReversedReinstatesASubscription() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver([
                try s.notify("REFUND", nil, tx: try s.tx(s.original, s.start, s.expires, signed: now, revokedMs: now), at: now),
                try s.notify("REFUND_REVERSED", nil, tx: try s.tx(s.original, s.start, s.expires, signed: now + 1000), at: now + 1000),
            ])
            let (c, sub) = try await s.status()
            #expect(c["status"] == "active")
            #expect(sub["state"] == "subscribed")
        }
    }

    @Test func revokeRemovesFamilySharedAccess() async throws {
        try await TestKakin.with { k in
            let token = try await k.token("u1")
            let now = k.clock.nowMs()
            func shared(_ signed: Int64, revoked: Int64?) throws -> String {
                try k.appStore.subscriptionTransaction(id: "800000001", original: "800000001", token: token, purchaseMs: now - Self.day,
                                                       expiresMs: now + 29 * Self.day, signedMs: signed, revokedMs: revoked, familyShared: true)
            }
            try await k.deliver([try k.appStore.notification("SUBSCRIBED", "INITIAL_BUY", transaction: try shared(now - Self.day, revoked: nil), signedMs: now - Self.day)])
            var c = try await k.customer("u1")
            #expect(c["status"] == "active")
            #expect(c["subscriptions"]?.arrayValue?.first?["ownership"] == "familyShared")
            try await k.deliver([try k.appStore.notification("REVOKE", nil, transaction: try shared(now, revoked: now), signedMs: now)])
            c = try await k.customer("u1")
            #expect(c["status"] == "inactive")
            #expect(c["subscriptions"]?.arrayValue?.first?["state"] == "revoked")
        }
    }

    @Test func renewalExtendedMovesTheExpiry() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            let extended = s.expires + 7 * Self.day
            try await k.deliver([try s.notify("RENEWAL_EXTENDED", nil, tx: try s.tx(s.original, s.start, extended, signed: now),
                                              renewal: try s.renewal(signed: now, renewalMs: extended), at: now)])
            #expect(try await s.status().subscription["expiresAt"] == .string(Timestamp.rfc3339(extended)))
        }
    }

    @Test func renewalExtensionSummaryAndFailureAreAcknowledged() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            let summary = try k.appStore.notification("RENEWAL_EXTENSION", "SUMMARY", block: "summary", [
                "environment": "Sandbox", "appAppleId": 1_234_567_890, "bundleId": .string(TestAppStore.bundleId), "productId": "premium.monthly",
                "requestIdentifier": "r1", "storefrontCountryCodes": ["USA"], "succeededCount": 3, "failedCount": 0,
            ], signedMs: now)
            let failure = try s.notify("RENEWAL_EXTENSION", "FAILURE", tx: try s.tx(s.original, s.start, s.expires, signed: now), at: now)
            try await k.deliver([summary, failure])
            #expect(try await s.status().customer["status"] == "active")
            #expect(try await k.runtime.app.store.pendingNotificationCount() == 0)
        }
    }

    @Test func advancedCommerceTypesAreStoredAndApplied() async throws {
        try await TestKakin.with { k in
            let s = try await Subscribed(k)
            let now = k.clock.nowMs()
            try await k.deliver(try ["METADATA_UPDATE", "MIGRATION", "PRICE_CHANGE"].enumerated().map { i, type in
                try s.notify(type, nil, tx: try s.tx(s.original, s.start, s.expires, signed: now + Int64(i)), at: now + Int64(i))
            })
            #expect(try await s.status().customer["status"] == "active")
        }
    }

    @Test func oneTimeChargeCreditsCoinsOnceWhicheverPathComesFirst() async throws {
        try await TestKakin.with { k in
            let token = try await k.token("u1")
            let tx = try k.appStore.transaction(productId: "coins.500", appAccountToken: token, purchaseMs: k.clock.nowMs())
            try await k.deliver([try k.appStore.notification("ONE_TIME_CHARGE", nil, transaction: tx.jws, signedMs: k.clock.nowMs())])
            #expect(try await k.wallet("u1") == WalletBalance(paid: 500, free: 50))
            let post = try await k.postTransaction("u1", jws: tx.jws)
            #expect(post.status == 409)
            #expect(try await k.wallet("u1") == WalletBalance(paid: 500, free: 50))
        }
    }

    @Test func oneTimeChargeOfANonConsumableGrantsOwnership() async throws {
        try await TestKakin.with { k in
            let token = try await k.token("u1")
            let tx = try k.appStore.transaction(productId: "noads", type: "Non-Consumable", appAccountToken: token, purchaseMs: k.clock.nowMs())
            try await k.deliver([try k.appStore.notification("ONE_TIME_CHARGE", nil, transaction: tx.jws, signedMs: k.clock.nowMs())])
            let c = try await k.customer("u1")
            #expect(c["status"] == "active")
            #expect(c["nonConsumables"]?.arrayValue?.first?["productId"] == "noads")
        }
    }

    @Test func refundOfCoinsDebitsThemAndReversalCreditsThemBack() async throws {
        try await TestKakin.with { k in
            let now = k.clock.nowMs()
            let tx = try k.appStore.transaction(productId: "coins.500", purchaseMs: now)
            #expect(try await k.postTransaction("u1", jws: tx.jws).status == 201)
            let refunded = try k.appStore.transaction(id: tx.id, productId: "coins.500", purchaseMs: now, signedMs: now + 1000, revokedMs: now + 1000)
            try await k.deliver([try k.appStore.notification("REFUND", nil, transaction: refunded.jws, signedMs: now + 1000)])
            #expect(try await k.wallet("u1") == WalletBalance(paid: 0, free: 0))
            let reversed = try k.appStore.transaction(id: tx.id, productId: "coins.500", purchaseMs: now, signedMs: now + 2000)
            try await k.deliver([try k.appStore.notification("REFUND_REVERSED", nil, transaction: reversed.jws, signedMs: now + 2000)])
            #expect(try await k.wallet("u1") == WalletBalance(paid: 500, free: 50))
            let kinds = try await k.request("GET", "/v1/customers/u1/wallet/ledger").json["entries"]?.arrayValue?.map { $0["kind"]?.stringValue }
            #expect(kinds == ["refundReversed", "refund", "purchase"])
            #expect(try await k.ledgerCheckOK())
        }
    }

    @Test func refundAndReversalArrivingBackwardsEndWithTheSameBalance() async throws {
        try await TestKakin.with { k in
            let now = k.clock.nowMs()
            let tx = try k.appStore.transaction(productId: "coins.100", purchaseMs: now)
            #expect(try await k.postTransaction("u1", jws: tx.jws).status == 201)
            let refunded = try k.appStore.transaction(id: tx.id, purchaseMs: now, signedMs: now + 1000, revokedMs: now + 1000)
            let reversed = try k.appStore.transaction(id: tx.id, purchaseMs: now, signedMs: now + 2000)
            try await k.deliver([try k.appStore.notification("REFUND_REVERSED", nil, transaction: reversed.jws, signedMs: now + 2000),
                                 try k.appStore.notification("REFUND", nil, transaction: refunded.jws, signedMs: now + 1000)])
            #expect(try await k.wallet("u1") == WalletBalance(paid: 100, free: 0))
        }
    }

    @Test func refundBeforeThePurchaseIsPresentedMeansItIsNeverCredited() async throws {
        try await TestKakin.with { k in
            let now = k.clock.nowMs()
            let tx = try k.appStore.transaction(purchaseMs: now)
            let refunded = try k.appStore.transaction(id: tx.id, purchaseMs: now, signedMs: now + 1000, revokedMs: now + 1000)
            try await k.deliver([try k.appStore.notification("REFUND", nil, transaction: refunded.jws, signedMs: now + 1000)])
            let r = try await k.postTransaction("u1", jws: tx.jws)
            #expect(r.status == 422)
            #expect(r.errorCode == "transaction_revoked")
            #expect(try await k.wallet("u1").total == 0)
        }
    }

    @Test func testExternalTokenRescindConsentAndUnknownTypesAreAcknowledged() async throws {
        try await TestKakin.with { k in
            let now = k.clock.nowMs()
            let test = try k.appStore.notification("TEST", nil, transaction: nil, signedMs: now)
            let external = try k.appStore.notification("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED", block: "externalPurchaseToken", [
                "externalPurchaseId": "SANDBOX_abc", "tokenCreationDate": .int(now), "appAppleId": 1_234_567_890, "bundleId": .string(TestAppStore.bundleId),
            ], signedMs: now)
            let rescind = try k.appStore.notification("RESCIND_CONSENT", nil, block: "appData", [
                "appAppleId": 1_234_567_890, "bundleId": .string(TestAppStore.bundleId), "environment": "Sandbox", "signedAppTransactionInfo": "x",
            ], signedMs: now)
            let unknown = try k.appStore.notification("SOMETHING_APPLE_ADDS_LATER", "NEW_SUBTYPE", transaction: nil, signedMs: now)
            for n in [test, external, rescind, unknown] { #expect(try await k.postNotification(n).status == 200) }
            await k.runtime.app.services.notifications.drain()
            #expect(try await k.runtime.app.store.pendingNotificationCount() == 0)
        }
    }

    @Test func duplicateNotificationIsAcknowledgedAndAppliedOnce() async throws {
        try await TestKakin.with { k in
            let token = try await k.token("u1")
            let tx = try k.appStore.transaction(appAccountToken: token, purchaseMs: k.clock.nowMs())
            let n = try k.appStore.notification("ONE_TIME_CHARGE", nil, uuid: "11111111-2222-3333-4444-555555555555", transaction: tx.jws, signedMs: k.clock.nowMs())
            try await k.deliver([n, n, n])
            #expect(try await k.wallet("u1").total == 100)
            #expect(k.runtime.app.metrics.value(.notificationsReceived) == 1)
        }
    }

    @Test func invalidOrForeignNotificationsAre400() async throws {
        try await TestKakin.with { k in
            let other = try k.appStore.notification("TEST", nil, transaction: nil, signedMs: k.clock.nowMs(), bundleId: "com.other.app")
            let r1 = try await k.postNotification(other)
            #expect(r1.status == 400)
            #expect(r1.errorCode == "wrong_bundle_id")
            let r2 = try await k.postNotification("a.b.c")
            #expect(r2.status == 400)
            #expect(r2.errorCode == "invalid_format")
            let parts = other.split(separator: ".")
            let r3 = try await k.postNotification("\(parts[0]).\(parts[1]).\(String(parts[2]).reversed())")
            #expect(r3.status == 400)
        }
    }

    @Test func notificationForAnUnknownCustomerIsKeptUntilTheAppPresentsIt() async throws {
        try await TestKakin.with { k in
            let tx = try k.appStore.transaction(productId: "noads", type: "Non-Consumable", purchaseMs: k.clock.nowMs())
            try await k.deliver([try k.appStore.notification("ONE_TIME_CHARGE", nil, transaction: tx.jws, signedMs: k.clock.nowMs())])
            #expect(try await k.customer("u1")["status"] == "new")
            #expect(try await k.postTransaction("u1", jws: tx.jws).status == 201)
            #expect(try await k.customer("u1")["status"] == "active")
        }
    }
}
