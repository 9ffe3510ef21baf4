import KakinCore

extension SimulatorState {
    func knownTransaction(_ id: String) throws(KakinError) -> SimTransaction {
        guard let tx = store.transactions[id] else {
            throw KakinError(.simulatorUnknownTransaction, "The simulator has no transaction \(id).")
        }
        return tx
    }

    /// The instance a transaction belongs to, if it is an auto-renewable one.
    func instanceOf(_ tx: SimTransaction) -> String? {
        tx.productKind == .autoRenewable && store.subscriptions[tx.originalTransactionId] != nil ? tx.originalTransactionId : nil
    }

    /// Refunds a transaction (REFUND), or for a family-shared copy takes the access back (REVOKE, as when the
    /// purchaser was refunded). A refunded latest transaction revokes its subscription (status 5).
    /// - Parameters:
    ///   - reason: `revocationReason`: 1 for an app issue, 0 otherwise (the default).
    ///   - percentage: milliunits (0–100000) for a prorated refund (`REFUND_PRORATED`); nil for a full one.
    mutating func refund(transactionId: String, reason: Int = 0, percentage: Int? = nil) throws(KakinError) -> ActionOutcome {
        let tx = try knownTransaction(transactionId)
        guard !tx.isRevoked else { throw KakinError(.simulatorInvalidAction, "Transaction \(transactionId) is already refunded or revoked.") }
        guard reason == 0 || reason == 1 else { throw KakinError(.invalidField, "revocationReason must be 0 or 1.") }
        if let percentage, !(1...100_000).contains(percentage) {
            throw KakinError(.invalidField, "revocationPercentage must be 1 to 100000 (milliunits).")
        }
        let type: RevocationType = tx.isFamilyShared ? .familyRevoke : (percentage.map { $0 < 100_000 } ?? false ? .refundProrated : .refundFull)
        return revoke(tx, reason: reason, type: type, percentage: type == .refundProrated ? percentage : nil)
    }

    /// `revokeFamilySharing`: the purchaser stopped sharing; the member's copy gets REVOKE (reason 0).
    mutating func revokeFamilySharing(_ otid: String) throws(KakinError) -> ActionOutcome {
        let sub = try liveSubscription(otid)
        guard sub.isFamilyShared else { throw KakinError(.simulatorInvalidAction, "Subscription \(otid) is not a family-shared copy.") }
        let tx = latest(sub)
        guard !tx.isRevoked else { throw KakinError(.simulatorInvalidAction, "Family access was already revoked.") }
        return revoke(tx, reason: 0, type: .familyRevoke, percentage: nil)
    }

    mutating func revokeFamilySharing(transactionId: String) throws(KakinError) -> ActionOutcome {
        let tx = try knownTransaction(transactionId)
        guard tx.isFamilyShared else { throw KakinError(.simulatorInvalidAction, "Transaction \(transactionId) is not a family-shared copy.") }
        guard !tx.isRevoked else { throw KakinError(.simulatorInvalidAction, "Family access was already revoked.") }
        return revoke(tx, reason: 0, type: .familyRevoke, percentage: nil)
    }

    mutating func revoke(_ tx: SimTransaction, reason: Int, type: RevocationType, percentage: Int?) -> ActionOutcome {
        let seq = store.notificationSeq
        let id = tx.transactionId
        store.transactions[id]!.revocationDate = nowMs
        store.transactions[id]!.revocationReason = reason
        store.transactions[id]!.revocationType = type.rawValue
        store.transactions[id]!.revocationPercentage = percentage
        resign(transaction: id)
        store.refundRequests.remove(id)
        let otid = instanceOf(tx)
        if let otid, var sub = store.subscriptions[otid], sub.latestTransactionId == id, sub.phase.isLive {
            sub.autoRenewBeforeRevocation = sub.autoRenewStatus
            sub.phase = .revoked(atMs: nowMs)
            sub.autoRenewStatus = false
            sub.pendingOffer = nil
            sub.failNextRenewal = false
            store.subscriptions[otid] = sub
        }
        emit(type == .familyRevoke ? .revoke : .refund, nil, transactionId: id, subscription: otid)
        var outcome = ActionOutcome(kind: type == .familyRevoke ? .revoked : .refunded, transactionId: id,
                                    originalTransactionId: tx.originalTransactionId, effectiveDateMs: nowMs)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    /// REFUND_REVERSED: the refund is undone after a dispute. A subscription revoked by it comes back with its
    /// renewal date unchanged: active if that date is still ahead, otherwise ended (no EXPIRED is sent).
    mutating func reverseRefund(transactionId: String) throws(KakinError) -> ActionOutcome {
        let tx = try knownTransaction(transactionId)
        guard tx.isRevoked, tx.revocationType != RevocationType.familyRevoke.rawValue else {
            throw KakinError(.simulatorInvalidAction, "Transaction \(transactionId) has no refund to reverse.")
        }
        let seq = store.notificationSeq
        store.transactions[transactionId]!.revocationDate = nil
        store.transactions[transactionId]!.revocationReason = nil
        store.transactions[transactionId]!.revocationType = nil
        store.transactions[transactionId]!.revocationPercentage = nil
        resign(transaction: transactionId)
        let otid = instanceOf(tx)
        if let otid, var sub = store.subscriptions[otid], sub.latestTransactionId == transactionId, case .revoked = sub.phase {
            if let expires = tx.expiresDate, expires > nowMs {
                sub.phase = .active
                sub.autoRenewStatus = sub.autoRenewBeforeRevocation ?? true
            } else {
                sub.phase = .expired(intent: 5, atMs: tx.expiresDate ?? nowMs)
            }
            sub.autoRenewBeforeRevocation = nil
            store.subscriptions[otid] = sub
        }
        emit(.refundReversed, nil, transactionId: transactionId, subscription: otid)
        var outcome = ActionOutcome(kind: .refundReversed, transactionId: transactionId, originalTransactionId: tx.originalTransactionId)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    static let consumptionRequestReasons: Set<String> = ["UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER"]

    /// The customer asks Apple for a refund: CONSUMPTION_REQUEST (Apple wants usage data within 12 hours).
    mutating func requestRefund(transactionId: String, reason: String?) throws(KakinError) -> ActionOutcome {
        let tx = try knownTransaction(transactionId)
        guard !tx.isRevoked, !tx.isFamilyShared else { throw KakinError(.simulatorInvalidAction, "Transaction \(transactionId) cannot be refunded.") }
        let reason = reason ?? "UNSATISFIED_WITH_PURCHASE"
        guard Self.consumptionRequestReasons.contains(reason) else {
            throw KakinError(.invalidField, "reason must be one of \(Self.consumptionRequestReasons.sorted().joined(separator: ", ")).")
        }
        let seq = store.notificationSeq
        store.refundRequests.insert(transactionId)
        emit(.consumptionRequest, nil, transactionId: transactionId, subscription: instanceOf(tx),
             extraData: ["consumptionRequestReason": .string(reason)])
        var outcome = ActionOutcome(kind: .refundRequested, transactionId: transactionId, originalTransactionId: tx.originalTransactionId)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }

    /// Apple declines a refund requested in the app: REFUND_DECLINED.
    mutating func declineRefund(transactionId: String) throws(KakinError) -> ActionOutcome {
        let tx = try knownTransaction(transactionId)
        guard !tx.isRevoked, !tx.isFamilyShared else { throw KakinError(.simulatorInvalidAction, "Transaction \(transactionId) cannot be refunded.") }
        let seq = store.notificationSeq
        store.refundRequests.remove(transactionId)
        emit(.refundDeclined, nil, transactionId: transactionId, subscription: instanceOf(tx))
        var outcome = ActionOutcome(kind: .refundDeclined, transactionId: transactionId, originalTransactionId: tx.originalTransactionId)
        outcome.notificationUUIDs = collectNotifications(since: seq)
        return outcome
    }
}
