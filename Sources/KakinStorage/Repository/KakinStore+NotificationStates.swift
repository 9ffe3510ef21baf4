import KakinCore

/// How the support desk names a notification's state: `pending` splits into *received* (never attempted) and
/// *retrying* (failed at least once, due again); the others are the stored states.
public enum InboxState: String, Sendable, CaseIterable {
    case received, retrying, applied, ignored, dead

    /// The SQL condition selecting this state (no parameters).
    var condition: String {
        switch self {
        case .received: return "state = 'pending' AND attempts = 0"
        case .retrying: return "state = 'pending' AND attempts > 0"
        case .applied: return "state = 'applied'"
        case .ignored: return "state = 'ignored'"
        case .dead: return "state = 'dead'"
        }
    }

    init(stored: String, attempts: Int) {
        switch stored {
        case NotificationState.pending.rawValue: self = attempts == 0 ? .received : .retrying
        case NotificationState.applied.rawValue: self = .applied
        case NotificationState.dead.rawValue: self = .dead
        default: self = .ignored
        }
    }
}

/// One stored notification, as the support desk shows it.
public struct StoredNotification: Sendable, Hashable {
    public var notificationUUID: String
    public var notificationType: String
    public var subtype: String?
    public var signedDateMs: Int64
    public var environment: String?
    public var bundleId: String?
    public var receivedAtMs: Int64
    /// `push` (Apple's POST) or `history` (recovered from Notification History).
    public var source: String
    public var jws: String
    public var state: InboxState
    public var attempts: Int
    public var nextAttemptMs: Int64
    public var lastError: String?
    public var appliedAtMs: Int64?
    public var originalTransactionId: String?
    public var customerId: String?
}

/// Depth of the inbox's unfinished states, for `/metrics`.
public struct InboxDepth: Sendable, Hashable {
    public var state: InboxState
    public var count: Int64
    public var oldestReceivedMs: Int64?
}

/// Where a listing continues: after the (receivedAtMs, notificationUUID) of the previous page's last row.
public struct NotificationCursor: Sendable, Hashable {
    public var receivedAtMs: Int64
    public var notificationUUID: String

    public init(receivedAtMs: Int64, notificationUUID: String) {
        self.receivedAtMs = receivedAtMs
        self.notificationUUID = notificationUUID
    }

    /// Opaque to callers: base64url of `n:<ms>:<uuid>`.
    public var token: String { Base64.urlEncode(Array("n:\(receivedAtMs):\(notificationUUID)".utf8)) }

    public init?(token: String) {
        guard let bytes = Base64.decode(token), let text = String(validating: bytes, as: UTF8.self), text.hasPrefix("n:") else { return nil }
        let parts = text.dropFirst(2).split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2, let ms = Int64(parts[0]), !parts[1].isEmpty else { return nil }
        self.init(receivedAtMs: ms, notificationUUID: String(parts[1]))
    }
}

extension KakinStore {
    static let notificationColumns = """
        notification_uuid, notification_type, subtype, signed_date_ms, environment, bundle_id, received_at_ms, source,
        (SELECT jws FROM notification_bodies b WHERE b.notification_uuid = notifications.notification_uuid) AS jws, state, attempts, next_attempt_ms, last_error, applied_at_ms, original_transaction_id, customer_id
        """

    static func storedNotification(_ r: SQLRow) -> StoredNotification {
        let attempts = Int(r.int("attempts") ?? 0)
        return StoredNotification(
            notificationUUID: r.string("notification_uuid") ?? "", notificationType: r.string("notification_type") ?? "",
            subtype: r.string("subtype"), signedDateMs: r.int("signed_date_ms") ?? 0, environment: r.string("environment"),
            bundleId: r.string("bundle_id"), receivedAtMs: r.int("received_at_ms") ?? 0, source: r.string("source") ?? "",
            jws: r.string("jws") ?? "", state: InboxState(stored: r.string("state") ?? "", attempts: attempts), attempts: attempts,
            nextAttemptMs: r.int("next_attempt_ms") ?? 0, lastError: r.string("last_error"), appliedAtMs: r.int("applied_at_ms"),
            originalTransactionId: r.string("original_transaction_id"), customerId: r.string("customer_id"))
    }

    /// One page of the inbox in one state, newest received first.
    public func notifications(in state: InboxState, limit: Int, after cursor: NotificationCursor?) async throws(KakinError) -> [StoredNotification] {
        try await read { db in
            var sql = "SELECT \(Self.notificationColumns) FROM notifications WHERE \(state.condition)"
            var params: [SQLValue] = []
            if let cursor {
                sql += " AND (received_at_ms < ? OR (received_at_ms = ? AND notification_uuid < ?))"
                params += [.integer(cursor.receivedAtMs), .integer(cursor.receivedAtMs), .text(cursor.notificationUUID)]
            }
            sql += " ORDER BY received_at_ms DESC, notification_uuid DESC LIMIT ?"
            params.append(.integer(Int64(limit)))
            return try db.query(sql, params).map(Self.storedNotification)
        }
    }

    public func notification(_ uuid: String) async throws(KakinError) -> StoredNotification? {
        try await read { db in
            try db.queryOne("SELECT \(Self.notificationColumns) FROM notifications WHERE notification_uuid = ?", [.text(uuid)])
                .map(Self.storedNotification)
        }
    }

    /// The notifications about one subscription or purchase chain, newest signed first.
    public func notifications(originalTransactionId: String, limit: Int) async throws(KakinError) -> [StoredNotification] {
        try await read { db in
            try db.query("""
                SELECT \(Self.notificationColumns) FROM notifications WHERE original_transaction_id = ?
                ORDER BY signed_date_ms DESC, notification_uuid DESC LIMIT ?
                """, [.text(originalTransactionId), .integer(Int64(limit))]).map(Self.storedNotification)
        }
    }

    /// A customer's notifications, newest received first.
    public func notifications(customerId: String, limit: Int) async throws(KakinError) -> [StoredNotification] {
        try await read { db in
            try db.query("""
                SELECT \(Self.notificationColumns) FROM notifications WHERE customer_id = ?
                ORDER BY signed_date_ms DESC, notification_uuid DESC LIMIT ?
                """, [.text(customerId), .integer(Int64(limit))]).map(Self.storedNotification)
        }
    }

    /// Counts and oldest arrival of the states that still need work (received, retrying) or a person (dead).
    public func inboxDepth() async throws(KakinError) -> [InboxDepth] {
        try await read { db in
            let rows = try db.query("""
                SELECT state, CASE WHEN attempts = 0 THEN 0 ELSE 1 END AS tried, COUNT(*) AS n, MIN(received_at_ms) AS oldest
                FROM notifications WHERE state IN ('pending', 'dead') GROUP BY state, CASE WHEN attempts = 0 THEN 0 ELSE 1 END
                """, [])
            var depth: [InboxState: InboxDepth] = [:]
            for r in rows {
                let state = InboxState(stored: r.string("state") ?? "", attempts: Int(r.int("tried") ?? 0))
                var d = depth[state] ?? InboxDepth(state: state, count: 0, oldestReceivedMs: nil)
                d.count += r.int("n") ?? 0
                if let o = r.int("oldest") { d.oldestReceivedMs = min(d.oldestReceivedMs ?? o, o) }
                depth[state] = d
            }
            return [InboxState.received, .retrying, .dead].map { depth[$0] ?? InboxDepth(state: $0, count: 0, oldestReceivedMs: nil) }
        }
    }

    /// Puts a notification back in the inbox with a fresh attempt budget (after its cause was fixed, or to
    /// re-apply one that was applied: every effect is idempotent). Recorded in its customer's timeline.
    /// - Returns: false when no notification has this UUID.
    public func replayNotification(_ uuid: String, actor: String) async throws(KakinError) -> Bool {
        let now = clock.nowMs()
        return try await write { db in
            guard let row = try db.queryOne("""
                UPDATE notifications SET state = 'pending', attempts = 0, next_attempt_ms = 0, last_error = NULL
                WHERE notification_uuid = ? RETURNING customer_id, notification_type
                """, [.text(uuid)]) else { return false }
            try Self.recordEvent(db, customerId: row.string("customer_id"), atMs: now, kind: "admin.notificationReplayed", reference: uuid,
                                 detail: ["by": .string(actor), "notificationType": .string(row.string("notification_type"))])
            return true
        }
    }

    /// Replays up to `limit` dead notifications, oldest first. Returns how many.
    public func replayDeadNotifications(actor: String, limit: Int) async throws(KakinError) -> Int {
        let now = clock.nowMs()
        return try await write { db in
            let rows = try db.query("""
                UPDATE notifications SET state = 'pending', attempts = 0, next_attempt_ms = 0, last_error = NULL
                WHERE notification_uuid IN (SELECT notification_uuid FROM notifications WHERE state = 'dead' ORDER BY received_at_ms LIMIT ?)
                RETURNING notification_uuid, customer_id, notification_type
                """, [.integer(Int64(limit))])
            for r in rows {
                try Self.recordEvent(db, customerId: r.string("customer_id"), atMs: now, kind: "admin.notificationReplayed",
                                     reference: r.string("notification_uuid"),
                                     detail: ["by": .string(actor), "notificationType": .string(r.string("notification_type"))])
            }
            return rows.count
        }
    }
}
