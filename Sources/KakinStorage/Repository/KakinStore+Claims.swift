import KakinCore

/// Work shared by several Kakin processes, claimed through the database so each piece is done by one of
/// them at a time: stored notifications (claimed in batches) and periodic jobs (named leases).
extension KakinStore {
    /// Claims up to `limit` pending notifications due at `nowMs`, oldest signed first, for `owner` until
    /// `leaseUntilMs`: a claim moves `next_attempt_ms` to the lease's end, so no other process sees them due
    /// meanwhile, and if `owner` dies they come due again when the lease runs out. Applying or failing a
    /// notification (`markNotification`, `failNotification`) ends the claim. On PostgreSQL, rows another
    /// process is claiming at this moment are skipped (`FOR UPDATE SKIP LOCKED`) rather than waited for.
    /// The claim (a write) touches the small rows only; their bodies are read afterwards, off the writer.
    public func claimDueNotifications(owner: String, nowMs: Int64, leaseUntilMs: Int64, limit: Int) async throws(KakinError) -> [InboxNotification] {
        let claimed = try await write { db in
            let skipLocked = db.dialect == .postgresql ? " FOR UPDATE SKIP LOCKED" : ""
            return try db.query("""
                UPDATE notifications SET next_attempt_ms = ?, claimed_by = ?
                WHERE notification_uuid IN (
                    SELECT notification_uuid FROM notifications WHERE state = 'pending' AND next_attempt_ms <= ?
                    ORDER BY signed_date_ms, notification_uuid LIMIT ?\(skipLocked))
                RETURNING notification_uuid, attempts, signed_date_ms
                """, [.integer(leaseUntilMs), .text(owner), .integer(nowMs), .integer(Int64(limit))])
            .sorted { ($0.int("signed_date_ms") ?? 0, $0.string("notification_uuid") ?? "") < ($1.int("signed_date_ms") ?? 0, $1.string("notification_uuid") ?? "") }
            .map { (uuid: $0.string("notification_uuid") ?? "", attempts: Int($0.int("attempts") ?? 0)) }
        }
        if claimed.isEmpty { return [] }
        let bodies = try await read { db in
            let placeholders = Array(repeating: "?", count: claimed.count).joined(separator: ", ")
            return Dictionary(try db.query("SELECT notification_uuid, jws FROM notification_bodies WHERE notification_uuid IN (\(placeholders))",
                                           claimed.map { .text($0.uuid) })
                .map { ($0.string("notification_uuid") ?? "", $0.string("jws") ?? "") }, uniquingKeysWith: { first, _ in first })
        }
        return claimed.map { InboxNotification(notificationUUID: $0.uuid, jws: bodies[$0.uuid] ?? "", attempts: $0.attempts) }
    }

    /// Takes the lease `name` for `owner` until `untilMs` when it is free (never taken, or run out at
    /// `nowMs`) or already `owner`'s. Returns whether `owner` holds it now.
    public func takeLease(_ name: String, owner: String, nowMs: Int64, untilMs: Int64) async throws(KakinError) -> Bool {
        try await write { db in
            try db.execute("""
                INSERT INTO leases (name, owner, until_ms) VALUES (?, ?, ?)
                ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
                WHERE leases.until_ms <= ? OR leases.owner = excluded.owner
                """, [.text(name), .text(owner), .integer(untilMs), .integer(nowMs)]) == 1
        }
    }

    /// Moves the end of `owner`'s lease `name` (later: keep others off for a while; `nowMs`: hand it back).
    /// Nothing happens when someone else holds it.
    public func setLeaseEnd(_ name: String, owner: String, untilMs: Int64) async throws(KakinError) {
        try await write { db in
            try db.execute("UPDATE leases SET until_ms = ? WHERE name = ? AND owner = ?", [.integer(untilMs), .text(name), .text(owner)])
        }
    }
}
