extension Schema {
    /// Migration 9: a stored notification's signed body (~9 KB with its signed transaction inside) moves to
    /// `notification_bodies`, written once and never updated, so the updates of a notification's life (claimed,
    /// applied, failed, replayed) rewrite a small row instead of three pages of body, and the worker's claim
    /// finds the oldest due notifications in `notifications_pending` (pending only, in claim order, covering)
    /// instead of sorting every pending row. `notifications_due` served only that claim. The index leads with
    /// `state` although it holds pending rows only: SQLite's planner (no statistics) then takes it over
    /// `notifications_by_state_received` and needs no sort.
    static let notificationBodiesMigration = SQLMigration(version: 9, name: "notification bodies apart, pending in claim order",
                                                          sql: notificationBodiesSQL(textType: "TEXT"),
                                                          postgresql: notificationBodiesSQL(textType: "TEXT COLLATE \"C\""))

    /// PostgreSQL's text columns are `COLLATE "C"` as migration 1's (`notification_uuid` is compared with theirs).
    private static func notificationBodiesSQL(textType: String) -> String {
        """
        CREATE TABLE notification_bodies (
            notification_uuid \(textType) PRIMARY KEY,
            jws \(textType) NOT NULL
        );
        INSERT INTO notification_bodies (notification_uuid, jws) SELECT notification_uuid, jws FROM notifications;
        ALTER TABLE notifications DROP COLUMN jws;
        DROP INDEX notifications_due;
        CREATE INDEX notifications_pending ON notifications(state, signed_date_ms, notification_uuid, next_attempt_ms)
            WHERE state = 'pending';
        """
    }
}
