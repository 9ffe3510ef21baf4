import KakinCore
import Testing

/// A yearly subscription billed monthly with a 12-month commitment: the status carries `commitment`, a
/// cancellation takes effect at the commitment's end, and (beside the order-independence property of
/// `StatusOrderIndependenceTests`) nothing about it depends on the order copies arrived in.
@Suite struct StatusCommitmentTests {
    typealias F = StatusFixtures
    static let monthlyCharge: Int64 = 880_000
    static let commitmentPrice: Int64 = 12 * monthlyCharge

    /// Start of month `k` (1-based) of a commitment that started at `start`.
    static func monthStart(_ k: Int, from start: Int64 = F.t0) -> Int64 { ISOPeriod(months: k - 1).added(to: start) }

    /// The transaction paying month `k` of the commitment that started at `start` (its id `base + k`).
    static func month(_ k: Int, start: Int64 = F.t0, original: String = "5000", base: Int = 5000, signed: Int64? = nil,
                      revoked: Int64? = nil) -> TransactionPayload {
        let end = ISOPeriod(years: 1).added(to: start)
        let t = F.transaction(k == 1 && start == F.t0 ? original : String(base + k), original: original, product: "premium.yearly",
                              purchase: monthStart(k, from: start), expires: monthStart(k + 1, from: start), signed: signed, revoked: revoked,
                              price: monthlyCharge)
        var o = t.raw.objectValue!
        o["billingPlanType"] = "MONTHLY"
        o["commitmentInfo"] = ["billingPeriodNumber": .int(Int64(k)), "commitmentExpiresDate": .int(end),
                               "commitmentPrice": .int(commitmentPrice), "totalBillingPeriods": 12]
        return try! TransactionPayload(json: .object(o))
    }

    /// Renewal info: `autoRenew` for the next month, `commitmentRenews` for the next commitment.
    static func renewal(signed: Int64, autoRenew: Int = 1, commitmentRenews: Int = 1, intent: Int? = nil, start: Int64 = F.t0,
                        original: String = "5000") -> RenewalInfoPayload {
        let r = F.renewal(original, product: "premium.yearly", autoRenew: autoRenew, intent: intent, signed: signed)
        var o = r.raw.objectValue!
        o["renewalBillingPlanType"] = "MONTHLY"
        o["commitmentInfo"] = ["commitmentAutoRenewProductId": "premium.yearly", "commitmentAutoRenewStatus": .int(Int64(commitmentRenews)),
                               "commitmentRenewalBillingPlanType": "MONTHLY", "commitmentRenewalDate": .int(ISOPeriod(years: 1).added(to: start)),
                               "commitmentRenewalPrice": .int(commitmentPrice)]
        return try! RenewalInfoPayload(json: .object(o))
    }

    static func evaluate(_ t: [TransactionPayload], _ r: [RenewalInfoPayload], at now: Int64) -> CustomerStatus {
        StatusEngine.evaluate(CustomerHistory(transactions: t, renewalInfos: r), catalog: F.catalog, nowMs: now)
    }

    static let commitmentEnd = ISOPeriod(years: 1).added(to: F.t0)

    /// Cancelled in month 4: subscribed every month to the commitment's end, then expired. What the status
    /// says at each step is what `GET /v1/customers/{id}` answers.
    @Test func cancelledInMonthFourStaysActiveUntilMonthTwelveThenExpires() throws {
        let cancelledAt = Self.monthStart(4) + 3 * F.dayMs
        var renewals = [Self.renewal(signed: cancelledAt, autoRenew: 1, commitmentRenews: 0)]
        for k in 1...12 {
            let months = (1...k).map { Self.month($0) }
            if k == 12 { renewals.append(Self.renewal(signed: Self.monthStart(12), autoRenew: 0, commitmentRenews: 0)) }
            let now = Self.monthStart(k) + 5 * F.dayMs
            let status = Self.evaluate(months, k >= 4 ? renewals : [Self.renewal(signed: F.t0)], at: now)
            let sub = try #require(status.subscriptions.first)
            #expect(sub.state == .subscribed, "month \(k)")
            #expect(status.status == .active)
            #expect(sub.expiresAtMs == Self.monthStart(k + 1))
            #expect(sub.willAutoRenew == (k < 12), "month \(k): the next month is billed")
            let c = try #require(sub.commitment)
            #expect(c == StatusCommitment(billingPeriod: k, totalBillingPeriods: 12, endsAtMs: Self.commitmentEnd, priceMilli: Self.commitmentPrice,
                                          willRenew: k < 4))
            #expect(sub.json["commitment"] == ["billingPeriod": .int(Int64(k)), "totalBillingPeriods": 12,
                                               "endsAt": Timestamp.rfc3339(Self.commitmentEnd), "price": .int(Self.commitmentPrice),
                                               "willRenew": .bool(k < 4)])
            #expect(status.notices.contains { $0.kind == .cancellationAtCommitmentEnd } == (k < 12))
        }
        // The commitment's end: EXPIRED/VOLUNTARY's renewal info, and the status says expired, voluntary.
        let all = (1...12).map { Self.month($0) }
        renewals.append(Self.renewal(signed: Self.commitmentEnd, autoRenew: 0, commitmentRenews: 0, intent: 1))
        let after = Self.evaluate(all, renewals, at: Self.commitmentEnd + F.dayMs)
        #expect(after.subscriptions.first?.state == .expired)
        #expect(after.subscriptions.first?.expirationReason == .voluntary)
        #expect(after.subscriptions.first?.commitment?.willRenew == false)
        #expect(after.status == .inactive)
    }

    /// A month's DID_RENEW is late: the customer owes that month, so the subscription stays subscribed.
    @Test func aLateMonthlyRenewalDoesNotInterruptTheCommitment() {
        let months = (1...5).map { Self.month($0) }
        let cancelled = Self.renewal(signed: Self.monthStart(2), autoRenew: 0, commitmentRenews: 0)  // even if Apple turned auto-renew off
        let status = Self.evaluate(months, [cancelled], at: Self.monthStart(6) + 2 * F.dayMs)
        #expect(status.subscriptions.first?.state == .subscribed)
        #expect(status.subscriptions.first?.willAutoRenew == true)
        // Billing retry reported for month 6 wins: the month wasn't paid.
        let retry = F.renewal("5000", product: "premium.yearly", retry: true, signed: Self.monthStart(6) + F.dayMs)
        #expect(Self.evaluate(months, [retry], at: Self.monthStart(6) + 2 * F.dayMs).subscriptions.first?.state == .inBillingRetryPeriod)
        // A refund ends it at once, commitment or not.
        let refunded = Array(months.dropLast()) + [Self.month(5, signed: Self.monthStart(5) + F.dayMs, revoked: Self.monthStart(5) + F.dayMs)]
        #expect(Self.evaluate(refunded, [], at: Self.monthStart(5) + 2 * F.dayMs).subscriptions.first?.state == .revoked)
    }

    @Test func aRenewedCommitmentStartsAgainAtMonthOne() throws {
        let next = Self.month(1, start: Self.commitmentEnd, base: 6000)
        let all = (1...12).map { Self.month($0) } + [next]
        let status = Self.evaluate(all, [Self.renewal(signed: Self.commitmentEnd, start: Self.commitmentEnd)], at: Self.commitmentEnd + F.dayMs)
        let c = try #require(status.subscriptions.first?.commitment)
        #expect(c.billingPeriod == 1)
        #expect(c.endsAtMs == ISOPeriod(years: 1).added(to: Self.commitmentEnd))
        #expect(c.willRenew)
    }

    @Test func upfrontYearlyHasNoCommitmentAndOnlyCommitmentsBindChanges() {
        let upfront = F.transaction("1", product: "premium.yearly", purchase: F.t0, expires: Self.commitmentEnd, price: 9_800_000)
        let status = Self.evaluate([upfront], [], at: F.t0 + F.dayMs)
        #expect(status.subscriptions.first?.commitment == nil)
        #expect(status.subscriptions.first?.json["commitment"] == nil, "only a commitment carries the key")
        #expect(!status.notices.contains { $0.kind == .cancellationAtCommitmentEnd })
        // Committed: the upgrade to premium.plus.monthly is still immediate.
        let committed = Self.evaluate([Self.month(1)], [], at: F.t0 + F.dayMs)
        #expect(committed.notices.first { $0.kind == .immediateChangeRefundsProrated }?.productIds == ["premium.plus.monthly"])
    }

    // MARK: Properties

    /// Random commitments: cancelled in a random month (or never), any prefix of months delivered (late
    /// notifications), random copies of renewal info, sometimes a refund; evaluated at random times.
    static func randomCommitment(_ rng: inout SeededRandom) -> (CustomerHistory, cancelMonth: Int?, delivered: Int, refundedAt: Int64?) {
        let cancelMonth: Int? = Bool.random(using: &rng) ? Int.random(in: 1...12, using: &rng) : nil
        let delivered = Int.random(in: 1...12, using: &rng)
        var transactions = (1...delivered).map { Self.month($0) }
        var refundedAt: Int64?
        if Int.random(in: 0..<8, using: &rng) == 0 {
            let k = Int.random(in: 1...delivered, using: &rng)
            refundedAt = Self.monthStart(k) + F.dayMs
            transactions.append(Self.month(k, signed: refundedAt, revoked: refundedAt))
        }
        var renewals = [Self.renewal(signed: F.t0)]
        if let cancelMonth {
            renewals.append(Self.renewal(signed: Self.monthStart(cancelMonth) + F.dayMs, autoRenew: cancelMonth == 12 ? 0 : 1, commitmentRenews: 0))
        }
        return (CustomerHistory(transactions: transactions, renewalInfos: renewals), cancelMonth, delivered, refundedAt)
    }

    /// Cancelled or not, a commitment gives service until its end unless refunded; a cancelled one ends there.
    @Test func aCommitmentIsHonouredToItsEndAndNoLonger() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_2026)
        var sawActive = 0, sawEnded = 0
        for _ in 0..<1_000 {
            let (history, cancelMonth, delivered, refundedAt) = Self.randomCommitment(&rng)
            let now = F.t0 + Int64.random(in: 0...(500 * F.dayMs), using: &rng)
            let status = StatusEngine.evaluate(history, catalog: F.catalog, nowMs: now)
            guard let sub = status.subscriptions.first else { Issue.record("no subscription"); return }
            if refundedAt != nil { continue }  // a refund's own rules (revoked) apply; the order property covers them
            if now < Self.commitmentEnd {
                #expect(sub.state == .subscribed, "within the commitment (cancel \(String(describing: cancelMonth)), \(delivered) months seen)")
                sawActive += 1
            } else if cancelMonth != nil {
                #expect(!sub.state.isEntitled, "a cancelled commitment ends at its end")
                sawEnded += 1
            }
            #expect(sub.commitment?.willRenew == (cancelMonth == nil && sub.state.isRenewable))
        }
        #expect(sawActive > 100 && sawEnded > 50)
    }

    @Test func arrivalOrderNeverChangesACommitmentStatus() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_2027)
        for _ in 0..<500 {
            var (history, _, _, _) = Self.randomCommitment(&rng)
            // Mixed with the other property's random customers.
            let other = StatusOrderIndependenceTests.randomHistory(&rng)
            history.transactions += other.transactions
            history.renewalInfos += other.renewalInfos
            let now = F.t0 + Int64.random(in: 0...(450 * F.dayMs), using: &rng)
            let expected = StatusEngine.evaluate(history, catalog: F.catalog, nowMs: now)
            for _ in 0..<3 {
                let again = StatusEngine.evaluate(StatusOrderIndependenceTests.rearranged(history, &rng), catalog: F.catalog, nowMs: now)
                guard again == expected else {
                    Issue.record("order changed a commitment's status at \(now)")
                    return
                }
            }
            // The bounded selection the store keeps reads the same status as the whole history.
            let selected = StatusInputs.select(history.deduplicated().transactions)
            let subset = CustomerHistory(transactions: history.deduplicated().transactions.filter { selected.contains($0.transactionId) },
                                         renewalInfos: history.renewalInfos)
            if !StatusInputs.needsWholeHistory(subset.transactions) {
                #expect(StatusEngine.evaluate(subset, catalog: F.catalog, nowMs: now) == expected)
            }
        }
    }
}
