import KakinCore

/// A stored App Store notification waiting for (or done with) processing.
public struct InboxNotification: Sendable, Hashable {
    public var notificationUUID: String
    public var jws: String
    public var attempts: Int
}

/// A notification's life: `pending` (shown as *received* before its first attempt and *retrying* after a
/// failed one) → `applied` or `ignored`; or `dead` once it failed `attemptsMax` times or can never apply as
/// it is. A replay (support desk) puts any of them back to `pending` with a fresh attempt budget.
public enum NotificationState: String, Sendable, CaseIterable {
    /// Stored, not yet processed (or failed and due again at `next_attempt_ms`).
    case pending
    /// Processed: its transaction and renewal info are stored and their effects applied.
    case applied
    /// Stored and acknowledged but nothing to apply (TEST, summaries, types Kakin doesn't act on).
    case ignored
    /// Given up on: never retried again until replayed. Counted in `/metrics`, listed on `/admin/notifications`.
    case dead
}

extension KakinStore {
    /// Stores a verified notification durably: its state in `notifications`, its signed body once in
    /// `notification_bodies` (never updated). Returns false for a duplicate `notificationUUID` (which is
    /// acknowledged and ignored by the caller).
    public func storeNotification(_ n: NotificationPayload, jws: String, source: String) async throws(KakinError) -> Bool {
        let now = clock.nowMs()
        return try await write { db in
            let isNew = try db.execute("""
                INSERT INTO notifications (notification_uuid, notification_type, subtype, signed_date_ms, environment, bundle_id,
                    received_at_ms, source, state, attempts, next_attempt_ms)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', 0, 0) ON CONFLICT (notification_uuid) DO NOTHING
                """, [.text(n.notificationUUID), .text(n.notificationType.rawValue), SQLValue(n.subtype?.rawValue),
                      .integer(n.signedDate), SQLValue(n.environment?.rawValue), SQLValue(n.bundleId), .integer(now),
                      .text(source)]) > 0
            if isNew {
                try db.execute("INSERT INTO notification_bodies (notification_uuid, jws) VALUES (?, ?)", [.text(n.notificationUUID), .text(jws)])
            }
            return isNew
        }
    }

    public func pendingNotificationCount() async throws(KakinError) -> Int {
        try await read { db in Int(try db.queryOne("SELECT COUNT(*) AS n FROM notifications WHERE state = 'pending'", [])?.int("n") ?? 0) }
    }

    public func markNotification(_ uuid: String, state: NotificationState, customerId: String?, originalTransactionId: String?) async throws(KakinError) {
        try await transaction { r in try r.markNotification(uuid, state: state, customerId: customerId, originalTransactionId: originalTransactionId) }
    }

    /// Records a failed processing attempt: the notification stays pending and is retried at `nextAttemptMs`,
    /// or (`dead`) is given up on until someone replays it. The original transaction and app account token it
    /// carries (read from its stored payload by the caller) link it to its customer even though it never applied.
    public func failNotification(_ uuid: String, error: String, nextAttemptMs: Int64, dead: Bool = false,
                                 originalTransactionId: String? = nil, appAccountToken: String? = nil) async throws(KakinError) {
        try await transaction { r in
            _ = try r.failNotification(uuid, error: error, nextAttemptMs: nextAttemptMs, dead: dead, originalTransactionId: originalTransactionId,
                                       appAccountToken: appAccountToken)
        }
    }

    /// Named progress markers (e.g. how far Notification History has been read).
    public func syncValue(_ name: String) async throws(KakinError) -> String? {
        try await read { db in try db.queryOne("SELECT value FROM sync_state WHERE name = ?", [.text(name)])?.string("value") }
    }

    public func setSyncValue(_ name: String, _ value: String) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in
            try db.execute("""
                INSERT INTO sync_state (name, value, updated_ms) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms
                """, [.text(name), .text(value), .integer(now)])
        }
    }
}

extension Records {
    /// A notification is done with: `applied` (its facts stored and applied, in the same write) or `ignored`.
    public func markNotification(_ uuid: String, state: NotificationState, customerId: String?, originalTransactionId: String?) throws {
        precondition(state == .applied || state == .ignored, "a notification is done with as applied or ignored")
        let changed = try db.execute("""
            UPDATE notifications SET state = ?, applied_at_ms = ?, attempts = attempts + 1, last_error = NULL,
                customer_id = COALESCE(?, customer_id), original_transaction_id = COALESCE(?, original_transaction_id)
            WHERE notification_uuid = ?
            """, [.text(state.rawValue), .integer(nowMs), SQLValue(customerId), SQLValue(originalTransactionId), .text(uuid)])
        precondition(changed == 1, "only a stored notification is marked")
        if let customerId {
            try recordTimeline(customerId: customerId, kind: "notification.\(state.rawValue)", reference: uuid, detail: .null)
        }
    }
}

extension Records {
    /// Records a failed processing attempt (see `KakinStore.failNotification`); answers the customer the notification
    /// is about, when known.
    public func failNotification(_ uuid: String, error: String, nextAttemptMs: Int64, dead: Bool,
                                 originalTransactionId: String?, appAccountToken: String?) throws -> String? {
        let row = try db.queryOne("""
            UPDATE notifications SET attempts = attempts + 1, last_error = ?, next_attempt_ms = ?, state = ?,
                original_transaction_id = COALESCE(original_transaction_id, ?),
                customer_id = COALESCE(customer_id, (SELECT customer_id FROM original_links WHERE original_transaction_id = ?),
                                       (SELECT customer_id FROM customers WHERE app_account_token = ?))
            WHERE notification_uuid = ? RETURNING customer_id
            """, [.text(String(error.prefix(500))), .integer(nextAttemptMs),
                  .text(dead ? NotificationState.dead.rawValue : NotificationState.pending.rawValue),
                  SQLValue(originalTransactionId), SQLValue(originalTransactionId), SQLValue(appAccountToken), .text(uuid)])
        precondition(row != nil, "only a stored notification fails")
        return row?.string("customer_id")
    }
}
