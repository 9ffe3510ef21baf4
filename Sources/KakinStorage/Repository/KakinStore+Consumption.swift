import KakinCore

/// One CONSUMPTION_REQUEST and Kakin's answer to it (table `consumption_requests`, migration 7).
public struct ConsumptionJob: Sendable, Hashable {
    public enum State: String, Sendable, CaseIterable {
        /// Waiting to be sent (again at `next_attempt_ms`).
        case pending
        /// Apple accepted the answer.
        case sent
        /// The app's configuration does not say the customer consented: nothing is sent.
        case notConsented
        /// Apple's 12 hours passed before an answer got through.
        case expired
        /// Apple refused the answer (a 4xx other than 429).
        case failed
    }

    public var notificationUUID: String
    public var transactionId: String
    public var productId: String
    public var bundleId: String
    public var environment: String
    public var customerId: String?
    /// Apple's `consumptionRequestReason`.
    public var reason: String?
    /// The notification's `signedDate` (Apple time).
    public var requestedAtMs: Int64
    /// `requestedAtMs` + 12 hours (Apple time).
    public var deadlineMs: Int64
    public var state: State
    public var attempts: Int64
    /// The body as first computed (nil until the first attempt); every retry sends it unchanged.
    public var requestVersion: Int?
    public var requestBody: String?
    public var lastError: String?

    public init(notificationUUID: String, transactionId: String, productId: String, bundleId: String, environment: String,
                customerId: String?, reason: String?, requestedAtMs: Int64, deadlineMs: Int64, state: State = .pending,
                attempts: Int64 = 0, requestVersion: Int? = nil, requestBody: String? = nil, lastError: String? = nil) {
        self.notificationUUID = notificationUUID
        self.transactionId = transactionId
        self.productId = productId
        self.bundleId = bundleId
        self.environment = environment
        self.customerId = customerId
        self.reason = reason
        self.requestedAtMs = requestedAtMs
        self.deadlineMs = deadlineMs
        self.state = state
        self.attempts = attempts
        self.requestVersion = requestVersion
        self.requestBody = requestBody
        self.lastError = lastError
    }
}

/// What the ledger and the customer record say about one purchase (turned into `ConsumptionFacts` with the
/// catalog's product type by the caller).
public struct ConsumptionLedgerFacts: Sendable, Hashable {
    public var customerId: String?
    /// Kakin applied the transaction (`applied_transactions`).
    public var delivered: Bool
    public var movements: [PaidCoinMovement]
    public var lifetimePurchasedMilli: [String: Int64]
    public var lifetimeRefundedMilli: [String: Int64]
    public var customerCreatedAtMs: Int64?
    public var appAccountToken: String?
}

extension KakinStore {
    static let consumptionColumns = """
        notification_uuid, transaction_id, product_id, bundle_id, environment, customer_id, reason, requested_at_ms, deadline_ms,
        state, attempts, request_version, request_body, last_error
        """

    static let consumptionTable = DurableJobTable(name: "consumption_requests", key: "notification_uuid", columns: consumptionColumns)

    /// Claims up to `limit` pending answers due at `nowMs` for `owner` until `nowMs + leaseMs` (see `DurableJobTable`).
    public func claimDueConsumptionAnswers(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [ConsumptionJob] {
        try await claimDueJobs(Self.consumptionTable, nowMs: nowMs, owner: owner, leaseMs: leaseMs, limit: limit, Self.consumptionJob)
    }

    /// Keeps the body computed at the first attempt, so every retry sends the same figures.
    public func storeConsumptionRequestBody(_ uuid: String, version: Int, body: String) async throws(KakinError) {
        try await write { db in
            try db.execute("""
                UPDATE consumption_requests SET request_version = ?, request_body = ? WHERE notification_uuid = ? AND request_body IS NULL
                """, [.integer(Int64(version)), .text(body), .text(uuid)])
        }
    }

    /// An attempt failed and may be retried at `nextAttemptMs`; the lease is released.
    public func retryConsumptionAnswer(_ uuid: String, error: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await retryJob(Self.consumptionTable, key: uuid, error: error, nextAttemptMs: nextAttemptMs)
    }

    /// Ends a job (`sent`, `expired`, `failed`) and puts it in the customer's timeline.
    public func finishConsumptionAnswer(_ job: ConsumptionJob, state: ConsumptionJob.State, attempted: Bool, error: String?) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            let changed = try Self.finishJob(db, Self.consumptionTable, key: job.notificationUUID, state: state.rawValue, attempted: attempted,
                                             error: error, nowMs: now)
            guard changed else { return }
            var detail: [String: JSONValue] = ["notificationUUID": .string(job.notificationUUID), "state": .string(state.rawValue)]
            if let body = job.requestBody, state == .sent {
                detail["version"] = .int(job.requestVersion)
                detail["request"] = (try? JSONParser.parse(body)) ?? .string(body)
            }
            if let error { detail["error"] = .string(String(error.prefix(500))) }
            try Self.recordEvent(db, customerId: job.customerId, atMs: now, kind: "consumption.\(state.rawValue)", reference: job.transactionId,
                                 detail: .object(detail))
        }
    }

    public func consumptionAnswers(transactionId: String) async throws(KakinError) -> [ConsumptionJob] {
        try await read { db in
            try db.query("SELECT \(Self.consumptionColumns) FROM consumption_requests WHERE transaction_id = ? ORDER BY requested_at_ms, notification_uuid",
                         [.text(transactionId)]).map(Self.consumptionJob)
        }
    }

    static func consumptionJob(_ row: SQLRow) -> ConsumptionJob {
        ConsumptionJob(
            notificationUUID: row.string("notification_uuid") ?? "", transactionId: row.string("transaction_id") ?? "",
            productId: row.string("product_id") ?? "", bundleId: row.string("bundle_id") ?? "", environment: row.string("environment") ?? "",
            customerId: row.string("customer_id"), reason: row.string("reason"), requestedAtMs: row.int("requested_at_ms") ?? 0,
            deadlineMs: row.int("deadline_ms") ?? 0, state: ConsumptionJob.State(rawValue: row.string("state") ?? "") ?? .failed,
            attempts: row.int("attempts") ?? 0, requestVersion: row.int("request_version").map { Int($0) },
            requestBody: row.string("request_body"), lastError: row.string("last_error"))
    }

    /// The ledger's side of a purchase's consumption: whether it was applied, the customer's paid-coin
    /// movements (ledger order), lifetime purchase and refund prices, and the customer record.
    public func consumptionLedgerFacts(transactionId: String, customerId: String?) async throws(KakinError) -> ConsumptionLedgerFacts {
        try await read { db in
            let applied = try db.queryOne("SELECT customer_id FROM applied_transactions WHERE transaction_id = ?", [.text(transactionId)])
            let customer = applied?.string("customer_id") ?? customerId
            var facts = ConsumptionLedgerFacts(customerId: customer, delivered: applied != nil, movements: [], lifetimePurchasedMilli: [:],
                                               lifetimeRefundedMilli: [:])
            guard let customer else { return facts }
            facts.movements = try db.query(Self.paidCoinMovementSelect + " AND l.customer_id = ? ORDER BY l.seq LIMIT ?",
                                           [.text(customer), .integer(Int64(Self.consumptionLedgerRowsMax))]).compactMap(Self.paidCoinMovement)
            // `Schema.purchaseLedgerKinds` repeats the partial index's condition.
            for row in try db.query("""
                SELECT kind, currency, SUM(price_milli) AS total FROM ledger_entries
                WHERE customer_id = ? AND \(Schema.purchaseLedgerKinds) AND price_milli IS NOT NULL AND currency IS NOT NULL
                GROUP BY kind, currency
                """, [.text(customer)]) {
                guard let currency = row.string("currency"), let total = row.int("total") else { continue }
                // Refund entries carry the negated price, reversals the price again.
                if row.string("kind") == "purchase" {
                    facts.lifetimePurchasedMilli[currency, default: 0] += total
                } else {
                    facts.lifetimeRefundedMilli[currency, default: 0] -= total
                }
            }
            if let c = try Self.loadCustomer(db, customer) {
                facts.customerCreatedAtMs = c.createdAtMs
                facts.appAccountToken = c.appAccountToken
            }
            return facts
        }
    }
}

extension Records {
    /// Records the answer a CONSUMPTION_REQUEST needs (in the notification's own write). Idempotent by
    /// `notificationUUID`, so a notification applied twice schedules one answer. Returns whether it is new.
    /// - Parameter nextAttemptMs: when the job is first due (real time, like its retries).
    @discardableResult
    public func scheduleConsumptionAnswer(_ job: ConsumptionJob, nextAttemptMs: Int64) throws -> Bool {
        let inserted = try db.execute("""
            INSERT INTO consumption_requests (notification_uuid, transaction_id, product_id, bundle_id, environment, customer_id,
                reason, requested_at_ms, deadline_ms, state, attempts, next_attempt_ms, finished_at_ms, created_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) ON CONFLICT (notification_uuid) DO NOTHING
            """, [.text(job.notificationUUID), .text(job.transactionId), .text(job.productId), .text(job.bundleId),
                  .text(job.environment), SQLValue(job.customerId), SQLValue(job.reason), .integer(job.requestedAtMs),
                  .integer(job.deadlineMs), .text(job.state.rawValue), .integer(nextAttemptMs),
                  job.state == .pending ? .null : .integer(nowMs), .integer(nowMs)]) > 0
        if inserted {
            try recordTimeline(customerId: job.customerId, kind: "consumption.requested", reference: job.transactionId,
                               detail: ["notificationUUID": .string(job.notificationUUID), "reason": .string(job.reason),
                                        "state": .string(job.state.rawValue)])
        }
        return inserted
    }
}
