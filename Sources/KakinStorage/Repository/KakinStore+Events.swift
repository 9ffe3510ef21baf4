import KakinCore

/// One event as stored: its contract JSON (`payload`, the exact bytes a webhook sends and the feed answers) and the
/// columns the feed, the deliveries and retention select on. `KakinEvents` builds these; storage knows no event types.
public struct OutboxEventRow: Sendable, Hashable {
    public var eventId: String
    public var customerId: String
    public var sequence: Int64
    public var type: String
    public var createdAtMs: Int64
    public var environment: String?
    public var bundleId: String?
    public var payload: String

    public init(eventId: String, customerId: String, sequence: Int64, type: String, createdAtMs: Int64,
                environment: String?, bundleId: String?, payload: String) {
        self.eventId = eventId
        self.customerId = customerId
        self.sequence = sequence
        self.type = type
        self.createdAtMs = createdAtMs
        self.environment = environment
        self.bundleId = bundleId
        self.payload = payload
    }
}

/// A place in the feed (`GET /v1/events?after=`), opaque to clients: the writing transaction (PostgreSQL's id;
/// 0 on SQLite) and the row's position. `start` is before every event.
public struct EventFeedCursor: Sendable, Hashable, Comparable {
    public var txid: Int64
    public var position: Int64

    public static let start = EventFeedCursor(txid: 0, position: 0)

    public init(txid: Int64, position: Int64) {
        self.txid = txid
        self.position = position
    }

    public var token: String { Base64.urlEncode(Array("ev:\(txid):\(position)".utf8)) }

    /// Nil for anything this server did not hand out.
    public init?(token: String) {
        guard token.utf8.count <= 128, let bytes = Base64.decode(token), let text = String(validating: bytes, as: UTF8.self),
              text.hasPrefix("ev:") else { return nil }
        let parts = text.dropFirst(3).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let t = Int64(parts[0]), let p = Int64(parts[1]), t >= 0, p >= 0 else { return nil }
        txid = t
        position = p
    }

    public static func < (a: EventFeedCursor, b: EventFeedCursor) -> Bool { (a.txid, a.position) < (b.txid, b.position) }
}

/// One page of the feed: the events' JSON in feed order and where the next page starts.
public struct EventFeedPage: Sendable {
    public var events: [OutboxEventRow]
    /// After the last event returned, or after the last one looked at when a type filter skipped the rest of the
    /// window; the cursor asked for when nothing new has committed yet.
    public var nextCursor: EventFeedCursor

    public init(events: [OutboxEventRow], nextCursor: EventFeedCursor) {
        self.events = events
        self.nextCursor = nextCursor
    }
}

extension KakinStore {
    /// Feed pages: 1…500 events (the contract).
    public static let feedLimitRange = 1...500

    // MARK: Appending (inside the writer's transaction)

    /// Appends `rows` (sequences `lastSequence + 1…`, in order) to `customerId`'s events inside the caller's write, where
    /// `lastSequence` was read (`statusInputs`' `version`, `lastEventSequence`): two statements added to `batch`, neither
    /// needing the other's answer. The customer's `outbox_heads` row moves from `lastSequence` to the last row's sequence
    /// (with `statusView`, what the events told, when given) only if it still is at `lastSequence`: a change of one
    /// customer's events on another connection fails one of the two SERIALIZABLE writes on PostgreSQL, and SQLite has one
    /// writer, so the guard always holds (`WriteBatch` checks the count) and the numbers, rolled back with the transaction,
    /// have no gap and no duplicate. Then all the rows in one INSERT; the unique `(customer_id, sequence)` backs the guard.
    public static func appendEvents(to batch: inout WriteBatch, customerId: String, lastSequence: Int64, rows: [OutboxEventRow],
                                    statusView: String?) {
        precondition((1...eventsPerAppendMax).contains(rows.count), "events per append must be 1...\(eventsPerAppendMax)")
        precondition(lastSequence >= 0, "sequences count from 1")
        let last = lastSequence + Int64(rows.count)
        batch.add("""
            INSERT INTO outbox_heads (customer_id, last_sequence, status_view) VALUES (?, ?, ?)
            ON CONFLICT (customer_id) DO UPDATE SET last_sequence = excluded.last_sequence,
                status_view = COALESCE(excluded.status_view, outbox_heads.status_view)
            WHERE outbox_heads.last_sequence = ?
            """, [.text(customerId), .integer(last), SQLValue(statusView), .integer(lastSequence)], changes: 1)
        var parameters: [SQLValue] = []
        parameters.reserveCapacity(rows.count * 8)
        for (i, row) in rows.enumerated() {
            precondition(row.customerId == customerId && row.sequence == lastSequence + 1 + Int64(i), "rows follow the last sequence, in order")
            precondition(row.payload.utf8.count <= eventPayloadBytesMax, "an event's JSON is at most \(eventPayloadBytesMax) bytes")
            parameters.append(.text(row.eventId))
            parameters.append(.text(row.customerId))
            parameters.append(.integer(row.sequence))
            parameters.append(.text(row.type))
            parameters.append(.integer(row.createdAtMs))
            parameters.append(SQLValue(row.environment))
            parameters.append(SQLValue(row.bundleId))
            parameters.append(.text(row.payload))
        }
        batch.add(outboxEventsInsertSQL[rows.count - 1], parameters, changes: rows.count)
    }

    /// `appendEvents`' INSERT of 1...`eventsPerAppendMax` rows, each text written once (not per append).
    private static let outboxEventsInsertSQL: [String] = (1...eventsPerAppendMax).map { count in
        """
        INSERT INTO outbox_events (event_id, customer_id, sequence, event_type, created_at_ms, environment, bundle_id, payload)
        VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?)", count: count).joined(separator: ", "))
        """
    }

    /// The customer's last event sequence (0 before the first): the status's `version`. One primary-key lookup,
    /// inside any read or write.
    public static func lastEventSequence(_ db: SQLConnection, customerId: String) throws -> Int64 {
        try db.queryOne("SELECT last_sequence FROM outbox_heads WHERE customer_id = ?", [.text(customerId)])?.int("last_sequence") ?? 0
    }

    /// `lastEventSequence` in a read of its own.
    public func eventVersion(customerId: String) async throws(KakinError) -> Int64 {
        try await read { db in try Self.lastEventSequence(db, customerId: customerId) }
    }

    // MARK: The feed

    /// The condition that keeps a feed read (or a fan-out) to rows no later commit can precede: on PostgreSQL, rows
    /// of transactions that ended before every transaction still running began (below the snapshot's xmin). A
    /// transaction still running, or not yet given an id, writes rows with a larger `txid`, so they always come
    /// after any cursor handed out from what is visible now. SQLite has one writer: what is committed is in order.
    static func feedVisibility(_ db: SQLConnection) -> String {
        db.dialect == .postgresql ? " AND txid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint" : ""
    }

    /// "After the cursor `(txid, feed_pos)` = `(?, ?)`" in a form the engine finds with the feed's index. On SQLite every
    /// row's `txid` is 0 (one writer: row order is commit order), so it is `txid = ? AND feed_pos > ?`: its planner walks
    /// the index from its very first row for a row-value inequality (tens of ms per read over a large outbox).
    static func afterFeedCursor(_ db: SQLConnection) -> String {
        db.dialect == .postgresql ? "(txid, feed_pos) > (?, ?)" : "txid = ? AND feed_pos > ?"
    }

    static func outboxRow(_ r: SQLRow) -> OutboxEventRow {
        OutboxEventRow(eventId: r.string("event_id") ?? "", customerId: r.string("customer_id") ?? "", sequence: r.int("sequence") ?? 0,
                       type: r.string("event_type") ?? "", createdAtMs: r.int("created_at_ms") ?? 0, environment: r.string("environment"),
                       bundleId: r.string("bundle_id"), payload: r.string("payload") ?? "")
    }

    static let outboxColumns = "feed_pos, txid, event_id, customer_id, sequence, event_type, created_at_ms, environment, bundle_id, payload"

    /// Events after `cursor` in feed order (commit order on SQLite; on PostgreSQL an order no later commit can
    /// change, see `feedVisibility`), at most `limit`. `types`: only those (exact type strings; nil = every type).
    public func eventFeed(after cursor: EventFeedCursor, limit: Int, types: Set<String>?) async throws(KakinError) -> EventFeedPage {
        precondition(Self.feedLimitRange.contains(limit), "feed limit must be in \(Self.feedLimitRange)")
        return try await read { db in
            if let types {
                // Look at a bounded window; only matching rows carry their payload.
                let list = types.sorted()
                let inList = list.isEmpty ? "0 = 1" : "event_type IN (\(Array(repeating: "?", count: list.count).joined(separator: ", ")))"
                let rows = try db.query("""
                    SELECT feed_pos, txid, event_id, customer_id, sequence, event_type, created_at_ms, environment, bundle_id,
                        CASE WHEN \(inList) THEN payload END AS payload
                    FROM outbox_events WHERE \(Self.afterFeedCursor(db))\(Self.feedVisibility(db))
                    ORDER BY txid, feed_pos LIMIT ?
                    """, list.map { .text($0) } + [.integer(cursor.txid), .integer(cursor.position), .integer(Int64(Self.feedScanRowsMax))])
                var events: [OutboxEventRow] = []
                var next = cursor
                for r in rows {
                    next = EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)
                    if r.string("payload") != nil {
                        events.append(Self.outboxRow(r))
                        if events.count == limit { break }
                    }
                }
                return EventFeedPage(events: events, nextCursor: next)
            }
            let rows = try db.query("""
                SELECT \(Self.outboxColumns) FROM outbox_events WHERE \(Self.afterFeedCursor(db))\(Self.feedVisibility(db))
                ORDER BY txid, feed_pos LIMIT ?
                """, [.integer(cursor.txid), .integer(cursor.position), .integer(Int64(limit))])
            let next = rows.last.map { EventFeedCursor(txid: $0.int("txid") ?? 0, position: $0.int("feed_pos") ?? 0) } ?? cursor
            return EventFeedPage(events: rows.map(Self.outboxRow), nextCursor: next)
        }
    }

    /// A customer's events with a sequence above `afterSequence`, in sequence order, at most `limit`. Only what
    /// retention kept: a page may start above `afterSequence + 1`.
    public func customerEvents(customerId: String, afterSequence: Int64, limit: Int) async throws(KakinError) -> [OutboxEventRow] {
        precondition(Self.feedLimitRange.contains(limit), "feed limit must be in \(Self.feedLimitRange)")
        return try await read { db in
            try db.query("""
                SELECT \(Self.outboxColumns) FROM outbox_events WHERE customer_id = ? AND sequence > ? ORDER BY sequence LIMIT ?
                """, [.text(customerId), .integer(afterSequence), .integer(Int64(limit))]).map(Self.outboxRow)
        }
    }

    /// Events by id (the ones retention kept), in feed order.
    public func outboxEvents(ids: [String]) async throws(KakinError) -> [OutboxEventRow] {
        precondition(ids.count <= Self.replayEventIdsMax, "at most \(Self.replayEventIdsMax) ids")
        if ids.isEmpty { return [] }
        return try await read { db in
            try db.query("""
                SELECT \(Self.outboxColumns) FROM outbox_events WHERE event_id IN (\(Array(repeating: "?", count: ids.count).joined(separator: ", ")))
                ORDER BY txid, feed_pos
                """, ids.map { .text($0) }).map(Self.outboxRow)
        }
    }
}
