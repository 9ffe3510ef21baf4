import AppStoreSecurity
import KakinCore
import KakinEvents
import KakinStorage

/// App Store Server Notifications V2: verify, store durably, acknowledge, then apply in the background through the
/// one ingest path. Apple retries only what we refuse, so a notification is acknowledged once it is on disk and
/// Kakin retries its own processing failures; duplicates (same `notificationUUID`) are acknowledged and ignored.
public struct NotificationInbox: Sendable {
    let store: any NotificationRepository
    let ingest: Ingest
    let metrics: Metrics
    let logger: Logger
    let apps: [String: AppSettings]
    /// Schedules processing retries in real time, whatever clock the business logic runs on.
    let retryClock: any Clock
    let attemptsMax: Int
    let claims: NotificationClaims
    /// The worker applying stored notifications (woken when one arrives).
    public let worker: BackgroundLoop
    /// Apple's 2026 additions: RESCIND_CONSENT (`Apple2026Ingest`).
    let apple2026: Apple2026Ingest
    /// EXTERNAL_PURCHASE_TOKEN notifications (the notification's JSON): `ExternalPurchaseReporter.unreported`.
    var externalPurchaseToken: (@Sendable (JSONValue) async throws(KakinError) -> Void)? = nil

    /// Verifies and stores one signed notification (from Apple's push or from Notification History).
    /// Returns whether it was new.
    @discardableResult
    public func receive(_ jws: String, source: String) async throws(KakinError) -> Bool {
        let notification = try ingest.verifyNotification(jws)
        let isNew = try await store.storeNotification(notification, jws: jws, source: source)
        if isNew {
            metrics.increment(.notificationsReceived)
            worker.wake()
        }
        return isNew
    }

    /// Applies one stored notification: its signed transaction and renewal info are verified (once) and go through
    /// the ingest, and the notification is marked applied in the same database transaction.
    func apply(_ stored: InboxNotification) async throws(KakinError) {
        // The stored payload (verified when it was stored) is decoded once: it holds the nested JWS, ~5 KB to read.
        let json = StoredJWS.payload(stored.jws)
        let n = json.flatMap { try? NotificationPayload(json: $0) }
        if let n, n.isRescindConsent {
            try await apple2026.applyRescindConsent(n)
            return metrics.increment(.notificationsApplied)
        }
        if let json, let n, n.notificationType == .externalPurchaseToken, let externalPurchaseToken {
            // Apple's external purchase tokens (issue 17): UNREPORTED makes Kakin report the token at once.
            if n.subtype == .unreported { try await externalPurchaseToken(json) }
            try await store.markNotification(stored.notificationUUID, state: .applied, customerId: nil, originalTransactionId: nil)
            return
        }
        guard let n, n.notificationType != .test,
              let data = n.data, data.signedTransactionInfo != nil || data.signedRenewalInfo != nil else {
            try await store.markNotification(stored.notificationUUID, state: .ignored, customerId: nil, originalTransactionId: nil)
            return
        }
        let renewalInfo = try data.signedRenewalInfo.flatMap { (jws: String) throws(KakinError) in try ingest.verifyRenewalInfo(jws, for: .notification) }
        let transaction = try data.signedTransactionInfo.map { (jws: String) throws(KakinError) in try ingest.verifyTransaction(jws) }
        let consumption = n.notificationType == .consumptionRequest ? transaction.map { consumptionJob(n, $0.payload) } : nil
        let context = IngestContext(notification: .init(notificationUUID: stored.notificationUUID, consumption: consumption,
                                                        firstAttemptMs: retryClock.nowMs()))
        _ = try await ingest.apply(transaction: transaction, renewalInfo: renewalInfo, path: .notification, context: context)
        metrics.increment(.notificationsApplied)
    }

    /// Replays one notification now (its effects are idempotent: the desk's replay) and lets the worker run; answers it
    /// as it is after that pass.
    public func replay(_ uuid: String, actor: String) async throws(KakinError) -> StoredNotification {
        guard try await store.replayNotification(uuid, actor: actor) else { throw KakinError(.notificationNotFound) }
        await processDue()
        guard let n = try await store.notification(uuid) else { throw KakinError(.notificationNotFound) }
        return n
    }

    /// Replays every dead notification (up to `limit`) with a fresh attempt budget and lets the worker run. Returns how many.
    public func replayDead(actor: String, limit: Int) async throws(KakinError) -> Int {
        let count = try await store.replayDeadNotifications(actor: actor, limit: limit)
        await processDue()
        return count
    }

    /// The answer a CONSUMPTION_REQUEST needs (sent by the App Store jobs when the app's customers consented).
    func consumptionJob(_ n: NotificationPayload, _ tx: TransactionPayload) -> ConsumptionJob {
        let consented = apps[tx.bundleId]?.consumptionInformation?.customerConsented == true
        return ConsumptionJob(
            notificationUUID: n.notificationUUID, transactionId: tx.transactionId, productId: tx.productId, bundleId: tx.bundleId,
            environment: (n.environment ?? tx.environment).rawValue, customerId: nil, reason: n.data?.consumptionRequestReason,
            requestedAtMs: n.signedDate, deadlineMs: n.signedDate + ConsumptionInformation.answerWindowMs,
            state: consented ? .pending : .notConsented)
    }

    /// Claims the notifications due now (other processes on the same database take others) and processes
    /// them; failures are rescheduled with backoff or, per `NotificationRetryPolicy`, moved to `dead` (kept,
    /// counted, listed, replayable) — never dropped. Returns how many were attempted. A full batch wakes the
    /// worker again at once: more may be due (a backlog drains at the worker's pace, not one batch per poll).
    @discardableResult
    public func processDue() async -> Int {
        let attempted = await claims.pass { await processClaimed() }
        if attempted == claims.batchMax { worker.wake() }
        return attempted
    }

    private func processClaimed() async -> Int {
        let due: [InboxNotification]
        do {
            let now = retryClock.nowMs()
            due = try await store.claimDueNotifications(owner: claims.owner, nowMs: now, leaseUntilMs: now + claims.leaseMs, limit: claims.batchMax)
        } catch {
            logger.error("notification inbox unreadable", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return 0
        }
        precondition(due.count <= claims.batchMax, "a claim never returns more than its batch")
        // A batch's notifications are applied side by side: their writes share the writer's commits instead of
        // each waiting for a commit of its own. Arrival order never changes the outcome (see docs/architecture.md).
        await withTaskGroup(of: Void.self) { group in
            for n in due { group.addTask { await self.processClaimed(n) } }
        }
        return due.count
    }

    /// Applies one claimed notification; a failure is rescheduled with backoff or, per `NotificationRetryPolicy`,
    /// moved to `dead`.
    private func processClaimed(_ n: InboxNotification) async {
        do {
            try await apply(n)
        } catch {
            metrics.increment(.notificationsFailed)
            let delayMs = NotificationRetryPolicy.retryDelayMs(afterAttempts: n.attempts + 1)
            let dead = NotificationRetryPolicy.isDead(after: error.kind, attempts: n.attempts + 1, attemptsMax: attemptsMax)
            if dead { metrics.increment(.notificationsDead) }
            logger.log(dead ? .error : .warning, dead ? "notification processing failed; dead until replayed" : "notification processing failed; will retry", [
                "notification.uuid": .string(n.notificationUUID), "error.id": .string(error.kind.id),
                "error.detail": .string(error.detail ?? error.message), "retry.inMs": .int(delayMs),
            ])
            let about = Self.subject(of: n.jws)
            let (uuid, description, next, events) = (n.notificationUUID, error.description, retryClock.nowMs() + delayMs, ingest.events)
            let told = try? await store.transaction { r in
                let customer = try r.failNotification(uuid, error: description, nextAttemptMs: next, dead: dead,
                                                      originalTransactionId: about.originalTransactionId, appAccountToken: about.appAccountToken)
                // A notification given up on is something the customer's backend should know (it may be a missing credit).
                guard dead, let customer else { return 0 }
                return try events.record(r, customerId: customer, facts: [EventDraft(type: .notificationDead, data: [
                    "notificationUUID": .string(uuid), "originalTransactionId": .string(about.originalTransactionId), "error": .string(description),
                ])])
            }
            if (told ?? 0) > 0 { events.wake() }
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
    public func drain() async {
        while await processDue() > 0 || claims.inProgress > 0 {
            if claims.inProgress > 0 { try? await Task.sleep(for: .milliseconds(2)) }
        }
    }
}
