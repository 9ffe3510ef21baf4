@testable import GooglePlaySimulator
import KakinCore
import Testing

/// The Play simulator's engine alone (a value type, no I/O): how subscriptions move through time, what each step
/// publishes, and what the Developer API then answers.
@Suite struct PlayEngineTests {
    static let start: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z
    static let day: Int64 = 86_400_000

    func engine(graceDays: Int = 7, holdDays: Int = 30) -> PlayEngine {
        var config = PlaySimulatorConfiguration.demo(seed: 42)
        config.graceDays = graceDays
        config.holdDays = holdDays
        return PlayEngine(config: config, startMs: Self.start)
    }

    func subscribe(_ e: inout PlayEngine, plan: String = "monthly", trial: Bool = false, account: String = "u1") throws -> PurchaseRecord {
        let p = try e.purchase(.init(productId: "premium", basePlanId: plan, offerId: trial ? "free-trial" : nil, accountId: account))
        try e.acknowledge(p.token, packageName: "dev.kakin.demo", productId: "premium", subscription: true, developerPayload: nil, accountId: nil)
        return p
    }

    func types(_ e: PlayEngine, after count: Int) -> [String] { e.notifications.dropFirst(count).map(\.summary) }

    @Test func aTrialThenMonthlyRenewalsAtEachExpiryWithRenewalOrderIds() throws {
        var e = engine()
        let p = try subscribe(&e, trial: true)
        #expect(p.expiryMs == Self.start + 7 * Self.day && p.inTrial && p.orderBase.wholeMatch(of: /GPA\.\d{4}-\d{4}-\d{4}-\d{5}/) != nil)
        #expect(p.token.count > 100)
        let before = e.notifications.count
        // The trial ends on January 8: paid months start then and on February 8.
        e.advance(toMs: ISOPeriod(months: 1).added(to: Self.start + 7 * Self.day) + Self.day)
        #expect(types(e, after: before) == ["SUBSCRIPTION_RENEWED", "SUBSCRIPTION_RENEWED"])
        let s = e.purchases[p.token]!
        #expect(s.latestOrderId == p.orderBase + "..1" && !s.inTrial)
        #expect(s.expiryMs == ISOPeriod(months: 2).added(to: Self.start + 7 * Self.day))
        #expect(e.orders[p.orderBase + "..0"]?.timeMs == Self.start + 7 * Self.day)
        let json = e.subscriptionV2JSON(s)
        #expect(json["lineItems"]?.arrayValue?.first?["offerPhase"]?["basePrice"] != nil)
    }

    @Test func failedBillingGoesToGraceThenHoldThenRecoversWithoutAGapInGrace() throws {
        var e = engine()
        let p = try subscribe(&e)
        _ = try e.act(.failBilling, token: p.token)
        let renewal = p.expiryMs
        var before = e.notifications.count
        e.advance(toMs: renewal + 1)
        #expect(types(e, after: before) == ["SUBSCRIPTION_IN_GRACE_PERIOD"])
        #expect(e.purchases[p.token]?.subscriptionState == .inGracePeriod)
        before = e.notifications.count
        e.advance(toMs: renewal + 8 * Self.day)
        #expect(types(e, after: before) == ["SUBSCRIPTION_ON_HOLD"] && e.purchases[p.token]?.subscriptionState == .onHold)
        #expect(e.subscriptionV2JSON(e.purchases[p.token]!)["onHoldStateContext"] != nil)
        before = e.notifications.count
        _ = try e.act(.recover, token: p.token)
        #expect(types(e, after: before) == ["SUBSCRIPTION_RECOVERED"])
        let s = e.purchases[p.token]!
        // After the grace the new period starts at the recovery.
        #expect(s.subscriptionState == .active && s.expiryMs == ISOPeriod(months: 1).added(to: renewal + 8 * Self.day) && s.latestOrderId == p.orderBase + "..0")

        // Recovery inside the grace period: no gap, the period starts at the failed renewal.
        var g = engine()
        let q = try subscribe(&g)
        _ = try g.act(.failBilling, token: q.token)
        g.advance(toMs: q.expiryMs + 2 * Self.day)
        _ = try g.act(.recover, token: q.token)
        #expect(g.purchases[q.token]?.expiryMs == ISOPeriod(months: 1).added(to: q.expiryMs))
    }

    @Test func aHoldThatLapsesIsCancelledThenExpiredBySystem() throws {
        var e = engine(graceDays: 3, holdDays: 10)
        let p = try subscribe(&e)
        _ = try e.act(.failBilling, token: p.token)
        let before = e.notifications.count
        e.advance(toMs: p.expiryMs + 14 * Self.day)
        #expect(types(e, after: before) == ["SUBSCRIPTION_IN_GRACE_PERIOD", "SUBSCRIPTION_ON_HOLD", "SUBSCRIPTION_CANCELED", "SUBSCRIPTION_EXPIRED"])
        let json = e.subscriptionV2JSON(e.purchases[p.token]!)
        #expect(json["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED" && json["canceledStateContext"]?["systemInitiatedCancellation"] != nil)
    }

    @Test func aPauseIsScheduledStartsAtTheRenewalAndResumesByItself() throws {
        var e = engine()
        let p = try subscribe(&e)
        var before = e.notifications.count
        _ = try e.act(.pause, token: p.token)
        e.advance(toMs: p.expiryMs + Self.day)
        #expect(types(e, after: before) == ["SUBSCRIPTION_PAUSE_SCHEDULE_CHANGED", "SUBSCRIPTION_PAUSED"])
        let paused = e.subscriptionV2JSON(e.purchases[p.token]!)
        let resume = ISOPeriod(months: 1).added(to: p.expiryMs)
        #expect(paused["subscriptionState"] == "SUBSCRIPTION_STATE_PAUSED" && paused["pausedStateContext"]?["autoResumeTime"]?.stringValue == Timestamp.rfc3339(resume))
        before = e.notifications.count
        e.advance(toMs: resume)
        #expect(types(e, after: before) == ["SUBSCRIPTION_RECOVERED"] && e.purchases[p.token]?.subscriptionState == .active)
        #expect(e.purchases[p.token]?.expiryMs == ISOPeriod(months: 1).added(to: resume))
    }

    @Test func cancelRestoreAndExpiry() throws {
        var e = engine()
        let p = try subscribe(&e)
        let before = e.notifications.count
        _ = try e.act(.cancel, token: p.token)
        _ = try e.act(.enableAutoRenew, token: p.token)
        _ = try e.act(.cancel, token: p.token)
        e.advance(toMs: p.expiryMs)
        #expect(types(e, after: before) == ["SUBSCRIPTION_CANCELED", "SUBSCRIPTION_RESTARTED", "SUBSCRIPTION_CANCELED", "SUBSCRIPTION_EXPIRED"])
        #expect(throws: KakinError.self) { try e.act(.enableAutoRenew, token: p.token) }
    }

    @Test func aPlanChangeMakesANewLinkedTokenAndReplacesTheOld() throws {
        var e = engine()
        let p = try subscribe(&e)
        let newToken = try e.act(.changePlan, token: p.token, basePlanId: "yearly", replacementMode: .chargeFullPrice)
        #expect(newToken != p.token)
        let new = e.subscriptionV2JSON(e.purchases[newToken]!)
        #expect(new["linkedPurchaseToken"]?.stringValue == p.token)
        let item = new["lineItems"]?.arrayValue?.first
        #expect(item?["offerDetails"]?["basePlanId"] == "yearly" && item?["itemReplacement"]?["basePlanId"] == "monthly")
        #expect(item?["itemReplacement"]?["replacementMode"] == "CHARGE_FULL_PRICE")
        #expect(e.purchases[newToken]?.expiryMs == ISOPeriod(years: 1).added(to: Self.start))
        let old = e.subscriptionV2JSON(e.purchases[p.token]!)
        #expect(old["subscriptionState"] == "SUBSCRIPTION_STATE_EXPIRED" && old["canceledStateContext"]?["replacementCancellation"] != nil)
        #expect(e.notifications.last?.summary == "SUBSCRIPTION_PURCHASED" && e.notifications.last?.purchaseToken == newToken)
        // The new token needs its own acknowledgement before another change.
        #expect(throws: KakinError.self) { try e.act(.changePlan, token: newToken, basePlanId: "monthly") }
    }

    @Test func aPurchaseNeverAcknowledgedIsRefundedAfterThreeDaysWithReason8() throws {
        var e = engine()
        let coins = try e.purchase(.init(productId: "coins_500", accountId: "u1"))
        let sub = try e.purchase(.init(productId: "premium", accountId: "u2"))
        e.advance(toMs: Self.start + 3 * Self.day - 1)
        #expect(e.voided.isEmpty)
        e.advance(toMs: Self.start + 3 * Self.day)
        #expect(Set(e.voided.map(\.token)) == [coins.token, sub.token] && e.voided.allSatisfy { $0.reason == 8 && $0.source == 2 })
        #expect(e.productPurchaseJSON(e.purchases[coins.token]!)["purchaseState"] == 1)
        #expect(e.purchases[sub.token]?.subscriptionState == .expired)
        #expect(e.notifications.map(\.summary).filter { $0 != "SUBSCRIPTION_PURCHASED" && $0 != "ONE_TIME_PRODUCT_PURCHASED" }
                == ["VOIDED_PURCHASE", "SUBSCRIPTION_REVOKED", "VOIDED_PURCHASE"])
        let listed = try e.voidedPurchases(packageName: "dev.kakin.demo", startMs: nil, endMs: nil, maxResults: nil, pageToken: nil, type: 1, includePartial: false)
        #expect(listed["voidedPurchases"]?.arrayValue?.compactMap { $0["voidedReason"]?.intValue } == [8, 8])
        // Acknowledged in time: kept.
        var kept = engine()
        let ok = try kept.purchase(.init(productId: "noads", accountId: "u3"))
        try kept.acknowledge(ok.token, packageName: "dev.kakin.demo", productId: "noads", subscription: false, developerPayload: nil, accountId: nil)
        kept.advance(toMs: Self.start + 10 * Self.day)
        #expect(kept.voided.isEmpty)
    }

    @Test func aTokenAnswers410SixtyDaysAfterItEnded() throws {
        var e = engine()
        let p = try subscribe(&e)
        _ = try e.act(.cancel, token: p.token)
        e.advance(toMs: p.expiryMs + 60 * Self.day)
        #expect(throws: Never.self) { try e.subscription(p.token, packageName: "dev.kakin.demo") }
        e.advance(toMs: p.expiryMs + 60 * Self.day + 1)
        #expect(throws: PlayAPIError.noLongerValid) { try e.subscription(p.token, packageName: "dev.kakin.demo") }
    }

    @Test func quantityPurchasesAreRefundedInPart() throws {
        var e = engine()
        let p = try e.purchase(.init(productId: "coins_1200", accountId: "u1", quantity: 5))
        try e.refundOrder(p.orderBase, quantity: 2, revoke: true, source: 0)
        #expect(e.purchases[p.token]?.refundableQuantity == 3 && e.voided.last?.quantity == 2)
        let partialHidden = try e.voidedPurchases(packageName: "dev.kakin.demo", startMs: nil, endMs: nil, maxResults: nil, pageToken: nil, type: 0, includePartial: false)
        #expect(partialHidden["voidedPurchases"]?.arrayValue?.isEmpty == true)
        let v2 = e.productPurchaseV2JSON(e.purchases[p.token]!)
        #expect(v2["productLineItem"]?.arrayValue?.first?["productOfferDetails"]?["refundableQuantity"] == 3)
        #expect(throws: KakinError.self) { try e.refundOrder(p.orderBase, quantity: 4, revoke: true, source: 0) }
    }

    @Test func refusedPushesAreRetriedWithBackoffAndEachAttemptRecorded() throws {
        var e = engine()
        _ = try e.purchase(.init(productId: "noads"))
        var attempts: [Int64] = []
        for _ in 0..<4 {
            guard let due = e.nextDeliveryDueMs() else { break }
            e.advance(toMs: due)
            let batch = e.takeDueDeliveries()
            #expect(batch.count == 1)
            attempts.append(e.nowMs)
            e.recordAttempt(messageId: batch[0].messageId, status: 503)
        }
        #expect(zip(attempts.dropFirst(), attempts).map { $0 - $1 } == [10_000, 20_000, 40_000])
        let due = try #require(e.nextDeliveryDueMs())
        e.advance(toMs: due)
        e.recordAttempt(messageId: e.takeDueDeliveries()[0].messageId, status: 204)
        #expect(e.notifications[0].delivered && e.notifications[0].attempts.count == 5 && e.nextDeliveryDueMs() == nil)
    }

    @Test func theStateFileKeepsEverything() throws {
        var e = engine()
        let p = try subscribe(&e, trial: true)
        e.advance(toMs: Self.start + 40 * Self.day)
        let keys = try PlayKeys.generate(seed: 1)
        let loaded = try PlayStateFile.decode(PlayStateFile(engine: e, keys: keys).encoded())
        #expect(loaded.engine.purchases == e.purchases && loaded.engine.nowMs == e.nowMs && loaded.engine.notifications == e.notifications)
        #expect(loaded.keys.serviceAccountKeyId == keys.serviceAccountKeyId && loaded.engine.purchases[p.token] != nil)
        var a = loaded.engine, b = e
        #expect(a.purchaseToken() == b.purchaseToken())
    }
}

