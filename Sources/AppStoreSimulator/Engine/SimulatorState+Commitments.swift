import KakinCore

/// A yearly subscription billed monthly with a 12-month commitment (App Store Server API 1.21; StoreKit's
/// `.billingPlanType(.monthly)` purchase option). The customer pays every month and is bound for 12 of them:
/// a cancellation (`disableAutoRenew`) turns off the commitment's renewal, the months left are still billed
/// and served, and the subscription ends at the commitment's end; not cancelled, a new 12-month commitment
/// starts there. (Apple: "Customers can cancel at any time, but the subscription remains active through
/// the end of the commitment term. If the customer reaches the 13th month, the commitment renews
/// automatically for another 12 months.")
///
/// How the renewal info says it (Kakin's reading of Apple's fields): `autoRenewStatus` speaks of the next
/// monthly payment — on for every month but the last of a cancelled commitment; `commitmentInfo.
/// commitmentAutoRenewStatus` speaks of the next commitment — off once cancelled.
struct SimCommitment: Codable, Sendable, Equatable {
    var startMs: Int64
    var endMs: Int64
    /// 1…12: the month the latest transaction pays.
    var billingPeriod: Int
    var monthlyPriceMilli: Int64
    /// `commitmentAutoRenewStatus`: a new commitment starts at `endMs`.
    var renews: Bool

    static let totalBillingPeriods = 12

    init(startMs: Int64, monthlyPriceMilli: Int64, renews: Bool = true) {
        self.startMs = startMs
        endMs = ISOPeriod(years: 1).added(to: startMs)
        billingPeriod = 1
        self.monthlyPriceMilli = monthlyPriceMilli
        self.renews = renews
    }

    var priceMilli: Int64 { monthlyPriceMilli * Int64(Self.totalBillingPeriods) }
    var isLastMonth: Bool { billingPeriod >= Self.totalBillingPeriods }

    /// End of month `k`, anchored at the commitment's start (Jan 31 → Feb 28 → Mar 31, never drifting).
    func endOfMonth(_ k: Int) -> Int64 { ISOPeriod(months: k).added(to: startMs) }

    /// The transaction's `commitmentInfo`.
    var transactionInfo: TransactionCommitmentInfo {
        TransactionCommitmentInfo(billingPeriodNumber: billingPeriod, commitmentExpiresDate: endMs, commitmentPrice: priceMilli,
                                  totalBillingPeriods: Self.totalBillingPeriods)
    }
}

extension SimulatorState {
    /// A purchase's billing plan checked against the product (`monthlyBillingWithCommitment`); nil for a
    /// product sold one way only.
    func checkBillingPlan(_ plan: BillingPlanType?, product: Product, offer: OfferChoice?) throws(KakinError) -> BillingPlanType? {
        guard let plan else { return product.monthlyBillingWithCommitment ? .billedUpfront : nil }
        guard BillingPlanType.known.contains(plan) else {
            throw KakinError(.invalidField, "billingPlanType must be BILLED_UPFRONT or MONTHLY.")
        }
        guard product.kind == .autoRenewable else { throw KakinError(.invalidField, "billingPlanType applies to auto-renewable subscriptions only.") }
        if plan == .monthly {
            guard product.monthlyBillingWithCommitment, product.monthlyCommitmentCharge != nil else {
                throw KakinError(.simulatorNotEligible, "\(product.productId) is not sold billed monthly with a 12-month commitment (catalog monthlyBillingWithCommitment).")
            }
            guard offer == nil else {
                throw KakinError(.invalidField, "The simulator sells the monthly billing with a 12-month commitment without offers.")
            }
        }
        return plan
    }

    /// Whether the instance is inside a commitment with months still owed after the current one.
    func isCommittedMidTerm(_ sub: SimSubscription) -> Bool {
        guard let c = sub.commitment else { return false }
        return !c.isLastMonth
    }

    /// `disableAutoRenew`/`enableAutoRenew` on a commitment: the commitment's renewal switches, the months
    /// already committed stay billed (auto-renew of the next month is off only in the last month).
    mutating func setCommitmentRenewal(_ otid: String, enabled: Bool) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard var c = sub.commitment else { preconditionFailure("only for a commitment") }
        guard c.renews != enabled else {
            throw KakinError(.simulatorInvalidAction, "The commitment's renewal is already \(enabled ? "on" : "off").")
        }
        let seq = store.notificationSeq
        c.renews = enabled
        sub.commitment = c
        sub.autoRenewStatus = enabled || !c.isLastMonth
        store.subscriptions[otid] = sub
        emit(.didChangeRenewalStatus, enabled ? .autoRenewEnabled : .autoRenewDisabled, transactionId: sub.latestTransactionId, subscription: otid)
        // A cancellation takes effect at the commitment's end.
        var outcome = ActionOutcome(kind: enabled ? .autoRenewEnabled : .autoRenewDisabled, transactionId: sub.latestTransactionId,
                                    originalTransactionId: otid, effectiveDateMs: enabled ? nowMs : c.endMs)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    /// The next period of a commitment starting at `start`: the next month, or month 1 of a new commitment at
    /// the end of the old one. Returns the commitment for that period and its end.
    func nextCommitmentPeriod(_ c: SimCommitment, startingAt start: Int64) -> (SimCommitment, endMs: Int64) {
        var next = c
        if start >= c.endMs {
            next = SimCommitment(startMs: start, monthlyPriceMilli: c.monthlyPriceMilli, renews: true)
        } else {
            next.billingPeriod = min(c.billingPeriod + 1, SimCommitment.totalBillingPeriods)
        }
        var end = next.endOfMonth(next.billingPeriod)
        // A billing recovery that starts late still buys a whole month, never past the commitment's end.
        if end <= start { end = min(ISOPeriod(months: 1).added(to: start), max(next.endMs, start + Self.dayMs)) }
        return (next, end)
    }

    /// Renewal info's commitment fields (§4, API 1.21).
    func commitmentRenewalFields(_ sub: SimSubscription) -> [String: JSONValue] {
        guard let c = sub.commitment else {
            let both = product(sub.autoRenewProductId)?.monthlyBillingWithCommitment ?? false
            return both ? ["renewalBillingPlanType": .string(BillingPlanType.billedUpfront.rawValue)] : [:]
        }
        let info = RenewalCommitmentInfo(commitmentAutoRenewProductId: sub.autoRenewProductId, commitmentAutoRenewStatus: c.renews ? 1 : 0,
                                         commitmentRenewalBillingPlanType: .monthly, commitmentRenewalDate: c.endMs,
                                         commitmentRenewalPrice: c.priceMilli)
        return ["renewalBillingPlanType": .string(BillingPlanType.monthly.rawValue), "commitmentInfo": info.json,
                "renewalPrice": .int(c.monthlyPriceMilli)]
    }

    func commitmentView(_ sub: SimSubscription) -> JSONValue? {
        guard let c = sub.commitment else { return nil }
        return ["billingPeriod": .int(Int64(c.billingPeriod)), "totalBillingPeriods": .int(Int64(SimCommitment.totalBillingPeriods)),
                "startDate": .string(Timestamp.rfc3339(c.startMs)), "endsAt": .string(Timestamp.rfc3339(c.endMs)),
                "monthlyPriceMilli": .int(c.monthlyPriceMilli), "priceMilli": .int(c.priceMilli), "willRenew": .bool(c.renews)]
    }
}

extension SimTransaction {
    /// `billingPlanType` for a product sold both ways (`MONTHLY` inside a commitment, else `BILLED_UPFRONT`) and
    /// the commitment's fields.
    mutating func setBillingPlan(product: Product, commitment: SimCommitment?) {
        if let commitment {
            billingPlanType = BillingPlanType.monthly.rawValue
            commitmentBillingPeriod = commitment.billingPeriod
            commitmentExpiresDate = commitment.endMs
            commitmentPrice = commitment.priceMilli
        } else if product.monthlyBillingWithCommitment {
            billingPlanType = BillingPlanType.billedUpfront.rawValue
        }
    }
}
