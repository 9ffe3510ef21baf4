import AppStoreClient
import KakinCore
import KakinStorage

/// Refund requests (CONSUMPTION_REQUEST): when an app's configuration says its customers consented
/// (`apps[].consumptionInformation.customerConsented`), Kakin answers Apple with Send Consumption
/// Information within Apple's 12 hours, with figures from its ledger: whether the purchase was delivered and,
/// for coins, how much of the purchase's paid coins are used (first in, first out); with the deprecated V1
/// body also the customer's lifetime spend and refunds and account age. Play time is never known, so never
/// provided.
///
/// The notification's apply path records a durable job (`consumption_requests`, one per notification; see
/// `AppStoreJobs.swift`); the background worker claims due jobs with a lease, computes the body once, sends it,
/// and retries what Apple may accept later until the 12 hours are over. A restart resumes where the database says.
extension KakinApp {
    /// Records the answer a CONSUMPTION_REQUEST needs (the notification apply path's one call). Idempotent by
    /// `notificationUUID`, so a notification applied twice schedules one answer.
    func scheduleConsumptionAnswer(_ n: NotificationPayload, transaction tx: TransactionPayload, customerId: String?) async throws(KakinError) {
        let consented = appsByBundle[tx.bundleId]?.consumptionInformation?.customerConsented == true
        let job = ConsumptionJob(
            notificationUUID: n.notificationUUID, transactionId: tx.transactionId, productId: tx.productId, bundleId: tx.bundleId,
            environment: (n.environment ?? tx.environment).rawValue, customerId: customerId, reason: n.data?.consumptionRequestReason,
            requestedAtMs: n.signedDate, deadlineMs: n.signedDate + ConsumptionInformation.answerWindowMs,
            state: consented ? .pending : .notConsented)
        let isNew = try await store.scheduleConsumptionAnswer(job, nowMs: retryClock.nowMs())
        if isNew, consented { appStoreJobsWorker.wake() }
    }

    /// Sends every answer due now, up to `limit` (part of the worker's pass; tests call it to wait for the
    /// answers). Returns how many were attempted.
    @discardableResult
    public func processDueConsumptionAnswers(limit: Int = appStoreJobBatchMax) async -> Int {
        await runDueJobs("consumption answers", limit: limit, claim: store.claimDueConsumptionAnswers, run: answer)
    }

    func answer(_ claimed: ConsumptionJob) async throws(KakinError) {
        var job = claimed
        if clock.nowMs() >= job.deadlineMs {
            metrics.increment(.consumptionAnswersNotSent)
            return try await store.finishConsumptionAnswer(job, state: .expired, attempted: false,
                                                           error: job.lastError ?? "Apple's 12 hours passed before an answer was sent")
        }
        guard let app = appsByBundle[job.bundleId], let policy = app.consumptionInformation, policy.customerConsented else {
            return try await store.finishConsumptionAnswer(job, state: .notConsented, attempted: false, error: nil)
        }
        if job.requestBody == nil {
            let (version, body) = try await consumptionRequest(for: job, app: app, policy: policy)
            try await store.storeConsumptionRequestBody(job.notificationUUID, version: version, body: body.jsonString)
            job.requestVersion = version
            job.requestBody = body.jsonString
        }
        let client: AppStoreServerAPIClient
        do {
            client = try appStoreConnection().client(for: job.bundleId)
        } catch {
            return try await retry(job, error.message)
        }
        do {
            try await send(job, with: client)
        } catch {
            if Self.mayRetry(error) {
                return try await retry(job, error.description, retryAfterMs: error.retryAfterMs)
            }
            metrics.increment(.consumptionAnswersNotSent)
            logger.warning("consumption answer refused by the App Store", ["transaction.id": .string(job.transactionId),
                                                                           "error.detail": .string(error.description)])
            return try await store.finishConsumptionAnswer(job, state: .failed, attempted: true, error: error.description)
        }
        metrics.increment(.consumptionAnswersSent)
        logger.info("consumption information sent", ["transaction.id": .string(job.transactionId), "request": .string(job.requestBody ?? "")])
        try await store.finishConsumptionAnswer(job, state: .sent, attempted: true, error: nil)
    }

    /// Sends the stored body to the endpoint of its version, in the notification's environment.
    func send(_ job: ConsumptionJob, with client: AppStoreServerAPIClient) async throws(AppStoreServerAPIError) {
        let label = "PUT /inApps/…/transactions/consumption"
        guard let text = job.requestBody, let json = try? JSONParser.parse(text) else {
            throw AppStoreServerAPIError(kind: .invalidRequest, request: label, detail: "stored request body unreadable")
        }
        let environment = AppStoreEnvironment(rawValue: job.environment)
        do {
            if job.requestVersion == 1 {
                try await client.sendConsumptionData(transactionId: job.transactionId, try ConsumptionRequestV1(json: json), environment: environment)
            } else {
                try await client.sendConsumptionInformation(transactionId: job.transactionId, try ConsumptionRequest(json: json),
                                                            environment: environment)
            }
        } catch let error as AppStoreServerAPIError {
            throw error
        } catch {
            throw AppStoreServerAPIError(kind: .invalidRequest, request: label, detail: "stored request body unreadable")
        }
    }

    func retry(_ job: ConsumptionJob, _ error: String, retryAfterMs: Int64? = nil) async throws(KakinError) {
        let next = nextAttemptMs(afterAttempts: job.attempts + 1, retryAfterMs: retryAfterMs)
        logger.warning("consumption answer not sent; will retry", ["transaction.id": .string(job.transactionId), "error.detail": .string(error),
                                                                   "retry.inMs": .int(next - retryClock.nowMs())])
        try await store.retryConsumptionAnswer(job.notificationUUID, error: error, nextAttemptMs: next)
    }

    /// The body from the ledger, as the app's policy asks: V1 for consumables when configured (Apple's V1 takes
    /// nothing else), the current body otherwise.
    func consumptionRequest(for job: ConsumptionJob, app: Configuration.App,
                            policy: ConsumptionInformationPolicy) async throws(KakinError) -> (version: Int, body: JSONValue) {
        let ledger = try await store.consumptionLedgerFacts(transactionId: job.transactionId, customerId: job.customerId)
        let kind = app.catalog[job.productId]?.kind
        let facts = ConsumptionFacts(
            productKind: kind, delivered: ledger.delivered,
            coins: kind == .consumable ? PaidCoinLots.lot(of: job.transactionId, in: ledger.movements) : nil,
            lifetimePurchasedMilli: ledger.lifetimePurchasedMilli, lifetimeRefundedMilli: ledger.lifetimeRefundedMilli,
            accountAgeMs: ledger.customerCreatedAtMs.map { max(0, clock.nowMs() - $0) }, appAccountToken: ledger.appAccountToken)
        logger.info("consumption facts", ["transaction.id": .string(job.transactionId), "facts": facts.json])
        if policy.version == 1, kind == .consumable {
            return (1, ConsumptionInformation.requestV1(facts, sampleContentProvided: policy.sampleContentProvided).json)
        }
        return (2, ConsumptionInformation.request(facts, sampleContentProvided: policy.sampleContentProvided).json)
    }
}

extension AppStoreConnection {
    /// The client whose token names this app.
    func client(for bundleId: String) throws(KakinError) -> AppStoreServerAPIClient {
        guard let entry = clients.first(where: { $0.bundleId == bundleId }) else {
            throw KakinError(.appStoreAPINotConfigured, "The App Store Server API is not configured for \(bundleId).")
        }
        return entry.client
    }
}
