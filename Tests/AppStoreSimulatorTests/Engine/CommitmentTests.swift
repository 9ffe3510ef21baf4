@testable import AppStoreSimulator
import KakinCore
import Testing

/// A yearly subscription billed monthly with a 12-month commitment: charged every month, a cancellation
/// taking effect at the commitment's end, and a new commitment when not cancelled.
@Suite struct CommitmentTests {
    static func catalog() -> Catalog {
        var c = offersCatalog()
        var y = c["Y"]!
        y.monthlyBillingWithCommitment = true
        y.monthlyCommitmentPriceMilli = 4_490
        c.upsert(y)
        return c
    }

    static func monthly(_ s: inout SimulatorState) throws -> String {
        var request = PurchaseRequest(productId: "Y", appAccountToken: tokenA)
        request.billingPlanType = .monthly
        return try s.purchase(request).originalTransactionId!
    }

    static let end = plus("P1Y", startMs)

    @Test func monthlyPlanChargesEveryMonthWithItsCommitmentInfo() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try Self.monthly(&s)
        let first = s.latestTx(otid)
        #expect(first["billingPlanType"] == "MONTHLY")
        #expect(first["price"] == 4_490)
        #expect(first["expiresDate"] == .int(plus("P1M", startMs)))
        #expect(first["commitmentInfo"] == ["billingPeriodNumber": 1, "commitmentExpiresDate": .int(Self.end), "commitmentPrice": 53_880,
                                            "totalBillingPeriods": 12])
        #expect(first["offerType"] == nil, "no introductory offer on the commitment")
        #expect(s.allKinds == ["SUBSCRIBED/INITIAL_BUY"])
        let renewal = s.renewal(otid)
        #expect(renewal["renewalBillingPlanType"] == "MONTHLY")
        #expect(renewal["renewalPrice"] == 4_490)
        #expect(renewal["commitmentInfo"] == ["commitmentAutoRenewProductId": "Y", "commitmentAutoRenewStatus": 1,
                                              "commitmentRenewalBillingPlanType": "MONTHLY", "commitmentRenewalDate": .int(Self.end),
                                              "commitmentRenewalPrice": 53_880])

        let year = s.advance(toMs: Self.end - 1)
        #expect(s.kinds(year) == Array(repeating: "DID_RENEW", count: 11))
        let chain = s.chain(otid)
        #expect(chain.count == 12)
        for (i, t) in chain.enumerated() {
            #expect(t["commitmentInfo"]?["billingPeriodNumber"] == .int(Int64(i + 1)))
            #expect(t["purchaseDate"] == .int(plus("P\(i)M", startMs)))
            #expect(t["expiresDate"] == .int(plus("P\(i + 1)M", startMs)))
            #expect(t["price"] == 4_490)
        }
        // Not cancelled: the commitment renews for another 12 months, month 1 again.
        let renewed = s.advance(toMs: Self.end)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
        #expect(s.latestTx(otid)["commitmentInfo"]?["billingPeriodNumber"] == 1)
        #expect(s.latestTx(otid)["commitmentInfo"]?["commitmentExpiresDate"] == .int(plus("P1Y", Self.end)))
    }

    /// Cancelled in month 4: every month to 12 is still billed and served; then EXPIRED/VOLUNTARY.
    @Test func cancellationInMonthFourTakesEffectAtTheCommitmentsEnd() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try Self.monthly(&s)
        _ = s.advance(toMs: plus("P3M", startMs) + 5 * .day)
        #expect(s.latestTx(otid)["commitmentInfo"]?["billingPeriodNumber"] == 4)
        let cancel = try s.setAutoRenew(otid, enabled: false)
        #expect(s.kinds(cancel.notificationUUIDs) == ["DID_CHANGE_RENEWAL_STATUS/AUTO_RENEW_DISABLED"])
        #expect(cancel.effectiveDateMs == Self.end)
        #expect(s.renewal(otid)["autoRenewStatus"] == 1, "month 5 is still billed")
        #expect(s.renewal(otid)["commitmentInfo"]?["commitmentAutoRenewStatus"] == 0)
        #expect(throws: KakinError.self) { _ = try s.setAutoRenew(otid, enabled: false) }

        let rest = s.advance(toMs: Self.end - 1)
        #expect(s.kinds(rest) == Array(repeating: "DID_RENEW", count: 8))
        #expect(s.latestTx(otid)["commitmentInfo"]?["billingPeriodNumber"] == 12)
        #expect(s.renewal(otid)["autoRenewStatus"] == 0, "nothing is billed after month 12")
        #expect(s.status(of: s.store.subscriptions[otid]!) == 1)
        let ended = s.advance(toMs: Self.end)
        #expect(s.kinds(ended) == ["EXPIRED/VOLUNTARY"])
        #expect(s.status(of: s.store.subscriptions[otid]!) == 2)
        #expect(s.renewal(otid)["expirationIntent"] == 1)
    }

    @Test func reEnablingBeforeTheEndRenewsTheCommitment() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try Self.monthly(&s)
        _ = s.advance(toMs: plus("P11M", startMs) + .day)
        _ = try s.setAutoRenew(otid, enabled: false)
        #expect(s.renewal(otid)["autoRenewStatus"] == 0)
        _ = try s.setAutoRenew(otid, enabled: true)
        #expect(s.renewal(otid)["autoRenewStatus"] == 1)
        let renewed = s.advance(toMs: Self.end)
        #expect(s.kinds(renewed) == ["DID_RENEW"])
    }

    @Test func onlyAnUpgradeChangesTheProductMidCommitment() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try Self.monthly(&s)
        _ = s.advance(toMs: startMs + 40 * .day)
        // Crossgrade to a same-level product: waits for the commitment's end (not the month's).
        let scheduled = try s.changeProduct(otid, to: "A")
        #expect(scheduled.kind == .scheduled)
        #expect(scheduled.effectiveDateMs == Self.end)
        let months = s.advance(toMs: plus("P3M", startMs))
        #expect(s.kinds(months) == ["DID_RENEW", "DID_RENEW"])
        #expect(s.latestTx(otid)["productId"] == "Y")
        // Upgrade: now, and the commitment is over.
        let up = try s.changeProduct(otid, to: "P")
        #expect(up.kind == .upgraded)
        #expect(s.latestTx(otid)["commitmentInfo"] == nil && s.latestTx(otid)["billingPlanType"] == nil)
        #expect(s.renewal(otid)["commitmentInfo"] == nil)
    }

    @Test func refusedPlansChangeNothing() throws {
        var s = makeState(catalog: Self.catalog())
        var monthlyOfA = PurchaseRequest(productId: "A", appAccountToken: tokenA)
        monthlyOfA.billingPlanType = .monthly
        #expect(throws: KakinError.self) { _ = try s.purchase(monthlyOfA) }
        var withOffer = PurchaseRequest(productId: "Y", appAccountToken: tokenA, offer: .introductory)
        withOffer.billingPlanType = .monthly
        #expect(throws: KakinError.self) { _ = try s.purchase(withOffer) }
        #expect(s.store.transactions.isEmpty)
        // Upfront: the usual yearly period, marked BILLED_UPFRONT.
        var upfront = PurchaseRequest(productId: "Y", appAccountToken: tokenA)
        upfront.billingPlanType = .billedUpfront
        let otid = try s.purchase(upfront).originalTransactionId!
        #expect(s.latestTx(otid)["billingPlanType"] == "BILLED_UPFRONT")
        #expect(s.latestTx(otid)["expiresDate"] == .int(Self.end))
        #expect(s.latestTx(otid)["commitmentInfo"] == nil)
        #expect(s.renewal(otid)["renewalBillingPlanType"] == "BILLED_UPFRONT")
    }

    @Test func stateFileKeepsTheCommitment() throws {
        var s = makeState(catalog: Self.catalog())
        let otid = try Self.monthly(&s)
        let encoded = try JSONEncoderForTests.roundTrip(s.store)
        #expect(encoded.subscriptions[otid]?.commitment == s.store.subscriptions[otid]?.commitment)
        #expect(encoded.transactions[otid]?.commitmentBillingPeriod == 1)
    }
}

import Foundation

enum JSONEncoderForTests {
    static func roundTrip(_ store: SimulatorStore) throws -> SimulatorStore {
        try JSONDecoder().decode(SimulatorStore.self, from: try JSONEncoder().encode(store))
    }
}
