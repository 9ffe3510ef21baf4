import AppStoreClient
import KakinCore
import KakinStorage

/// Calls Kakin owes the App Store and makes in the background, as durable jobs: answers to refund requests
/// (`ConsumptionAnswers.swift`) and app account tokens for purchases linked outside the app
/// (`AppAccountTokens.swift`). Each kind has a table of its own in the same shape (`DurableJobTable`): a row per
/// call, claimed with a lease by one process at a time, retried with backoff, ended in the customer's timeline.
/// One worker (`appStoreJobsWorker`) runs every kind; a restart resumes from the tables.
extension KakinApp {
    /// How long a claimed job stays with this process (covers one call with the client's own retries).
    static let appStoreJobLeaseMs: Int64 = 120_000
    public static let appStoreJobBatchMax = 20
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
    public func processDueAppStoreJobs() async -> Int {
        await processDueConsumptionAnswers() + processDueAppAccountTokens()
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
}
