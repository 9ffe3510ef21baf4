import AppStoreClient
import KakinCore
import KakinStorage

/// Purchases made outside the app (an offer code redeemed in the App Store, a purchase on the App Store page)
/// carry no `appAccountToken`. When Kakin links one to a customer (by its original transaction, or when the app
/// presents it), it asks Apple to put the customer's token on the purchase with Set App Account Token, so every
/// later signed transaction of it (renewals, refunds) names the customer by itself. The link's write schedules
/// the call as a durable job (`app_account_token_requests`, see `AppStoreJobs.swift`) when the App Store Server
/// API is configured for the app; the background worker sends it and retries what Apple may accept later.
extension KakinApp {
    /// Tries before a call that keeps failing is given up (30 s doubling to 30 min: about 8 hours).
    static let appAccountTokenAttemptsMax: Int64 = 24

    /// Whether linking a purchase of this app should tell Apple the customer's token.
    func setsAppAccountTokens(bundleId: String) -> Bool {
        appStoreAPI.withLock { $0?.clients.contains { $0.bundleId == bundleId } ?? false }
    }

    /// Sends every app account token due now, up to `limit` (part of the worker's pass; tests call it to wait).
    @discardableResult
    public func processDueAppAccountTokens(limit: Int = appStoreJobBatchMax) async -> Int {
        await runDueJobs("app account tokens", limit: limit, claim: store.claimDueAppAccountTokens, run: setAppAccountToken)
    }

    func setAppAccountToken(_ job: AppAccountTokenJob) async throws(KakinError) {
        let client: AppStoreServerAPIClient
        do {
            client = try appStoreConnection().client(for: job.bundleId)
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
    }
}
