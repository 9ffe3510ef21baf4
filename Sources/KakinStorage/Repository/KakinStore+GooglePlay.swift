import KakinCore

/// An acknowledgement Kakin owes Google Play (`play_acknowledgements`, a `DurableJobTable`): acknowledge the token, and
/// consume it when it is a consumable, before Play's 3-day limit (`deadlineMs`) refunds it.
public struct PlayAcknowledgementJob: Sendable, Hashable {
    public enum State: String, Sendable {
        case pending, done, expired, failed
    }

    public var purchaseToken: String
    public var packageName: String
    public var productId: String
    public var kind: PlayTokenRow.Kind
    public var consume: Bool
    public var customerId: String?
    public var deadlineMs: Int64
    public var attempts: Int
}

/// A Play order whose charge (`orders.get`) Kakin has not read yet.
public struct PlayOrderChargeRead: Sendable, Hashable {
    public var orderId: String
    public var packageName: String
    public var customerId: String
    public var attempts: Int
}

extension KakinStore {
    /// Orders of a customer whose charge is unread and due, oldest due first, tried fewer than `attemptsMax` times (an
    /// order kept for nobody yet waits for its owner). Not leased: two processes reading the same order store the same answer.
    public func duePlayOrderCharges(nowMs: Int64, attemptsMax: Int, limit: Int) async throws(KakinError) -> [PlayOrderChargeRead] {
        try await read { db in
            try db.query("""
                SELECT o.order_id AS order_id, t.package_name AS package_name, o.customer_id AS customer_id, o.charge_attempts AS attempts
                FROM play_orders o JOIN play_tokens t ON t.purchase_token = o.purchase_token
                WHERE o.charge IS NULL AND o.customer_id IS NOT NULL AND o.charge_next_ms <= ? AND o.charge_attempts < ? ORDER BY o.charge_next_ms, o.order_id LIMIT ?
                """, [.integer(nowMs), .integer(Int64(attemptsMax)), .integer(Int64(limit))]).compactMap { r in
                guard let orderId = r.string("order_id"), let packageName = r.string("package_name"), let customerId = r.string("customer_id") else {
                    return nil
                }
                return PlayOrderChargeRead(orderId: orderId, packageName: packageName, customerId: customerId,
                                           attempts: Int(r.int("attempts") ?? 0))
            }
        }
    }

    /// Counts a failed read of an order's charge; the next one is due at `nextAttemptMs`.
    public func retryPlayOrderCharge(_ orderId: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await write { db in
            try db.execute("UPDATE play_orders SET charge_attempts = charge_attempts + 1, charge_next_ms = ? WHERE order_id = ? AND charge IS NULL",
                           [.integer(nextAttemptMs), .text(orderId)])
        }
    }

    static let playAcknowledgementTable = DurableJobTable(
        name: "play_acknowledgements", key: "purchase_token",
        columns: "purchase_token, package_name, product_id, kind, consume, customer_id, deadline_ms, attempts")

    public func claimDuePlayAcknowledgements(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [PlayAcknowledgementJob] {
        try await claimDueJobs(Self.playAcknowledgementTable, nowMs: nowMs, owner: owner, leaseMs: leaseMs, limit: limit) { row in
            PlayAcknowledgementJob(
                purchaseToken: row.string("purchase_token") ?? "", packageName: row.string("package_name") ?? "",
                productId: row.string("product_id") ?? "", kind: PlayTokenRow.Kind(rawValue: row.string("kind") ?? "") ?? .product,
                consume: (row.int("consume") ?? 0) != 0, customerId: row.string("customer_id"), deadlineMs: row.int("deadline_ms") ?? 0,
                attempts: Int(row.int("attempts") ?? 0))
        }
    }

    public func retryPlayAcknowledgement(_ token: String, error: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await retryJob(Self.playAcknowledgementTable, key: token, error: error, nextAttemptMs: nextAttemptMs)
    }

    /// Ends a job and puts it in the customer's timeline (`play.acknowledgement.done` …).
    public func finishPlayAcknowledgement(_ job: PlayAcknowledgementJob, state: PlayAcknowledgementJob.State, error: String?) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            guard try Self.finishJob(db, Self.playAcknowledgementTable, key: job.purchaseToken, state: state.rawValue, attempted: true,
                                     error: error, nowMs: now) else { return }
            var detail: [String: JSONValue] = ["productId": .string(job.productId), "consume": .bool(job.consume), "state": .string(state.rawValue)]
            if let error { detail["error"] = .string(String(error.prefix(500))) }
            if let customerId = job.customerId {
                try Self.recordEvent(db, customerId: customerId, atMs: now, kind: "play.acknowledgement.\(state.rawValue)",
                                     reference: job.purchaseToken, detail: .object(detail))
            }
        }
    }

    /// How many acknowledgement jobs are in each state (`/metrics`).
    public func playAcknowledgementCounts() async throws(KakinError) -> [String: Int] {
        try await jobCounts(Self.playAcknowledgementTable)
    }

    /// A token's acknowledgement job state (support and tests).
    public func playAcknowledgementState(_ token: String) async throws(KakinError) -> PlayAcknowledgementJob.State? {
        try await read { db in
            try db.queryOne("SELECT state FROM play_acknowledgements WHERE purchase_token = ?", [.text(token)])?
                .string("state").flatMap(PlayAcknowledgementJob.State.init(rawValue:))
        }
    }
}

/// A stored RTDN (`play_notifications`): the `DeveloperNotification` as Pub/Sub delivered it, by `messageId`.
public struct PlayNotificationJob: Sendable, Hashable {
    public enum State: String, Sendable {
        case pending, applied, ignored, dead
    }

    public var messageId: String
    public var packageName: String
    public var body: JSONValue
    public var attempts: Int
}

extension KakinStore {
    static let playNotificationTable = DurableJobTable(name: "play_notifications", key: "message_id",
                                                       columns: "message_id, package_name, body, attempts")

    /// Stores a push once per `messageId`, due now. False: a redelivery of one stored before (acknowledged, ignored).
    public func receivePlayNotification(messageId: String, packageName: String, purchaseToken: String?, body: JSONValue,
                                        publishedAtMs: Int64?) async throws(KakinError) -> Bool {
        let now = clock.nowMs()
        return try await write { db in
            try db.execute("""
                INSERT INTO play_notifications (message_id, package_name, purchase_token, body, published_at_ms, received_at_ms, state, attempts,
                    next_attempt_ms)
                VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, 0) ON CONFLICT (message_id) DO NOTHING
                """, [.text(messageId), .text(packageName), SQLValue(purchaseToken), .text(body.jsonString), SQLValue(publishedAtMs),
                      .integer(now)]) > 0
        }
    }

    public func claimDuePlayNotifications(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [PlayNotificationJob] {
        try await claimDueJobs(Self.playNotificationTable, nowMs: nowMs, owner: owner, leaseMs: leaseMs, limit: limit) { row in
            PlayNotificationJob(messageId: row.string("message_id") ?? "", packageName: row.string("package_name") ?? "",
                                body: (try? JSONParser.parse(row.string("body") ?? "null")) ?? .null, attempts: Int(row.int("attempts") ?? 0))
        }
    }

    public func retryPlayNotification(_ messageId: String, error: String, nextAttemptMs: Int64) async throws(KakinError) {
        try await retryJob(Self.playNotificationTable, key: messageId, error: error, nextAttemptMs: nextAttemptMs)
    }

    /// Ends a stored notification outside an apply (`ignored`, `dead`).
    public func finishPlayNotification(_ messageId: String, state: PlayNotificationJob.State, error: String?) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            _ = try Self.finishJob(db, Self.playNotificationTable, key: messageId, state: state.rawValue, attempted: true, error: error, nowMs: now)
        }
    }

    /// How many stored notifications are in each state (tests, `/metrics`).
    public func playNotificationCounts() async throws(KakinError) -> [String: Int] {
        try await jobCounts(Self.playNotificationTable)
    }
}

extension Records {
    /// Marks a stored notification applied in the write that applied it, naming the customer.
    public func markPlayNotificationApplied(_ messageId: String, customerId: String?) throws {
        try db.execute("""
            UPDATE play_notifications SET state = 'applied', customer_id = ?, attempts = attempts + 1, finished_at_ms = ?, lease_owner = NULL,
                lease_until_ms = NULL WHERE message_id = ? AND state = 'pending'
            """, [SQLValue(customerId), .integer(nowMs), .text(messageId)])
    }
}

extension KakinStore {
    /// A token as Kakin last read it, outside a write.
    public func playTokenRow(_ purchaseToken: String) async throws(KakinError) -> PlayTokenRow? {
        try await read { db in try Records(db: db, nowMs: 0, ids: self.ids).playToken(purchaseToken) }
    }
}

/// One order of a Play chain as Kakin last read it (`play_orders`): the desk's order lookup and customer page.
public struct PlayOrderRow: Sendable, Hashable {
    public var orderId: String
    public var purchaseToken: String
    public var chainId: String
    public var customerId: String?
    public var readAtMs: Int64
    /// What Play took back of it (`{"atMs", "refund"}`), if anything.
    public var revocation: JSONValue?
}

extension KakinStore {
    /// The chain an order (`GPA.…`, a renewal `..N` included) or a purchase token belongs to, when Kakin read it.
    public func playChainId(orderIdOrToken key: String) async throws(KakinError) -> String? {
        try await read { db in
            if let row = try db.queryOne("SELECT chain_id FROM play_orders WHERE order_id = ?", [.text(key)]) { return row.string("chain_id") }
            return try db.queryOne("SELECT chain_id FROM play_tokens WHERE purchase_token = ?", [.text(key)])?.string("chain_id")
        }
    }

    /// A chain's orders: its first, then renewals `..0`, `..1`, … (at most `limit`).
    public func playChainOrders(_ chainId: String, limit: Int) async throws(KakinError) -> [PlayOrderRow] {
        try await read { db in
            try db.query("""
                SELECT order_id, purchase_token, chain_id, customer_id, read_at_ms, revocation FROM play_orders WHERE chain_id = ?
                ORDER BY LENGTH(order_id), order_id LIMIT ?
                """, [.text(chainId), .integer(Int64(limit))]).map { row in
                PlayOrderRow(orderId: row.string("order_id") ?? "", purchaseToken: row.string("purchase_token") ?? "",
                             chainId: row.string("chain_id") ?? chainId, customerId: row.string("customer_id"), readAtMs: row.int("read_at_ms") ?? 0,
                             revocation: row.string("revocation").flatMap { try? JSONParser.parse($0) })
            }
        }
    }

    /// A customer's Play chains (their ids), newest read first (at most `limit`).
    public func playChains(customerId: String, limit: Int) async throws(KakinError) -> [String] {
        try await read { db in
            try db.query("""
                SELECT chain_id, MAX(read_at_ms) AS last_ms FROM play_tokens WHERE customer_id = ? GROUP BY chain_id ORDER BY last_ms DESC LIMIT ?
                """, [.text(customerId), .integer(Int64(limit))]).compactMap { $0.string("chain_id") }
        }
    }
}
