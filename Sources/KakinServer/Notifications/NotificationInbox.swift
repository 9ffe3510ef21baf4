import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinStorage

/// App Store Server Notifications V2: verify, store durably, answer 200, then apply in the background.
/// Apple retries only what we refuse, so a notification is acknowledged once it is on disk and Kakin
/// retries its own processing failures; duplicates (same `notificationUUID`) are acknowledged and ignored.
extension KakinApp {
    static let signedPayloadBytesMax = 256 * 1024

    /// `POST /v1/notifications/appstore`.
    func postNotification(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in
            let body = try request.jsonObject()
            let jws = try field { () throws(ConfigurationError) in
                try body.check(allowedKeys: ["signedPayload"])
                return try body.boundedString("signedPayload", lengthMax: Self.signedPayloadBytesMax)!
            }
            try await ingestNotification(jws, source: "push")
            return .json([:], status: 200)
        }
    }

    /// Verifies and stores one signed notification (from Apple's push or from Notification History).
    /// Returns whether it was new.
    @discardableResult
    func ingestNotification(_ jws: String, source: String) async throws(KakinError) -> Bool {
        let notification: NotificationPayload
        do {
            notification = try verifier.verifyNotification(jws)
        } catch {
            metrics.countVerificationFailure(error.code)
            throw KakinError(error.code.errorKind, detail: error.reason, httpStatus: error.code == .retryableFailure ? 503 : 400)
        }
        let isNew = try await store.storeNotification(notification, jws: jws, source: source)
        if isNew {
            metrics.increment(.notificationsReceived)
            notificationWorker.wake()
        }
        return isNew
    }

    /// Applies one stored notification: verifies its signed transaction and renewal info, keeps the newest
    /// copies, and applies their effects to the customer they belong to (if anyone has claimed them yet).
    func applyNotification(_ stored: InboxNotification) async throws(KakinError) {
        guard let json = StoredJWS.payload(stored.jws), let n = try? NotificationPayload(json: json) else {
            try await store.markNotification(stored.notificationUUID, state: .ignored, customerId: nil, originalTransactionId: nil)
            return
        }
        guard n.notificationType != .test, let data = n.data, data.signedTransactionInfo != nil || data.signedRenewalInfo != nil else {
            try await store.markNotification(stored.notificationUUID, state: .ignored, customerId: nil, originalTransactionId: nil)
            return
        }
        var renewalOriginal: String?
        if let renewalJWS = data.signedRenewalInfo {
            let info: RenewalInfoPayload
            do {
                info = try verifier.verifyRenewalInfo(renewalJWS)
            } catch {
                throw error.kakinError
            }
            try await store.storeRenewalInfo(info, jws: renewalJWS)
            renewalOriginal = info.originalTransactionId
        }
        guard let transactionJWS = data.signedTransactionInfo else {
            try await store.markNotification(stored.notificationUUID, state: .applied, customerId: nil, originalTransactionId: renewalOriginal)
            metrics.increment(.notificationsApplied)
            return
        }
        let tx = try verifyTransaction(transactionJWS)
        let customerId = try await store.resolveCustomer(for: tx)
        var claimedBy: String?
        if customerId != nil, appsByBundle[tx.bundleId]?.catalog[tx.productId] == nil {
            // A customer's purchase of a product this server doesn't know: retried (the operator may add it to
            // the config), then dead; replaying it after the fix credits it. Stored meanwhile, so support sees it.
            try await store.storeUnclaimedTransaction(tx, jws: transactionJWS)
            throw KakinError(.unknownProduct, detail: "product \(tx.productId) of transaction \(tx.transactionId) is not in the catalog")
        }
        if let customerId {
            do {
                _ = try await apply(tx, jws: transactionJWS, customerId: customerId, via: "notification", purchaseProcessId: nil)
                claimedBy = customerId
            } catch where error.kind == .belongsToAnotherCustomer {
                try await store.storeUnclaimedTransaction(tx, jws: transactionJWS)
            }
        } else {
            try await store.storeUnclaimedTransaction(tx, jws: transactionJWS)
        }
        if n.notificationType == .consumptionRequest {
            try await scheduleConsumptionAnswer(n, transaction: tx, customerId: claimedBy ?? customerId)
        }
        try await store.markNotification(stored.notificationUUID, state: .applied, customerId: claimedBy ?? customerId,
                                         originalTransactionId: tx.originalTransactionId)
        metrics.increment(.notificationsApplied)
    }

    /// Claims the notifications due now (other processes on the same database take others) and processes
    /// them; failures are rescheduled with backoff or, per `NotificationRetryPolicy`, moved to `dead` (kept,
    /// counted, listed, replayable) — never dropped. Returns how many were attempted. A full batch wakes the
    /// worker again at once: more may be due (a backlog drains at the worker's pace, not one batch per poll).
    @discardableResult
    public func processDueNotifications() async -> Int {
        let attempted = await claims.pass { await processClaimedNotifications() }
        if attempted == claims.batchMax { notificationWorker.wake() }
        return attempted
    }

    private func processClaimedNotifications() async -> Int {
        let due: [InboxNotification]
        do {
            let now = retryClock.nowMs()
            due = try await store.claimDueNotifications(owner: claims.owner, nowMs: now, leaseUntilMs: now + claims.leaseMs, limit: claims.batchMax)
        } catch {
            logger.error("notification inbox unreadable", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return 0
        }
        // A batch's notifications are applied side by side: their writes share the writer's commits instead of
        // each waiting for a commit of its own. Arrival order never changes the outcome (see docs/architecture.md).
        await withTaskGroup(of: Void.self) { group in
            for n in due { group.addTask { await self.processClaimedNotification(n) } }
        }
        return due.count
    }

    /// Applies one claimed notification; a failure is rescheduled with backoff or, per `NotificationRetryPolicy`,
    /// moved to `dead`.
    private func processClaimedNotification(_ n: InboxNotification) async {
        do {
            try await applyNotification(n)
        } catch {
            metrics.increment(.notificationsFailed)
            let delayMs = NotificationRetryPolicy.retryDelayMs(afterAttempts: n.attempts + 1)
            let dead = NotificationRetryPolicy.isDead(after: error.kind, attempts: n.attempts + 1, attemptsMax: settings.notificationAttemptsMax)
            if dead { metrics.increment(.notificationsDead) }
            logger.log(dead ? .error : .warning, dead ? "notification processing failed; dead until replayed" : "notification processing failed; will retry", [
                "notification.uuid": .string(n.notificationUUID), "error.id": .string(error.kind.id),
                "error.detail": .string(error.detail ?? error.message), "retry.inMs": .int(delayMs),
            ])
            let about = Self.subject(of: n.jws)
            try? await store.failNotification(n.notificationUUID, error: error.description, nextAttemptMs: retryClock.nowMs() + delayMs,
                                              dead: dead, originalTransactionId: about.originalTransactionId,
                                              appAccountToken: about.appAccountToken)
        }
    }

    /// The original transaction and app account token a stored notification is about (read from its payload,
    /// verified when it was stored), so a failed one still shows on its customer's page.
    static func subject(of jws: String) -> (originalTransactionId: String?, appAccountToken: String?) {
        guard let payload = StoredJWS.payload(jws), let data = payload["data"] else { return (nil, nil) }
        for key in ["signedTransactionInfo", "signedRenewalInfo"] {
            if let nested = data[key]?.stringValue, let json = StoredJWS.payload(nested), let id = json["originalTransactionId"]?.idString {
                return (id, json["appAccountToken"]?.stringValue?.lowercased())
            }
        }
        return (nil, nil)
    }

    /// Processes until nothing is due and this process's worker is done with what it claimed (tests and
    /// commands use it to wait for the inbox to settle).
    public func drainNotifications() async {
        while await processDueNotifications() > 0 || claims.inProgress > 0 {
            if claims.inProgress > 0 { try? await Task.sleep(for: .milliseconds(2)) }
        }
    }
}
