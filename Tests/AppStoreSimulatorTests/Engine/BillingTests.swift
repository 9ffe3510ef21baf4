@testable import AppStoreSimulator
import KakinCore
import Testing

/// Billing failure → retry (60 days) with an optional grace period → recovery or expiry (reference §7).
@Suite struct BillingRetry {
    /// Buys B (no intro) at `startMs`; its first renewal is due at R = start + 1 month.
    func subscribed(graceDays: Int?) throws -> (SimulatorState, String, Int64) {
        var s = makeState(graceDays: graceDays)
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.failBilling(otid)
        return (s, otid, plus("P1M", startMs))
    }

    @Test func withoutGraceAFailedRenewalEntersBillingRetryThenExpiresAfterSixtyDays() throws {
        var (s, otid, r) = try subscribed(graceDays: nil)
        let failed = s.advance(toMs: r)
        #expect(s.kinds(failed) == ["DID_FAIL_TO_RENEW"])
        #expect(s.notes(failed)[0]["data"]?["status"] == 3)
        #expect(s.renewal(otid)["isInBillingRetryPeriod"] == true)
        #expect(s.renewal(otid)["gracePeriodExpiresDate"] == nil)
        #expect(s.renewal(otid)["renewalDate"] == .int(r))
        #expect(s.advance(toMs: r + 60 * .day - 1).isEmpty)
        let expired = s.advance(toMs: r + 60 * .day)
        #expect(s.kinds(expired) == ["EXPIRED/BILLING_RETRY"])
        #expect(s.renewal(otid)["expirationIntent"] == 2)
        #expect(s.renewal(otid)["isInBillingRetryPeriod"] == false)
        #expect(s.status(of: s.store.subscriptions[otid]!) == 2)
    }

    @Test func recoveryDuringGraceRenewsWithNoGapFromTheFailedRenewalDate() throws {
        var (s, otid, r) = try subscribed(graceDays: 16)
        let failed = s.advance(toMs: r)
        #expect(s.kinds(failed) == ["DID_FAIL_TO_RENEW/GRACE_PERIOD"])
        #expect(s.notes(failed)[0]["data"]?["status"] == 4)
        #expect(s.renewal(otid)["gracePeriodExpiresDate"] == .int(r + 16 * .day))
        #expect(s.renewal(otid)["isInBillingRetryPeriod"] == true)
        _ = s.advance(toMs: r + 5 * .day)
        let recovered = try s.recoverBilling(otid)
        #expect(s.kinds(recovered.notificationUUIDs) == ["DID_RENEW/BILLING_RECOVERY"])
        let t = s.tx(recovered.transactionId)
        #expect(t["purchaseDate"] == .int(r))
        #expect(t["expiresDate"] == .int(plus("P1M", r)))
        #expect(t["transactionReason"] == "RENEWAL")
        #expect(s.renewal(otid)["isInBillingRetryPeriod"] == false)
        #expect(s.renewal(otid)["gracePeriodExpiresDate"] == nil)
        #expect(s.status(of: s.store.subscriptions[otid]!) == 1)
    }

    @Test func graceEndsWithGracePeriodExpiredAndLaterRecoveryStartsANewPeriodThen() throws {
        var (s, otid, r) = try subscribed(graceDays: 3)
        _ = s.advance(toMs: r)
        let graceOver = s.advance(toMs: r + 3 * .day)
        #expect(s.kinds(graceOver) == ["GRACE_PERIOD_EXPIRED"])
        #expect(s.notes(graceOver)[0]["data"]?["status"] == 3)
        #expect(s.renewal(otid)["gracePeriodExpiresDate"] == nil)
        _ = s.advance(toMs: r + 10 * .day)
        let recovered = try s.recoverBilling(otid)
        #expect(s.kinds(recovered.notificationUUIDs) == ["DID_RENEW/BILLING_RECOVERY"])
        #expect(s.tx(recovered.transactionId)["purchaseDate"] == .int(r + 10 * .day))
        #expect(s.tx(recovered.transactionId)["expiresDate"] == .int(plus("P1M", r + 10 * .day)))
        // The next renewal follows the new period.
        let next = s.advance(toMs: plus("P1M", r + 10 * .day))
        #expect(s.kinds(next) == ["DID_RENEW"])
    }

    @Test func graceThenNoPaymentExpiresSixtyDaysAfterTheFailedRenewal() throws {
        var (s, otid, r) = try subscribed(graceDays: 28)
        let all = s.advance(toMs: r + 61 * .day)
        #expect(s.kinds(all) == ["DID_FAIL_TO_RENEW/GRACE_PERIOD", "GRACE_PERIOD_EXPIRED", "EXPIRED/BILLING_RETRY"])
        #expect(s.notes(all).map { $0["signedDate"] } == [.int(r), .int(r + 28 * .day), .int(r + 60 * .day)])
        #expect(s.renewal(otid)["expirationIntent"] == 2)
    }

    @Test func turningAutoRenewOffDuringRetryEndsTheSubscription() throws {
        var (s, otid, r) = try subscribed(graceDays: nil)
        _ = s.advance(toMs: r + .day)
        let off = try s.setAutoRenew(otid, enabled: false)
        #expect(s.kinds(off.notificationUUIDs) == ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED", "EXPIRED/VOLUNTARY"])
    }

    @Test func recoverBillingBeforeTheRenewalClearsTheFailureSilently() throws {
        var (s, otid, r) = try subscribed(graceDays: nil)
        let cleared = try s.recoverBilling(otid)
        #expect(cleared.kind == .billingFailureCleared)
        #expect(cleared.notificationUUIDs.isEmpty)
        let renewed = s.advance(toMs: r)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
        #expect(throws: KakinError.self) { try s.recoverBilling(otid) }
    }

    @Test func planChangesWaitUntilBillingIsRecovered() throws {
        var (s, otid, r) = try subscribed(graceDays: nil)
        _ = s.advance(toMs: r)
        #expect(throws: KakinError.self) { try s.changeProduct(otid, to: "P") }
        #expect(throws: KakinError.self) { try s.failBilling(otid) }
    }
}

@Suite struct PriceAndAvailability {
    @Test func priceIncreaseWithoutConsentExpiresAtRenewal() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        let pending = try s.announcePriceIncrease(otid, newPriceMilli: 5_990, consentRequired: true)
        #expect(s.kinds(pending.notificationUUIDs) == ["PRICE_INCREASE/PENDING"])
        #expect(s.renewal(otid)["priceIncreaseStatus"] == 0)
        #expect(s.renewal(otid)["renewalPrice"] == 5_990)
        let out = s.advance(by: 40 * .day)
        #expect(s.kinds(out) == ["EXPIRED/PRICE_INCREASE"])
        #expect(s.renewal(otid)["expirationIntent"] == 3)
    }

    @Test func acceptedPriceIncreaseRenewsAtTheNewPrice() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.announcePriceIncrease(otid, newPriceMilli: 5_990, consentRequired: true)
        let accepted = try s.acceptPriceIncrease(otid)
        #expect(s.kinds(accepted.notificationUUIDs) == ["PRICE_INCREASE/ACCEPTED"])
        #expect(s.renewal(otid)["priceIncreaseStatus"] == 1)
        _ = s.advance(by: 65 * .day)
        #expect(s.chain(otid).map { $0["price"] } == [4_990, 5_990, 5_990])
        #expect(s.renewal(otid)["priceIncreaseStatus"] == nil)
    }

    @Test func productRemovedFromSaleExpiresAtRenewal() throws {
        var s = makeState()
        let otid = try s.buy("B").originalTransactionId!
        _ = try s.removeFromSale(otid)
        let out = s.advance(by: 40 * .day)
        #expect(s.kinds(out).last == "EXPIRED/PRODUCT_NOT_FOR_SALE")
        #expect(s.renewal(otid)["expirationIntent"] == 4)
    }
}
