import KakinCore

/// A RESCIND_CONSENT as stored (`consent_rescissions`, migration 15).
public struct ConsentRescission: Sendable, Hashable {
    public var notificationUUID: String
    public var appTransactionId: String?
    public var bundleId: String
    public var environment: String
    /// The notification's `signedDate`.
    public var rescindedAtMs: Int64
    /// Nil until Kakin knows whose app transaction it names.
    public var customerId: String?

    public init(notificationUUID: String, appTransactionId: String?, bundleId: String, environment: String, rescindedAtMs: Int64,
                customerId: String?) {
        self.notificationUUID = notificationUUID
        self.appTransactionId = appTransactionId
        self.bundleId = bundleId
        self.environment = environment
        self.rescindedAtMs = rescindedAtMs
        self.customerId = customerId
    }
}

/// A Finish Transaction call Kakin owes the App Store (`server_finish_requests`, migration 15).
public struct ServerFinishJob: Sendable, Hashable {
    public enum State: String, Sendable, CaseIterable {
        /// Waiting until `dueMs` (business time), then sent (again at `next_attempt_ms` after a failure).
        case pending
        /// The App Store finished it.
        case sent
        /// The app sent the transaction itself before it was due: the app finishes it.
        case appSent
        /// Refused by the App Store, or still failing after the retries.
        case failed
    }

    public var transactionId: String
    public var customerId: String
    public var bundleId: String
    public var environment: String
    public var productId: String
    public var dueMs: Int64
    public var state: State
    public var attempts: Int64
    public var lastError: String?
}

extension Records {
    // MARK: RESCIND_CONSENT

    /// Remembers whose app transaction `appTransactionId` is (the first customer seen with it keeps it), and places
    /// every RESCIND_CONSENT that named it before Kakin knew. Returns the rescissions placed now. Usually one statement:
    /// once linked it writes nothing (a rescission stored after the link is placed as it is stored), and the write that
    /// creates the link learns in the same statement whether any rescission waits for it, reading them only then (on
    /// PostgreSQL, SERIALIZABLE orders a link and a rescission written at once).
    public func linkAppTransaction(_ appTransactionId: String, customerId: String) throws -> [ConsentRescission] {
        let linked = try db.queryOne("""
            INSERT INTO app_transaction_links (app_transaction_id, customer_id, linked_at_ms) VALUES (?, ?, ?)
            ON CONFLICT (app_transaction_id) DO NOTHING
            RETURNING CASE WHEN EXISTS (SELECT 1 FROM consent_rescissions WHERE app_transaction_id = ? AND customer_id IS NULL)
                THEN 1 ELSE 0 END AS waiting
            """, [.text(appTransactionId), .text(customerId), .integer(nowMs), .text(appTransactionId)])
        guard linked?.int("waiting") == 1 else { return [] }
        let waiting = try db.query("""
            SELECT \(KakinStore.rescissionColumns) FROM consent_rescissions WHERE app_transaction_id = ? AND customer_id IS NULL
            """, [.text(appTransactionId)]).map(KakinStore.rescission)
        var placed: [ConsentRescission] = []
        for var r in waiting {
            try db.execute("UPDATE consent_rescissions SET customer_id = ? WHERE notification_uuid = ? AND customer_id IS NULL",
                           [.text(customerId), .text(r.notificationUUID)])
            r.customerId = customerId
            try setConsentRescinded(r)
            placed.append(r)
        }
        return placed
    }

    /// The customer an app transaction belongs to, if Kakin has seen it.
    public func appTransactionOwner(_ appTransactionId: String) throws -> String? {
        try db.queryOne("SELECT customer_id FROM app_transaction_links WHERE app_transaction_id = ?", [.text(appTransactionId)])?
            .string("customer_id")
    }

    /// Stores a RESCIND_CONSENT once per notification, placed at its app transaction's customer when known
    /// (`customerId`). Returns the stored rescission, or nil when this notification was stored before.
    public func storeConsentRescission(_ r: ConsentRescission) throws -> ConsentRescission? {
        let inserted = try db.execute("""
            INSERT INTO consent_rescissions (notification_uuid, app_transaction_id, bundle_id, environment, rescinded_at_ms, customer_id,
                received_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (notification_uuid) DO NOTHING
            """, [.text(r.notificationUUID), SQLValue(r.appTransactionId), .text(r.bundleId), .text(r.environment), .integer(r.rescindedAtMs),
                  SQLValue(r.customerId), .integer(nowMs)]) > 0
        guard inserted else { return nil }
        if r.customerId != nil { try setConsentRescinded(r) }
        return r
    }

    /// The customer's `consentRescinded` is the earliest rescission placed at them; with a timeline entry.
    func setConsentRescinded(_ r: ConsentRescission) throws {
        guard let customerId = r.customerId else { return }
        try db.execute("""
            UPDATE customers SET consent_rescinded_at_ms = ?
            WHERE customer_id = ? AND (consent_rescinded_at_ms IS NULL OR consent_rescinded_at_ms > ?)
            """, [.integer(r.rescindedAtMs), .text(customerId), .integer(r.rescindedAtMs)])
        try recordTimeline(customerId: customerId, kind: "consent.rescinded", reference: r.notificationUUID, detail: [
            "appTransactionId": .string(r.appTransactionId), "bundleId": .string(r.bundleId), "environment": .string(r.environment),
            "rescindedAt": .string(Timestamp.rfc3339(r.rescindedAtMs)),
        ])
    }

    // MARK: Server finish

    /// Inside the write that credited a consumable from a notification or a restore: Kakin finishes it at `dueMs`
    /// (business time) unless the app sends it first. Scheduling again changes nothing.
    @discardableResult
    public func scheduleServerFinish(transactionId: String, customerId: String, bundleId: String, environment: String, productId: String,
                                     dueMs: Int64) throws -> Bool {
        let inserted = try db.execute("""
            INSERT INTO server_finish_requests (transaction_id, customer_id, bundle_id, environment, product_id, due_ms, state, attempts,
                next_attempt_ms, created_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, 0, ?) ON CONFLICT (transaction_id) DO NOTHING
            """, [.text(transactionId), .text(customerId), .text(bundleId), .text(environment), .text(productId), .integer(dueMs),
                  .integer(nowMs)]) > 0
        if inserted {
            try recordTimeline(customerId: customerId, kind: "serverFinish.scheduled", reference: transactionId,
                               detail: ["productId": .string(productId), "dueAt": .string(Timestamp.rfc3339(dueMs))])
        }
        return inserted
    }

    /// The app sent the transaction itself: a pending server finish ends `appSent` (the app finishes it). Returns
    /// whether one was pending.
    @discardableResult
    public func serverFinishAppSent(transactionId: String) throws -> Bool {
        guard let row = try db.queryOne("SELECT customer_id FROM server_finish_requests WHERE transaction_id = ? AND state = 'pending'",
                                        [.text(transactionId)]),
              try KakinStore.finishJob(db, KakinStore.serverFinishTable, key: transactionId, state: ServerFinishJob.State.appSent.rawValue,
                                       attempted: false, error: nil, nowMs: nowMs) else { return false }
        try recordTimeline(customerId: row.string("customer_id"), kind: "serverFinish.appSent", reference: transactionId, detail: .null)
        return true
    }
}

extension KakinStore {
    static let rescissionColumns = "notification_uuid, app_transaction_id, bundle_id, environment, rescinded_at_ms, customer_id"

    static func rescission(_ row: SQLRow) -> ConsentRescission {
        ConsentRescission(notificationUUID: row.string("notification_uuid") ?? "", appTransactionId: row.string("app_transaction_id"),
                          bundleId: row.string("bundle_id") ?? "", environment: row.string("environment") ?? "",
                          rescindedAtMs: row.int("rescinded_at_ms") ?? 0, customerId: row.string("customer_id"))
    }

    /// The RESCIND_CONSENTs placed at a customer, newest first (the desk).
    public func consentRescissions(customerId: String, limit: Int = 20) async throws(KakinError) -> [ConsentRescission] {
        try await read { db in
            try db.query("SELECT \(Self.rescissionColumns) FROM consent_rescissions WHERE customer_id = ? ORDER BY rescinded_at_ms DESC LIMIT ?",
                         [.text(customerId), .integer(Int64(limit))]).map(Self.rescission)
        }
    }

    /// The RESCIND_CONSENTs placed at nobody yet, newest first (the desk): their app transaction is not one a signed
    /// transaction Kakin stored has named (or Apple sent none), so no customer is known for them.
    public func unplacedConsentRescissions(limit: Int) async throws(KakinError) -> [ConsentRescission] {
        try await read { db in
            try db.query("SELECT \(Self.rescissionColumns) FROM consent_rescissions WHERE customer_id IS NULL ORDER BY rescinded_at_ms DESC LIMIT ?",
                         [.integer(Int64(limit))]).map(Self.rescission)
        }
    }

    static let serverFinishTable = DurableJobTable(
        name: "server_finish_requests", key: "transaction_id",
        columns: "transaction_id, customer_id, bundle_id, environment, product_id, due_ms, state, attempts, last_error")

    /// Claims up to `limit` finishes due at `businessNowMs` (their `due_ms`) whose retry time `nowMs` has come, for
    /// `owner` until `nowMs + leaseMs`: a conditional UPDATE per row, so two workers never hold the same one.
    public func claimDueServerFinishes(businessNowMs: Int64, nowMs: Int64, owner: String, leaseMs: Int64,
                                       limit: Int) async throws(KakinError) -> [ServerFinishJob] {
        let t = Self.serverFinishTable
        let candidates = try await read { db in
            try db.query("""
                SELECT transaction_id FROM server_finish_requests
                WHERE state = 'pending' AND due_ms <= ? AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR lease_until_ms <= ?)
                ORDER BY due_ms, transaction_id LIMIT ?
                """, [.integer(businessNowMs), .integer(nowMs), .integer(nowMs), .integer(Int64(limit))]).compactMap { $0.string("transaction_id") }
        }
        guard !candidates.isEmpty else { return [] }
        return try await write { db in
            var claimed: [ServerFinishJob] = []
            for key in candidates {
                guard let row = try db.queryOne("""
                    UPDATE server_finish_requests SET lease_owner = ?, lease_until_ms = ?
                    WHERE transaction_id = ? AND state = 'pending' AND next_attempt_ms <= ? AND (lease_until_ms IS NULL OR lease_until_ms <= ?)
                    RETURNING \(t.columns)
                    """, [.text(owner), .integer(nowMs + leaseMs), .text(key), .integer(nowMs), .integer(nowMs)]) else { continue }
                claimed.append(Self.serverFinishJob(row))
            }
            return claimed
        }
    }

    public func retryServerFinish(_ job: ServerFinishJob, error: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await retryJob(Self.serverFinishTable, key: job.transactionId, error: error, nextAttemptMs: nextAttemptMs)
    }

    /// Ends a finish (`sent`, `failed`) and puts it in the customer's timeline; a row the app's own send ended
    /// meanwhile stays as it is.
    public func finishServerFinish(_ job: ServerFinishJob, state: ServerFinishJob.State, error: String?) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            guard try Self.finishJob(db, Self.serverFinishTable, key: job.transactionId, state: state.rawValue, attempted: true, error: error,
                                     nowMs: now) else { return }
            var detail: [String: JSONValue] = ["productId": .string(job.productId), "state": .string(state.rawValue)]
            if let error { detail["error"] = .string(String(error.prefix(500))) }
            try Self.recordEvent(db, customerId: job.customerId, atMs: now, kind: "serverFinish.\(state.rawValue)", reference: job.transactionId,
                                 detail: .object(detail))
        }
    }

    public func serverFinishRequest(transactionId: String) async throws(KakinError) -> ServerFinishJob? {
        try await read { db in
            try db.queryOne("SELECT \(Self.serverFinishTable.columns) FROM server_finish_requests WHERE transaction_id = ?",
                            [.text(transactionId)]).map(Self.serverFinishJob)
        }
    }

    static func serverFinishJob(_ row: SQLRow) -> ServerFinishJob {
        ServerFinishJob(
            transactionId: row.string("transaction_id") ?? "", customerId: row.string("customer_id") ?? "", bundleId: row.string("bundle_id") ?? "",
            environment: row.string("environment") ?? "", productId: row.string("product_id") ?? "", dueMs: row.int("due_ms") ?? 0,
            state: ServerFinishJob.State(rawValue: row.string("state") ?? "") ?? .failed, attempts: row.int("attempts") ?? 0,
            lastError: row.string("last_error"))
    }
}
