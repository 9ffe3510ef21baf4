import KakinCore

/// A Set App Account Token call Kakin owes the App Store (table `app_account_token_requests`, migration 8).
public struct AppAccountTokenJob: Sendable, Hashable {
    public enum State: String, Sendable, CaseIterable {
        /// Waiting to be sent (again at `next_attempt_ms`).
        case pending
        /// Apple set the token: later signed transactions of the purchase carry it.
        case sent
        /// Apple refused it, or it kept failing.
        case failed
    }

    public var originalTransactionId: String
    /// The customer's token (lowercase UUID), as Apple should carry it.
    public var appAccountToken: String
    public var customerId: String
    public var bundleId: String
    public var environment: String
    public var state: State
    public var attempts: Int64
    public var lastError: String?
}

extension KakinStore {
    static let appAccountTokenTable = DurableJobTable(
        name: "app_account_token_requests", key: "original_transaction_id",
        columns: "original_transaction_id, app_account_token, customer_id, bundle_id, environment, state, attempts, last_error")

    /// Inside a purchase's write: the purchase `tx` (which carries no `appAccountToken`) was just linked to
    /// `customer`, so Apple should be told the customer's token. A row per original transaction: scheduling it
    /// again changes nothing unless the token changed (a transfer), which makes it pending again. Due at once.
    static func scheduleAppAccountToken(_ db: SQLConnection, _ tx: TransactionPayload, customer: Customer, nowMs: Int64) throws {
        let token = customer.appAccountToken.lowercased()
        let changed = try db.execute("""
            INSERT INTO app_account_token_requests (original_transaction_id, app_account_token, customer_id, bundle_id, environment, state,
                attempts, next_attempt_ms, created_at_ms)
            VALUES (?, ?, ?, ?, ?, 'pending', 0, 0, ?)
            ON CONFLICT (original_transaction_id) DO UPDATE SET app_account_token = excluded.app_account_token,
                customer_id = excluded.customer_id, state = 'pending', attempts = 0, next_attempt_ms = 0, last_error = NULL,
                finished_at_ms = NULL, lease_owner = NULL, lease_until_ms = NULL
            WHERE app_account_token_requests.app_account_token <> excluded.app_account_token
            """, [.text(tx.originalTransactionId), .text(token), .text(customer.customerId), .text(tx.bundleId), .text(tx.environment.rawValue),
                  .integer(nowMs)]) > 0
        if changed {
            try recordEvent(db, customerId: customer.customerId, atMs: nowMs, kind: "appAccountToken.scheduled", reference: tx.originalTransactionId,
                            detail: ["appAccountToken": .string(token), "transactionId": .string(tx.transactionId)])
        }
    }

    /// Claims up to `limit` due calls for `owner` until `nowMs + leaseMs` (see `DurableJobTable`).
    public func claimDueAppAccountTokens(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [AppAccountTokenJob] {
        try await claimDueJobs(Self.appAccountTokenTable, nowMs: nowMs, owner: owner, leaseMs: leaseMs, limit: limit, Self.appAccountTokenJob)
    }

    /// An attempt failed; tried again at `nextAttemptMs` unless the row was rescheduled with another token meanwhile.
    public func retryAppAccountToken(_ job: AppAccountTokenJob, error: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await retryJob(Self.appAccountTokenTable, key: job.originalTransactionId, matching: [("app_account_token", .text(job.appAccountToken))],
                           error: error, nextAttemptMs: nextAttemptMs)
    }

    /// Ends a call (`sent`, `failed`) and puts it in the customer's timeline. A row rescheduled with another token
    /// since the claim stays pending (the new token still has to be sent).
    public func finishAppAccountToken(_ job: AppAccountTokenJob, state: AppAccountTokenJob.State, error: String?) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            guard try Self.finishJob(db, Self.appAccountTokenTable, key: job.originalTransactionId,
                                     matching: [("app_account_token", .text(job.appAccountToken))], state: state.rawValue, attempted: true,
                                     error: error, nowMs: now) else { return }
            var detail: [String: JSONValue] = ["appAccountToken": .string(job.appAccountToken), "state": .string(state.rawValue)]
            if let error { detail["error"] = .string(String(error.prefix(500))) }
            try Self.recordEvent(db, customerId: job.customerId, atMs: now, kind: "appAccountToken.\(state.rawValue)",
                                 reference: job.originalTransactionId, detail: .object(detail))
        }
    }

    public func appAccountTokenRequest(originalTransactionId: String) async throws(KakinError) -> AppAccountTokenJob? {
        try await read { db in
            try db.queryOne("SELECT \(Self.appAccountTokenTable.columns) FROM app_account_token_requests WHERE original_transaction_id = ?",
                            [.text(originalTransactionId)]).map(Self.appAccountTokenJob)
        }
    }

    static func appAccountTokenJob(_ row: SQLRow) -> AppAccountTokenJob {
        AppAccountTokenJob(
            originalTransactionId: row.string("original_transaction_id") ?? "", appAccountToken: row.string("app_account_token") ?? "",
            customerId: row.string("customer_id") ?? "", bundleId: row.string("bundle_id") ?? "", environment: row.string("environment") ?? "",
            state: AppAccountTokenJob.State(rawValue: row.string("state") ?? "") ?? .failed, attempts: row.int("attempts") ?? 0,
            lastError: row.string("last_error"))
    }
}
