import AppStoreClient
import KakinCore
import KakinStorage

// MARK: Server finish (`serverFinish`)

/// Seed 000's worst case: a consumable paid for, credited from the App Store's notification, and never finished
/// because the app died before it reached Kakin; the App Store keeps it in the device's queue and the app may show
/// "still processing" for a purchase long done. With `apps[].serverFinish.afterSeconds`, the write that credits a
/// consumable from a notification or a restore schedules a durable job (`server_finish_requests`, migration 15)
/// due that long after (business time: the simulator's clock in local mode); the app's own send of the transaction
/// (409) ends it as `appSent`. When due, the worker calls Finish Transaction (App Store Server API 1.20), which
/// takes the transaction out of StoreKit's unfinished queue, and records it in the customer's timeline; failures are
/// retried like the other App Store jobs and given up after `serverFinishAttemptsMax` tries.
extension AppStoreJobs {
    /// Finishes every transaction due now, up to `limit` (part of the worker's pass; local mode runs it when the
    /// simulated clock moves; tests call it to wait). Returns how many were attempted.
    @discardableResult
    public func processDueServerFinishes(limit: Int = AppStoreJobs.batchMax) async -> Int {
        let (store, business) = (store, clock)
        return await runDueJobs("server finishes", limit: limit, claim: { (now, owner, lease, n) async throws(KakinError) -> [ServerFinishJob] in
            try await store.claimDueServerFinishes(businessNowMs: business.nowMs(), nowMs: now, owner: owner, leaseMs: lease, limit: n)
        }, run: finishAtAppStore)
    }

    func finishAtAppStore(_ job: ServerFinishJob) async throws(KakinError) {
        let client: AppStoreServerAPIClient
        do {
            client = try access.connection().client(for: job.bundleId)
        } catch {
            return try await retryServerFinish(job, error.message, retryAfterMs: nil)
        }
        do throws(AppStoreServerAPIError) {
            try await client.finishTransaction(transactionId: job.transactionId, environment: AppStoreEnvironment(rawValue: job.environment))
        } catch {
            if Self.mayRetry(error) { return try await retryServerFinish(job, error.description, retryAfterMs: error.retryAfterMs) }
            metrics.increment(.serverFinishesNotSent)
            logger.warning("Finish Transaction refused by the App Store", ["transaction.id": .string(job.transactionId),
                                                                           "error.detail": .string(error.description)])
            return try await store.finishServerFinish(job, state: .failed, error: error.description)
        }
        metrics.increment(.serverFinishesSent)
        logger.info("transaction finished by the server", ["transaction.id": .string(job.transactionId), "customer.id": .string(job.customerId)])
        try await store.finishServerFinish(job, state: .sent, error: nil)
    }

    func retryServerFinish(_ job: ServerFinishJob, _ error: String, retryAfterMs: Int64?) async throws(KakinError) {
        guard job.attempts + 1 < Self.serverFinishAttemptsMax else {
            metrics.increment(.serverFinishesNotSent)
            return try await store.finishServerFinish(job, state: .failed, error: error)
        }
        let next = nextAttemptMs(afterAttempts: job.attempts + 1, retryAfterMs: retryAfterMs)
        logger.warning("Finish Transaction not sent; will retry", ["transaction.id": .string(job.transactionId), "error.detail": .string(error),
                                                                   "retry.inMs": .int(next - retryClock.nowMs())])
        try await store.retryServerFinish(job, error: error, nextAttemptMs: next)
    }
}
