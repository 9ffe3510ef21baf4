import AppStoreClient
import KakinCore
import KakinStorage

/// Calls Kakin owes the App Store and makes in the background, as durable jobs: answers to refund requests
/// (`ConsumptionAnswers.swift`) and app account tokens for purchases linked outside the app
/// (`AppAccountTokens.swift`). Each kind has a table of its own in the same shape (`DurableJobTable`): a row per
/// call, claimed with a lease by one process at a time, retried with backoff, ended in the customer's timeline.
/// One worker (`appStoreJobsWorker`) runs every kind; a restart resumes from the tables.
public struct AppStoreJobs: Sendable {
    let store: any StoreJobRepository
    let access: AppStoreAccess
    let apps: [String: AppSettings]
    let metrics: Metrics
    let logger: Logger
    let clock: any Clock
    let retryClock: any Clock
    /// The worker making these calls (woken when a job is scheduled, polling for retries).
    public let worker: BackgroundLoop

    /// How long a claimed job stays with this process (covers one call with the client's own retries).
    static let appStoreJobLeaseMs: Int64 = 120_000
    /// Identifies this process's leases.
    static let appStoreJobLeaseOwner: String = {
        var rng = SystemRandomNumberGenerator()
        return "kakin-" + String(rng.next(), radix: 16)
    }()

    /// Retries of a failed call: 30 s doubling to at most 30 min.
    static func appStoreJobRetryDelayMs(afterAttempts attempts: Int64) -> Int64 {
        min(1_800_000, 30_000 << min(max(attempts - 1, 0), 10))
    }

    /// A failed App Store call worth trying again later: what Apple says is retryable, a refused API token (the
    /// key may be fixed), a call cut short by a shutdown.
    static func mayRetry(_ error: AppStoreServerAPIError) -> Bool {
        error.isRetryable || error.kind == .unauthorized || error.kind == .cancelled
    }

    /// The worker's pass: every kind of job due now. Returns how many were attempted.
    @discardableResult
    public func processDue() async -> Int {
        await processDueConsumptionAnswers() + processDueAppAccountTokens() + processDueServerFinishes()
    }

    /// When a failed job is due again: the backoff after its attempts, or later if Apple said so (429).
    func nextAttemptMs(afterAttempts attempts: Int64, retryAfterMs: Int64?) -> Int64 {
        let next = retryClock.nowMs() + Self.appStoreJobRetryDelayMs(afterAttempts: attempts)
        return max(next, retryAfterMs ?? next)
    }

    /// Claims one due job at a time (so no lease runs out while earlier ones are sent) and runs it, up to
    /// `limit`. A storage failure leaves the job to its lease: it is claimed again when the lease runs out.
    /// - Parameter claim: the store's claim of that kind (`nowMs`, `owner`, `leaseMs`, `limit`).
    func runDueJobs<Job: Sendable>(_ kind: String, limit: Int,
                                   claim: (Int64, String, Int64, Int) async throws(KakinError) -> [Job],
                                   run: (Job) async throws(KakinError) -> Void) async -> Int {
        var attempted = 0
        while attempted < limit {
            let job: Job
            do {
                guard let next = try await claim(retryClock.nowMs(), Self.appStoreJobLeaseOwner, Self.appStoreJobLeaseMs, 1).first else { break }
                job = next
            } catch {
                logger.error("\(kind) unreadable", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
                break
            }
            attempted += 1
            do {
                try await run(job)
            } catch {
                logger.warning("\(kind) not recorded; will retry", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            }
        }
        return attempted
    }
    // MARK: Refund requests (CONSUMPTION_REQUEST)

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

    /// Sends every answer due now, up to `limit` (part of the worker's pass; tests call it to wait for the
    /// answers). Returns how many were attempted.
    @discardableResult
    public func processDueConsumptionAnswers(limit: Int = AppStoreJobs.batchMax) async -> Int {
        await runDueJobs("consumption answers", limit: limit, claim: store.claimDueConsumptionAnswers, run: answer)
    }

    func answer(_ claimed: ConsumptionJob) async throws(KakinError) {
        var job = claimed
        if clock.nowMs() >= job.deadlineMs {
            metrics.increment(.consumptionAnswersNotSent)
            return try await store.finishConsumptionAnswer(job, state: .expired, attempted: false,
                                                           error: job.lastError ?? "Apple's 12 hours passed before an answer was sent")
        }
        guard let app = apps[job.bundleId], let policy = app.consumptionInformation, policy.customerConsented else {
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
            client = try access.connection().client(for: job.bundleId)
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
    func consumptionRequest(for job: ConsumptionJob, app: AppSettings,
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
        return (2, ConsumptionInformation.request(facts, sampleContentProvided: policy.sampleContentProvided,
                                                  refundPreference: policy.refundPreference).json)
    }
    // MARK: App account tokens

    /// Purchases made outside the app (an offer code redeemed in the App Store, a purchase on the App Store page)
    /// carry no `appAccountToken`. When Kakin links one to a customer (by its original transaction, or when the app
    /// presents it), it asks Apple to put the customer's token on the purchase with Set App Account Token, so every
    /// later signed transaction of it (renewals, refunds) names the customer by itself. The link's write schedules
    /// the call as a durable job (`app_account_token_requests`, see `AppStoreJobs.swift`) when the App Store Server
    /// API is configured for the app; the background worker sends it and retries what Apple may accept later.

    /// Sends every app account token due now, up to `limit` (part of the worker's pass; tests call it to wait).
    @discardableResult
    public func processDueAppAccountTokens(limit: Int = AppStoreJobs.batchMax) async -> Int {
        await runDueJobs("app account tokens", limit: limit, claim: store.claimDueAppAccountTokens, run: setAppAccountToken)
    }

    func setAppAccountToken(_ job: AppAccountTokenJob) async throws(KakinError) {
        let client: AppStoreServerAPIClient
        do {
            client = try access.connection().client(for: job.bundleId)
        } catch {
            return try await retryAppAccountToken(job, error.message, retryAfterMs: nil)
        }
        do throws(AppStoreServerAPIError) {
            try await client.setAppAccountToken(originalTransactionId: job.originalTransactionId, appAccountToken: job.appAccountToken,
                                                environment: AppStoreEnvironment(rawValue: job.environment))
        } catch {
            if Self.mayRetry(error) { return try await retryAppAccountToken(job, error.description, retryAfterMs: error.retryAfterMs) }
            metrics.increment(.appAccountTokensNotSet)
            logger.warning("app account token refused by the App Store", ["transaction.originalId": .string(job.originalTransactionId),
                                                                          "error.detail": .string(error.description)])
            return try await store.finishAppAccountToken(job, state: .failed, error: error.description)
        }
        metrics.increment(.appAccountTokensSet)
        logger.info("app account token set", ["transaction.originalId": .string(job.originalTransactionId), "customer.id": .string(job.customerId)])
        try await store.finishAppAccountToken(job, state: .sent, error: nil)
    }

    func retryAppAccountToken(_ job: AppAccountTokenJob, _ error: String, retryAfterMs: Int64?) async throws(KakinError) {
        guard job.attempts + 1 < Self.appAccountTokenAttemptsMax else {
            metrics.increment(.appAccountTokensNotSet)
            return try await store.finishAppAccountToken(job, state: .failed, error: error)
        }
        let next = nextAttemptMs(afterAttempts: job.attempts + 1, retryAfterMs: retryAfterMs)
        logger.warning("app account token not set; will retry", ["transaction.originalId": .string(job.originalTransactionId),
                                                                 "error.detail": .string(error), "retry.inMs": .int(next - retryClock.nowMs())])
        try await store.retryAppAccountToken(job, error: error, nextAttemptMs: next)
    }}
