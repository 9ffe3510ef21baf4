import KakinCore

// Plan changes follow KakinCore's `PlanChange` (the status engine's notices use the same rule).

extension SimulatorState {
    func liveSubscription(_ otid: String) throws(KakinError) -> SimSubscription {
        guard let sub = store.subscriptions[otid] else {
            throw KakinError(.simulatorUnknownSubscription, "The simulator has no subscription \(otid).")
        }
        return sub
    }

    /// Changes the product or redeems a promotional offer or offer code on a live instance (purchase of another
    /// product of the group, `changeProduct`, `applyPromotionalOffer`).
    /// - Parameter writeToken: false when redeemed outside the app: a new transaction carries no `appAccountToken`.
    mutating func changeSubscription(_ otid: String, to target: Product, offer choice: OfferChoice?, viaPurchase: Bool,
                                     writeToken: Bool = true) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard target.groupId == sub.groupId else {
            throw KakinError(.invalidField, "\(target.productId) is not in subscription group \(sub.groupId).")
        }
        switch sub.phase {
        case .active: break
        case .billingRetry:
            throw KakinError(.simulatorInvalidAction, "The subscription is in billing retry; recover billing before changing it.")
        case .expired, .revoked:
            throw KakinError(.simulatorInvalidAction, "The subscription has ended; purchase a product to resubscribe.")
        }
        if sub.isFamilyShared { throw KakinError(.simulatorInvalidAction, "Only the family organiser can change a family-shared subscription.") }
        var promo: SubscriptionOffer?
        switch choice {
        case .introductory:
            throw KakinError(.simulatorNotEligible, "An account subscribed in group \(sub.groupId) is not eligible for an introductory offer.")
        case .winBack(let id):
            throw KakinError(.simulatorNotEligible, "Win-back offer \(id) is for customers whose subscription lapsed; this one is live.")
        case let choice?:
            promo = try catalogOffer(choice, of: target)
        case nil: break
        }
        let current = product(sub.productId) ?? target
        // Inside a 12-month commitment the next "renewal" that can change anything is the commitment's end.
        let committed = isCommittedMidTerm(sub)
        let effectiveAtRenewal = committed ? sub.commitment!.endMs : (latest(sub).expiresDate ?? nowMs)

        if target.productId == sub.productId {
            if let promo {
                // Same product: the offer waits for the next renewal, after the trial or the paid period (seed 003);
                // it replaces any pending offer (one slot; "12+6+12 is really 12+12").
                sub.pendingOffer = PendingOffer(productId: target.productId, offer: AppliedOffer(promo))
                sub.autoRenewProductId = target.productId
                sub.autoRenewStatus = true
                store.subscriptions[otid] = sub
                emit(.offerRedeemed, nil, transactionId: sub.latestTransactionId, subscription: otid)
                return ActionOutcome(kind: .offerPending, transactionId: sub.latestTransactionId, originalTransactionId: otid, effectiveDateMs: effectiveAtRenewal)
            }
            if sub.autoRenewProductId != sub.productId {
                // Back to the current product: cancels a scheduled downgrade or crossgrade.
                sub.autoRenewProductId = sub.productId
                sub.pendingOffer = nil
                sub.autoRenewStatus = true
                store.subscriptions[otid] = sub
                emit(.didChangeRenewalPref, nil, transactionId: sub.latestTransactionId, subscription: otid)
                return ActionOutcome(kind: .downgradeCancelled, transactionId: sub.latestTransactionId, originalTransactionId: otid, effectiveDateMs: nowMs)
            }
            if viaPurchase, !sub.autoRenewStatus {
                sub.autoRenewStatus = true
                store.subscriptions[otid] = sub
                emit(.didChangeRenewalStatus, .autoRenewEnabled, transactionId: sub.latestTransactionId, subscription: otid)
                return ActionOutcome(kind: .autoRenewEnabled, transactionId: sub.latestTransactionId, originalTransactionId: otid, effectiveDateMs: nowMs)
            }
            throw KakinError(.simulatorInvalidAction, "The account is already subscribed to \(target.productId).")
        }

        let change = PlanChange(from: current, to: target, committed: committed)
        let type: NotificationType = promo == nil ? .didChangeRenewalPref : .offerRedeemed
        if change.isImmediate {
            // The old transaction is re-signed with isUpgraded (the entitlement moves to the new one); the unused
            // part of a paid period is refunded prorated (recorded, no REFUND); a free trial is simply discarded.
            let old = latest(sub)
            var refund: ProratedRefund?
            if let price = old.priceMilli, price > 0, let expires = old.expiresDate, expires > nowMs, expires > old.purchaseDate {
                let amount = price * (expires - nowMs) / (expires - old.purchaseDate)
                refund = ProratedRefund(transactionId: old.transactionId, originalTransactionId: otid, amountMilli: amount,
                                        currency: old.currency, dateMs: nowMs)
                store.proratedRefunds.append(refund!)
            }
            store.transactions[old.transactionId]!.isUpgraded = true
            resign(transaction: old.transactionId)
            let applied = promo.map(AppliedOffer.init)
            let end = (applied?.firstSpan ?? target.period!).added(to: nowMs)
            let tid = makeTransaction(product: target, account: sub.accountKey, token: writeToken ? sub.appAccountToken : nil, ownership: .purchased,
                                      original: (otid, sub.originalPurchaseDate), purchaseDate: nowMs, expiresDate: end, quantity: 1,
                                      offer: applied, reason: .purchase, regularPriceMilli: target.priceMilli)
            let left = (applied?.isPayAsYouGo ?? false) ? applied!.numberOfPeriods - 1 : 0
            sub.productId = target.productId
            sub.latestTransactionId = tid
            sub.autoRenewProductId = target.productId
            sub.autoRenewStatus = true
            sub.pendingOffer = nil
            sub.runningOffer = left > 0 ? applied : nil
            sub.runningOfferPeriodsLeft = left
            sub.priceOverrideMilli = nil
            sub.priceIncrease = nil
            sub.commitment = nil  // an upgrade ends the commitment's product for a plan of its own
            store.subscriptions[otid] = sub
            emit(type, change.subtype, transactionId: tid, subscription: otid)
            return ActionOutcome(kind: change == .upgrade ? .upgraded : .crossgraded, transactionId: tid, originalTransactionId: otid,
                                 effectiveDateMs: nowMs, proratedRefund: refund)
        }
        if sub.autoRenewProductId == target.productId, promo == nil, sub.pendingOffer?.productId != target.productId, sub.autoRenewStatus {
            throw KakinError(.simulatorInvalidAction, "A change to \(target.productId) is already scheduled for the next renewal.")
        }
        sub.autoRenewProductId = target.productId
        sub.autoRenewStatus = true
        sub.pendingOffer = promo.map { PendingOffer(productId: target.productId, offer: AppliedOffer($0)) }
        store.subscriptions[otid] = sub
        emit(type, change.subtype, transactionId: sub.latestTransactionId, subscription: otid)
        return ActionOutcome(kind: .scheduled, transactionId: sub.latestTransactionId, originalTransactionId: otid, effectiveDateMs: effectiveAtRenewal)
    }

    /// `applyPromotionalOffer`: the offer's product defaults to the current one, else the only product of the
    /// group that has this offer id. On an ended instance it resubscribes with the offer (SUBSCRIBED/RESUBSCRIBE).
    mutating func applyPromotionalOffer(_ otid: String, offerId: String, productId: String?) throws(KakinError) -> ActionOutcome {
        let sub = try liveSubscription(otid)
        let target: Product
        if let productId {
            guard let p = product(productId), p.groupId == sub.groupId else {
                throw KakinError(.invalidField, "\(productId) is not a product of subscription group \(sub.groupId).")
            }
            target = p
        } else if let p = product(sub.productId), p.promotionalOffer(id: offerId) != nil {
            target = p
        } else {
            let candidates = config.catalog.products(inGroup: sub.groupId).filter { $0.promotionalOffer(id: offerId) != nil }
            guard candidates.count == 1 else {
                throw KakinError(.invalidField, candidates.isEmpty ? "No product of group \(sub.groupId) has promotional offer \(offerId)."
                                                                  : "Several products have offer \(offerId); name the productId.")
            }
            target = candidates[0]
        }
        if !sub.phase.isLive {
            return try purchase(PurchaseRequest(productId: target.productId, appAccountToken: sub.accountKey.isEmpty ? nil : sub.accountKey,
                                                offer: .promotional(id: offerId), signatureWaived: true))
        }
        let seq = store.notificationSeq
        var outcome = try changeSubscription(otid, to: target, offer: .promotional(id: offerId), viaPurchase: false)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    mutating func changeProduct(_ otid: String, to productId: String) throws(KakinError) -> ActionOutcome {
        guard let target = product(productId) else { throw KakinError(.simulatorUnknownProduct, "The simulator's catalog has no product \(productId).") }
        let seq = store.notificationSeq
        var outcome = try changeSubscription(otid, to: target, offer: nil, viaPurchase: false)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    // MARK: - Renewal status and billing

    mutating func setAutoRenew(_ otid: String, enabled: Bool) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard sub.phase.isLive else { throw KakinError(.simulatorInvalidAction, "The subscription has ended.") }
        if sub.commitment != nil { return try setCommitmentRenewal(otid, enabled: enabled) }
        guard sub.autoRenewStatus != enabled else {
            throw KakinError(.simulatorInvalidAction, "Auto-renew is already \(enabled ? "on" : "off").")
        }
        let seq = store.notificationSeq
        sub.autoRenewStatus = enabled
        store.subscriptions[otid] = sub
        emit(.didChangeRenewalStatus, enabled ? .autoRenewEnabled : .autoRenewDisabled, transactionId: sub.latestTransactionId, subscription: otid)
        // Turning auto-renew off stops billing retry: outside grace nothing is left to wait for.
        if !enabled, case .billingRetry(_, let grace, let graceExpired) = sub.phase, grace == nil || graceExpired {
            expire(otid, intent: 1, subtype: .voluntary, atMs: nowMs)
        }
        var outcome = ActionOutcome(kind: enabled ? .autoRenewEnabled : .autoRenewDisabled, transactionId: sub.latestTransactionId,
                                    originalTransactionId: otid, effectiveDateMs: nowMs)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    /// `failBilling`: the next renewal fails (no notification until then).
    mutating func failBilling(_ otid: String) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard sub.phase == .active else { throw KakinError(.simulatorInvalidAction, "Billing can only start failing on an active subscription.") }
        guard !sub.failNextRenewal else { throw KakinError(.simulatorInvalidAction, "The next renewal is already set to fail.") }
        sub.failNextRenewal = true
        store.subscriptions[otid] = sub
        return ActionOutcome(kind: .billingFailureScheduled, transactionId: sub.latestTransactionId, originalTransactionId: otid,
                             effectiveDateMs: latest(sub).expiresDate)
    }

    /// `recoverBilling`: in grace the new period starts at the failed renewal date (no gap); later, at recovery.
    mutating func recoverBilling(_ otid: String) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        switch sub.phase {
        case .active where sub.failNextRenewal:
            sub.failNextRenewal = false
            store.subscriptions[otid] = sub
            return ActionOutcome(kind: .billingFailureCleared, transactionId: sub.latestTransactionId, originalTransactionId: otid)
        case .billingRetry(let failedAt, let grace, let graceExpired):
            let seq = store.notificationSeq
            let inGrace = grace.map { !graceExpired && nowMs < $0 } ?? false
            let start = inGrace ? failedAt : nowMs
            let tid = renew(otid, startingAt: start, subtype: .billingRecovery)
            var outcome = ActionOutcome(kind: .billingRecovered, transactionId: tid, originalTransactionId: otid, effectiveDateMs: start)
            outcome.notificationUUIDs = collectNotifications(since: seq)
            return outcome
        default:
            throw KakinError(.simulatorInvalidAction, "The subscription is not failing to bill.")
        }
    }

    /// Announces a price increase; with consent required the next renewal waits for `acceptPriceIncrease`,
    /// and without it the subscription expires (EXPIRED/PRICE_INCREASE).
    mutating func announcePriceIncrease(_ otid: String, newPriceMilli: Int64, consentRequired: Bool) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard sub.phase.isLive else { throw KakinError(.simulatorInvalidAction, "The subscription has ended.") }
        guard newPriceMilli > 0 else { throw KakinError(.invalidField, "price must be positive.") }
        let seq = store.notificationSeq
        sub.priceIncrease = PriceIncrease(newPriceMilli: newPriceMilli, consented: !consentRequired)
        store.subscriptions[otid] = sub
        emit(.priceIncrease, consentRequired ? .pending : .accepted, transactionId: sub.latestTransactionId, subscription: otid)
        var outcome = ActionOutcome(kind: .priceIncreaseAnnounced, transactionId: sub.latestTransactionId, originalTransactionId: otid,
                                    effectiveDateMs: latest(sub).expiresDate)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    mutating func acceptPriceIncrease(_ otid: String) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard sub.phase.isLive, let increase = sub.priceIncrease, !increase.consented else {
            throw KakinError(.simulatorInvalidAction, "No price increase is waiting for consent.")
        }
        let seq = store.notificationSeq
        sub.priceIncrease?.consented = true
        store.subscriptions[otid] = sub
        emit(.priceIncrease, .accepted, transactionId: sub.latestTransactionId, subscription: otid)
        var outcome = ActionOutcome(kind: .priceIncreaseAccepted, transactionId: sub.latestTransactionId, originalTransactionId: otid)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    mutating func removeFromSale(_ otid: String) throws(KakinError) -> ActionOutcome {
        var sub = try liveSubscription(otid)
        guard sub.phase.isLive else { throw KakinError(.simulatorInvalidAction, "The subscription has ended.") }
        sub.productNotForSale = true
        store.subscriptions[otid] = sub
        return ActionOutcome(kind: .productRemovedFromSale, transactionId: sub.latestTransactionId, originalTransactionId: otid,
                             effectiveDateMs: latest(sub).expiresDate)
    }

    // MARK: - Time

    /// When this instance next has something happen on its own: renewal or expiry, grace end, retry end.
    func nextEventMs(_ sub: SimSubscription) -> Int64? {
        switch sub.phase {
        case .active: return latest(sub).expiresDate
        case .billingRetry(let failedAt, let grace, let graceExpired):
            if let grace, !graceExpired { return grace }
            return failedAt + Int64(config.billingRetryDays) * Self.dayMs
        case .expired, .revoked: return nil
        }
    }

    /// `nextEventMs(sub)` read in place (no copy of the subscription or its latest transaction): the engine asks this
    /// for every subscription at every step, so a long simulated year copies nothing here.
    func nextEventMs(at i: Dictionary<String, SimSubscription>.Index) -> Int64? {
        let values = store.subscriptions.values
        switch values[i].phase {
        case .active:
            guard let t = store.transactions.index(forKey: values[i].latestTransactionId) else { return nil }
            return store.transactions.values[t].expiresDate
        case .billingRetry(let failedAt, let grace, let graceExpired):
            if let grace, !graceExpired { return grace }
            return failedAt + Int64(config.billingRetryDays) * Self.dayMs
        case .expired, .revoked: return nil
        }
    }

    func nextEventMs() -> Int64? {
        var subscriptions: Int64?
        var i = store.subscriptions.startIndex
        while i != store.subscriptions.endIndex {
            if let t = nextEventMs(at: i), t < subscriptions ?? .max { subscriptions = t }
            i = store.subscriptions.index(after: i)
        }
        guard let tokens = nextExternalPurchaseEventMs() else { return subscriptions }
        return min(subscriptions ?? tokens, tokens)
    }

    /// Moves time forward to `target`, applying every renewal, billing failure, grace end and expiry at its
    /// own instant, in order, even across many periods. Returns the notifications produced.
    @discardableResult
    mutating func advance(toMs target: Int64) -> [String] {
        let seq = store.notificationSeq
        var steps = 0
        while steps < 5_000_000 {
            // One pass finds the next instant and the subscriptions due then.
            var next: Int64?
            var due: [String] = []
            var i = store.subscriptions.startIndex
            while i != store.subscriptions.endIndex {
                if let t = nextEventMs(at: i) {
                    if t < next ?? .max {
                        next = t
                        due = [store.subscriptions.keys[i]]
                    } else if t == next {
                        due.append(store.subscriptions.keys[i])
                    }
                }
                i = store.subscriptions.index(after: i)
            }
            if let tokens = nextExternalPurchaseEventMs(), tokens < next ?? .max {
                next = tokens
                due = []
            }
            guard let t = next, t <= target else { break }
            store.nowMs = max(store.nowMs, t)
            processExternalPurchaseDeadlines(atMs: t)
            if due.isEmpty { steps += 1 }
            for otid in due.sorted() where store.subscriptions[otid].flatMap({ nextEventMs($0) }) == t {
                processEvent(otid, at: t)
                steps += 1
            }
        }
        store.nowMs = max(store.nowMs, target)
        return collectNotifications(since: seq)
    }

    mutating func processEvent(_ otid: String, at t: Int64) {
        let sub = store.subscriptions[otid]!
        switch sub.phase {
        case .active:
            if !sub.autoRenewStatus {
                expire(otid, intent: 1, subtype: .voluntary, atMs: t)
            } else if sub.productNotForSale || product(sub.autoRenewProductId) == nil {
                expire(otid, intent: 4, subtype: .productNotForSale, atMs: t)
            } else if let increase = sub.priceIncrease, !increase.consented {
                expire(otid, intent: 3, subtype: .priceIncrease, atMs: t)
            } else if sub.failNextRenewal {
                failRenewal(otid, at: t)
            } else {
                renew(otid, startingAt: t, subtype: nil)
            }
        case .billingRetry(let failedAt, let grace, let graceExpired):
            if let grace, !graceExpired, t == grace {
                if !sub.autoRenewStatus {
                    expire(otid, intent: 1, subtype: .voluntary, atMs: t)
                } else {
                    store.subscriptions[otid]!.phase = .billingRetry(failedAtMs: failedAt, graceEndMs: grace, graceExpired: true)
                    emit(.gracePeriodExpired, nil, transactionId: sub.latestTransactionId, subscription: otid)
                }
            } else {
                expire(otid, intent: 2, subtype: .billingRetry, atMs: t)
            }
        case .expired, .revoked:
            break
        }
    }

    mutating func failRenewal(_ otid: String, at t: Int64) {
        var sub = store.subscriptions[otid]!
        sub.failNextRenewal = false
        let grace = config.gracePeriodDays.map { t + Int64($0) * Self.dayMs }
        sub.phase = .billingRetry(failedAtMs: t, graceEndMs: grace, graceExpired: false)
        store.subscriptions[otid] = sub
        emit(.didFailToRenew, grace == nil ? nil : .gracePeriod, transactionId: sub.latestTransactionId, subscription: otid)
    }

    mutating func expire(_ otid: String, intent: Int, subtype: NotificationSubtype?, atMs t: Int64) {
        var sub = store.subscriptions[otid]!
        sub.phase = .expired(intent: intent, atMs: t)
        sub.autoRenewStatus = false
        sub.pendingOffer = nil
        sub.runningOffer = nil
        sub.runningOfferPeriodsLeft = 0
        sub.failNextRenewal = false
        sub.priceIncrease = nil
        sub.productNotForSale = false
        store.subscriptions[otid] = sub
        emit(.expired, subtype, transactionId: sub.latestTransactionId, subscription: otid)
    }

    /// A new period starting at `start`: the pending offer if it is for the renewing product, else the next
    /// period of a running pay-as-you-go offer, else the regular price (after any accepted increase).
    @discardableResult
    mutating func renew(_ otid: String, startingAt start: Int64, subtype: NotificationSubtype?) -> String {
        var sub = store.subscriptions[otid]!
        // Mid-commitment the committed product renews, whatever is scheduled for the commitment's end.
        let next = isCommittedMidTerm(sub) ? product(sub.productId)! : product(sub.autoRenewProductId)!
        var commitment: SimCommitment?
        var commitmentEnd: Int64?
        if let c = sub.commitment, next.productId == sub.productId, start < c.endMs || c.renews {
            (commitment, commitmentEnd) = nextCommitmentPeriod(c, startingAt: start)
        }
        var offer: AppliedOffer?
        var left = 0
        if commitment != nil {
            // Offers are not simulated on commitments: a pending one waits (renewal info keeps showing it).
        } else if let pending = sub.pendingOffer, pending.productId == next.productId {
            offer = pending.offer
            left = pending.offer.isPayAsYouGo ? pending.offer.numberOfPeriods - 1 : 0
        } else if let running = sub.runningOffer, sub.runningOfferPeriodsLeft > 0, next.productId == sub.productId {
            offer = running
            left = sub.runningOfferPeriodsLeft - 1
        }
        if next.productId != sub.productId { sub.priceOverrideMilli = nil }
        if let increase = sub.priceIncrease, increase.consented {
            sub.priceOverrideMilli = increase.newPriceMilli
            sub.priceIncrease = nil
        }
        let end = commitmentEnd ?? (offer?.firstSpan ?? next.period!).added(to: start)
        let tid = makeTransaction(product: next, account: sub.accountKey, token: sub.appAccountToken,
                                  ownership: InAppOwnershipType(rawValue: sub.ownership), original: (otid, sub.originalPurchaseDate),
                                  purchaseDate: start, expiresDate: end, quantity: 1, offer: offer, reason: .renewal,
                                  regularPriceMilli: commitment?.monthlyPriceMilli ?? sub.priceOverrideMilli ?? next.priceMilli,
                                  commitment: commitment)
        sub.productId = next.productId
        sub.latestTransactionId = tid
        sub.commitment = commitment
        if let commitment {
            sub.autoRenewStatus = commitment.renews || !commitment.isLastMonth
        } else {
            sub.pendingOffer = nil
            sub.runningOffer = left > 0 ? offer : nil
            sub.runningOfferPeriodsLeft = left
        }
        sub.phase = .active
        store.subscriptions[otid] = sub
        emit(.didRenew, subtype, transactionId: tid, subscription: otid)
        return tid
    }
}
