import KakinCore

/// A webhook delivery's life: `pending` (never tried, or replayed) → `delivered`; or `retrying` after a failed
/// attempt, due again at `next_attempt_ms`, until `delivered` or, past its deadline, `dead`. A replay puts any of
/// them back to `pending` with a fresh deadline.
public enum WebhookDeliveryState: String, Sendable, CaseIterable {
    case pending, delivered, retrying, dead
}

/// Which events one endpoint takes: its id and the exact event types its filter admits (storage knows no patterns).
public struct WebhookRoute: Sendable, Hashable {
    public var endpointId: String
    public var types: Set<String>

    public init(endpointId: String, types: Set<String>) {
        self.endpointId = endpointId
        self.types = types
    }
}

/// A delivery a worker holds (its chain is leased to the worker): what to send and what the retry decision needs.
public struct ClaimedWebhookDelivery: Sendable, Hashable {
    public var endpointId: String
    public var eventId: String
    public var customerId: String
    public var sequence: Int64
    /// Attempts made before this one.
    public var attempts: Int
    /// After this, a failed attempt makes the delivery dead instead of retrying it.
    public var deadlineMs: Int64
    /// The event's JSON; nil when the event is no longer stored (the delivery is then ended as dead).
    public var payload: String?
}

/// What one attempt came to, decided by the caller (`KakinEvents`' retry schedule).
public struct WebhookAttemptResult: Sendable, Hashable {
    public var state: WebhookDeliveryState
    /// The endpoint's HTTP status; nil when no answer came (timeout, connection refused).
    public var status: Int?
    /// The start of the answer's body, or why there was none (bounded to `answerExcerptMax`).
    public var answer: String?
    /// When to try again (`retrying` only).
    public var nextAttemptMs: Int64?

    public init(state: WebhookDeliveryState, status: Int?, answer: String?, nextAttemptMs: Int64? = nil) {
        precondition(state != .pending, "an attempt ends delivered, retrying or dead")
        precondition((state == .retrying) == (nextAttemptMs != nil), "a retry, and only a retry, has a next attempt")
        self.state = state
        self.status = status
        self.answer = answer
        self.nextAttemptMs = nextAttemptMs
    }
}

/// One endpoint's queue, for `/metrics` and the admin list.
public struct WebhookEndpointCounts: Sendable, Hashable {
    public var endpointId: String
    public var pending: Int
    public var retrying: Int
    public var dead: Int
    /// Events the endpoint takes or may take that no delivery exists for yet (fan-out behind), counted up to
    /// `fanOutLagCountMax`.
    public var notFannedOut: Int
    /// Creation time of the oldest undone (pending or retrying) delivery, on the delivering worker's clock; nil when none.
    public var oldestDeliveryCreatedAtMs: Int64? = nil
    /// Creation time of the oldest event not fanned out yet, on the clock events are stamped with (local mode's is
    /// the simulator's, not the worker's); nil when none.
    public var oldestNotFannedOutCreatedAtMs: Int64? = nil

    /// The older of the two; meaningful as one time only where events and deliveries share a clock (ages:
    /// `WebhookDeliveryWorker.oldestWaitingAgeMs`).
    public var oldestWaitingCreatedAtMs: Int64? {
        switch (oldestDeliveryCreatedAtMs, oldestNotFannedOutCreatedAtMs) {
        case let (a?, b?): min(a, b)
        case let (a, b): a ?? b
        }
    }

    /// Deliveries waiting (pending and retrying) plus events not fanned out yet.
    public var backlog: Int { pending + retrying + notFannedOut }
}

/// One delivery as the admin list shows it.
public struct WebhookDeliveryRow: Sendable, Hashable {
    public var endpointId: String
    public var eventId: String
    public var customerId: String
    public var sequence: Int64
    /// Nil when the event is no longer stored.
    public var type: String?
    public var state: WebhookDeliveryState
    public var attempts: Int
    public var createdAtMs: Int64
    public var nextAttemptMs: Int64
    public var deadlineMs: Int64
    public var lastAttemptMs: Int64?
    public var lastStatus: Int?
    public var lastAnswer: String?
    /// The process holding the delivery's chain, while the delivery is undone (its turn may not have come yet).
    public var claimedBy: String?
    public var finishedAtMs: Int64?
}

extension KakinStore {
    // MARK: Cursors and fan-out

    /// Gives each endpoint that has none a fan-out cursor at the current end of the feed: an endpoint delivers the
    /// events committed after it was first registered (a replay `since` a time sends older ones). On PostgreSQL the
    /// end is "every transaction below the snapshot's xmin", so nothing still being written is skipped.
    public func registerWebhookCursors(endpointIds: [String], nowMs: Int64) async throws(KakinError) {
        if endpointIds.isEmpty { return }
        try await write { db in
            let end = try db.queryOne(db.dialect == .postgresql
                ? "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint - 1 AS txid, 9223372036854775807 AS feed_pos"
                : "SELECT 0 AS txid, COALESCE(MAX(feed_pos), 0) AS feed_pos FROM outbox_events", [])
            for id in endpointIds {
                try db.execute("""
                    INSERT INTO webhook_cursors (endpoint_id, txid, feed_pos, updated_at_ms) VALUES (?, ?, ?, ?)
                    ON CONFLICT (endpoint_id) DO NOTHING
                    """, [.text(id), .integer(end?.int("txid") ?? 0), .integer(end?.int("feed_pos") ?? 0), .integer(nowMs)])
            }
        }
    }

    /// An endpoint's fan-out cursor (nil before `registerWebhookCursors`).
    public func webhookCursor(endpointId: String) async throws(KakinError) -> EventFeedCursor? {
        try await read { db in try Self.cursor(db, endpointId) }
    }

    static func cursor(_ db: SQLConnection, _ endpointId: String) throws -> EventFeedCursor? {
        try db.queryOne("SELECT txid, feed_pos FROM webhook_cursors WHERE endpoint_id = ?", [.text(endpointId)])
            .map { EventFeedCursor(txid: $0.int("txid") ?? 0, position: $0.int("feed_pos") ?? 0) }
    }

    /// Turns events past the endpoints' cursors into deliveries: reads at most `batchMax` of them (in a read, so the
    /// write never holds read locks on the events that the ingest appends to), then in one write, per endpoint, moves
    /// the cursor from the value read (a compare-and-set: another process that moved it meanwhile wins, and this one
    /// skips that endpoint) and inserts a `pending` delivery for each event its types admit, due at `nowMs`, dead
    /// after `deadlineMs`. Answers the events read (`batchMax`: call again, more may wait), the deliveries created and
    /// the endpoints they were created for (each has a chain due now).
    public func fanOutWebhookEvents(routes: [WebhookRoute], nowMs: Int64, deadlineMs: Int64, batchMax: Int) async throws(KakinError)
        -> (eventsRead: Int, deliveriesCreated: Int, endpointsDue: Set<String>) {
        precondition((1...10_000).contains(batchMax), "fan-out batches are 1...10000 events")
        if routes.isEmpty { return (0, 0, []) }
        let (cursors, events) = try await read { db -> ([String: EventFeedCursor], [(cursor: EventFeedCursor, eventId: String, customerId: String, sequence: Int64, type: String)]) in
            var cursors: [String: EventFeedCursor] = [:]
            for r in routes { if let c = try Self.cursor(db, r.endpointId) { cursors[r.endpointId] = c } }
            guard let from = cursors.values.min() else { return (cursors, []) }
            let rows = try db.query("""
                SELECT txid, feed_pos, event_id, customer_id, sequence, event_type FROM outbox_events
                WHERE \(Self.afterFeedCursor(db))\(Self.feedVisibility(db)) ORDER BY txid, feed_pos LIMIT ?
                """, [.integer(from.txid), .integer(from.position), .integer(Int64(batchMax))])
            return (cursors, rows.map { r in
                (EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0), r.string("event_id") ?? "",
                 r.string("customer_id") ?? "", r.int("sequence") ?? 0, r.string("event_type") ?? "")
            })
        }
        guard let last = events.last?.cursor else { return (0, 0, []) }
        let (created, due) = try await write { db in
            var created = 0
            var due = Set<String>()
            for route in routes {
                guard let from = cursors[route.endpointId], from < last else { continue }
                let moved = try db.execute("""
                    UPDATE webhook_cursors SET txid = ?, feed_pos = ?, updated_at_ms = ? WHERE endpoint_id = ? AND txid = ? AND feed_pos = ?
                    """, [.integer(last.txid), .integer(last.position), .integer(nowMs), .text(route.endpointId), .integer(from.txid), .integer(from.position)])
                guard moved == 1 else { continue }
                let admitted = events.filter { from < $0.cursor && route.types.contains($0.type) }
                let inserted = try Self.insertDeliveries(db, route.endpointId, admitted.map { ($0.eventId, $0.customerId, $0.sequence) }, nowMs: nowMs,
                                                         deadlineMs: deadlineMs, onConflict: "DO NOTHING")
                created += inserted.count
                if !inserted.isEmpty { due.insert(route.endpointId) }
                try Self.scheduleChains(db, route.endpointId, Self.distinct(inserted), dueMs: nowMs, nowMs: nowMs)
            }
            return (created, due)
        }
        return (events.count, created, due)
    }

    /// Rows one multi-row statement writes at most (a power of two: `SQLList.chunks`).
    static let rowsPerStatementMax = 64

    /// Inserts a `pending` delivery per event (due at `nowMs`), a few multi-row statements for any number; `onConflict`
    /// says what an existing one becomes. Answers the customer of each row inserted or updated.
    static func insertDeliveries(_ db: SQLConnection, _ endpointId: String, _ events: [(eventId: String, customerId: String, sequence: Int64)],
                                 nowMs: Int64, deadlineMs: Int64, onConflict: String) throws -> [String] {
        var customers: [String] = []
        for chunk in SQLList.chunks(events.count, max: rowsPerStatementMax) {
            var parameters: [SQLValue] = []
            parameters.reserveCapacity(chunk.count * 7)
            for e in events[chunk] {
                parameters += [.text(endpointId), .text(e.eventId), .text(e.customerId), .integer(e.sequence), .integer(nowMs), .integer(nowMs), .integer(deadlineMs)]
            }
            customers += try db.query("""
                INSERT INTO webhook_deliveries (endpoint_id, event_id, customer_id, sequence, state, attempts, created_at_ms, next_attempt_ms, deadline_ms)
                VALUES \(SQLList.rows(chunk.count, "(?, ?, ?, ?, 'pending', 0, ?, ?, ?)")) ON CONFLICT (endpoint_id, event_id) \(onConflict)
                RETURNING customer_id
                """, parameters).compactMap { $0.string("customer_id") }
        }
        return customers
    }

    /// Makes each chain due at `dueMs` if nothing was undone in it (an idle chain has no next attempt); a chain with
    /// undone deliveries keeps its own time (its oldest delivery's backoff, or its lease).
    static func scheduleChains(_ db: SQLConnection, _ endpointId: String, _ customerIds: [String], dueMs: Int64, nowMs: Int64) throws {
        for chunk in SQLList.chunks(customerIds.count, max: rowsPerStatementMax) {
            try db.execute("""
                INSERT INTO webhook_chains (endpoint_id, customer_id, next_attempt_ms, updated_at_ms) VALUES \(SQLList.rows(chunk.count, "(?, ?, ?, ?)"))
                ON CONFLICT (endpoint_id, customer_id) DO UPDATE SET
                    next_attempt_ms = COALESCE(webhook_chains.next_attempt_ms, excluded.next_attempt_ms), updated_at_ms = excluded.updated_at_ms
                """, customerIds[chunk].flatMap { [.text(endpointId), .text($0), .integer(dueMs), .integer(nowMs)] as [SQLValue] })
        }
    }

    /// `values` without repeats, in first-seen order.
    static func distinct(_ values: [String]) -> [String] {
        var seen = Set<String>()
        return values.filter { seen.insert($0).inserted }
    }

    /// Sets each listed chain's next attempt to its oldest undone delivery's (none: NULL, not due) where `condition`
    /// holds, with `alsoSet` (e.g. the claim cleared): one statement for any number of chains; nil for none.
    static func rescheduleChains(_ endpointId: String, _ customerIds: [String], nowMs: Int64, alsoSet: String,
                                 condition: String, conditionParameters: [SQLValue]) -> SQLStatement? {
        if customerIds.isEmpty { return nil }
        let list = SQLList.inList(customerIds.map { .text($0) })
        return SQLStatement("""
            UPDATE webhook_chains SET next_attempt_ms = (
                SELECT d.next_attempt_ms FROM webhook_deliveries d WHERE d.endpoint_id = webhook_chains.endpoint_id
                    AND d.customer_id = webhook_chains.customer_id AND d.state IN ('pending', 'retrying') ORDER BY d.sequence LIMIT 1)\(alsoSet),
                updated_at_ms = ?
            WHERE endpoint_id = ? AND customer_id IN (\(list.sql)) AND \(condition)
            """, [.integer(nowMs), .text(endpointId)] + list.parameters + conditionParameters)
    }

    // MARK: Claims

    /// Which of these endpoints have a chain due at `nowMs` (a read, so an idle worker's poll writes nothing).
    public func dueWebhookEndpoints(endpointIds: [String], nowMs: Int64) async throws(KakinError) -> Set<String> {
        if endpointIds.isEmpty { return [] }
        return try await read { db in
            var due = Set<String>()
            for id in endpointIds where try db.queryOne("""
                SELECT 1 AS one FROM webhook_chains WHERE endpoint_id = ? AND next_attempt_ms IS NOT NULL AND next_attempt_ms <= ? LIMIT 1
                """, [.text(id), .integer(nowMs)]) != nil {
                due.insert(id)
            }
            return due
        }
    }

    /// Claims up to `limit` due chains of `endpointId` for `owner` until `nowMs + leaseMs` and answers the delivery
    /// each may send now (its oldest undone one), with the event's JSON: `settleWebhookDeliveries` with nothing to record.
    public func claimWebhookDeliveries(endpointId: String, owner: String, nowMs: Int64, leaseMs: Int64, limit: Int) async throws(KakinError) -> [ClaimedWebhookDelivery] {
        try await settleWebhookDeliveries(endpointId: endpointId, results: [], unattempted: [], owner: owner, nowMs: nowMs, leaseMs: leaseMs, claimLimit: limit)
    }

    /// Deliveries one settle records or puts back at most (the worker's batch).
    public static let settleBatchMax = 1_024

    /// One write for a batch of deliveries of one endpoint, and one read for what to send next:
    /// 1. records each attempt's result (a delivery that already ended — another worker after a lapsed lease, a replay
    ///    meanwhile — is left as it is);
    /// 2. puts back the chains of the results and of the `unattempted` claims (taken, never sent: the worker is
    ///    stopping, or held them past their lease's safe end), due when their oldest undone delivery is (never, when
    ///    none is): only chains `owner` still holds;
    /// 3. claims up to `claimLimit` due chains for `owner` until `nowMs + leaseMs`, the ones just put back among them. A
    ///    claim moves the chain's next attempt to the lease's end, so no other worker sees it due meanwhile; if `owner`
    ///    dies it comes due again when the lease runs out (its delivery is then sent again: at least once). On
    ///    PostgreSQL, chains another process is claiming at this moment are skipped (`FOR UPDATE SKIP LOCKED`).
    /// Then, in a read (off the writer), each claimed chain's oldest undone delivery with its event's JSON: the only one
    /// of the customer's that may be sent to the endpoint now (no one else records in a held chain, and fan-out only
    /// adds later ones). A claimed chain with nothing due to send (its oldest delivery waits for a retry after a replay
    /// changed it) is put back at once, in a second write.
    /// Statements: one per distinct result (all 2xx of one status and answer are one), one to put chains back, one to
    /// claim; on PostgreSQL the first ones go in one round trip.
    /// - Returns: the deliveries to send now.
    public func settleWebhookDeliveries(endpointId: String, results: [(claim: ClaimedWebhookDelivery, result: WebhookAttemptResult)],
                                        unattempted: [ClaimedWebhookDelivery], owner: String, nowMs: Int64, leaseMs: Int64,
                                        claimLimit: Int) async throws(KakinError) -> [ClaimedWebhookDelivery] {
        precondition((0...Self.settleBatchMax).contains(claimLimit), "claims are 0...\(Self.settleBatchMax) chains")
        precondition(results.count + unattempted.count <= Self.settleBatchMax, "a settle records at most \(Self.settleBatchMax) deliveries")
        precondition(leaseMs > 0, "a lease lasts")
        precondition((results.map(\.claim) + unattempted).allSatisfy { $0.endpointId == endpointId }, "a settle is one endpoint's")
        if results.isEmpty, unattempted.isEmpty, claimLimit == 0 { return [] }
        let leaseUntil = nowMs + leaseMs
        let release = { @Sendable (customers: [String]) in
            Self.rescheduleChains(endpointId, customers, nowMs: nowMs, alsoSet: ", claimed_by = NULL, lease_until_ms = NULL",
                                  condition: "claimed_by = ?", conditionParameters: [.text(owner)])
        }
        let customers = try await write { db -> [String] in
            var statements = Self.recordStatements(endpointId, results, nowMs: nowMs)
            if let put = release(Self.distinct((results.map(\.claim) + unattempted).map(\.customerId))) { statements.append(put) }
            try db.executeBatch(statements)
            if claimLimit == 0 { return [] }
            let skipLocked = db.dialect == .postgresql ? " FOR UPDATE SKIP LOCKED" : ""
            return try db.query("""
                UPDATE webhook_chains SET next_attempt_ms = ?, claimed_by = ?, lease_until_ms = ?, updated_at_ms = ?
                WHERE endpoint_id = ? AND customer_id IN (
                    SELECT customer_id FROM webhook_chains WHERE endpoint_id = ? AND next_attempt_ms IS NOT NULL AND next_attempt_ms <= ?
                    ORDER BY next_attempt_ms LIMIT ?\(skipLocked))
                RETURNING customer_id
                """, [.integer(leaseUntil), .text(owner), .integer(leaseUntil), .integer(nowMs), .text(endpointId), .text(endpointId),
                      .integer(nowMs), .integer(Int64(claimLimit))]).compactMap { $0.string("customer_id") }
        }
        if customers.isEmpty { return [] }
        let heads = try await read { db -> [(claim: ClaimedWebhookDelivery, dueMs: Int64)] in
            let list = SQLList.inList(customers.map { .text($0) })
            return try db.query("""
                SELECT d.customer_id, d.event_id, d.sequence, d.attempts, d.deadline_ms, d.next_attempt_ms, e.payload
                FROM webhook_deliveries d LEFT JOIN outbox_events e ON e.event_id = d.event_id
                WHERE d.endpoint_id = ? AND d.event_id IN (
                    SELECT (SELECT x.event_id FROM webhook_deliveries x WHERE x.endpoint_id = c.endpoint_id AND x.customer_id = c.customer_id
                                AND x.state IN ('pending', 'retrying') ORDER BY x.sequence LIMIT 1)
                    FROM webhook_chains c WHERE c.endpoint_id = ? AND c.customer_id IN (\(list.sql)))
                """, [.text(endpointId), .text(endpointId)] + list.parameters).map { r in
                (ClaimedWebhookDelivery(endpointId: endpointId, eventId: r.string("event_id") ?? "", customerId: r.string("customer_id") ?? "",
                                        sequence: r.int("sequence") ?? 0, attempts: Int(r.int("attempts") ?? 0), deadlineMs: r.int("deadline_ms") ?? 0,
                                        payload: r.string("payload")), r.int("next_attempt_ms") ?? 0)
            }
        }
        let due = heads.filter { $0.dueMs <= nowMs }.map(\.claim)
        let sending = Set(due.map(\.customerId))
        if let put = release(customers.filter { !sending.contains($0) }) {
            try await write { db in try db.executeBatch([put]) }
        }
        return due
    }

    /// The statements recording `results`: one per distinct outcome (state, status, answer, next attempt), each over
    /// all of its deliveries. Undone is said as "neither delivered nor dead": with `state IN (…)` beside an `IN` list of
    /// ids, SQLite's planner walks every undone delivery of the endpoint (`webhook_deliveries_by_state`) instead of
    /// looking the ids up.
    static func recordStatements(_ endpointId: String, _ results: [(claim: ClaimedWebhookDelivery, result: WebhookAttemptResult)],
                                 nowMs: Int64) -> [SQLStatement] {
        var groups: [WebhookAttemptResult: [String]] = [:]
        var order: [WebhookAttemptResult] = []
        for (claim, result) in results {
            var stored = result
            stored.answer = result.answer.map { String($0.prefix(Self.answerExcerptMax)) }
            if groups[stored] == nil { order.append(stored) }
            groups[stored, default: []].append(claim.eventId)
        }
        return order.map { result in
            let list = SQLList.inList(groups[result]!.map { .text($0) })
            return SQLStatement("""
                UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, last_attempt_ms = ?, last_status = ?, last_answer = ?,
                    next_attempt_ms = ?, finished_at_ms = ?
                WHERE endpoint_id = ? AND event_id IN (\(list.sql)) AND state <> 'delivered' AND state <> 'dead'
                """, [.text(result.state.rawValue), .integer(nowMs), SQLValue(result.status), SQLValue(result.answer),
                      .integer(result.nextAttemptMs ?? nowMs), result.state == .retrying ? .null : .integer(nowMs), .text(endpointId)]
                + list.parameters)
        }
    }

    // MARK: Replay

    /// Puts the endpoint's deliveries of these events back to `pending` with a fresh deadline (creating the ones that
    /// never existed, e.g. for an endpoint added after the event), for events its types admit. Ids retention already
    /// purged are skipped. Answers how many were queued.
    public func replayWebhookDeliveries(route: WebhookRoute, eventIds: [String], nowMs: Int64, deadlineMs: Int64) async throws(KakinError) -> Int {
        precondition(eventIds.count <= Self.replayEventIdsMax, "a replay names at most \(Self.replayEventIdsMax) events")
        let events = try await outboxEvents(ids: Array(Set(eventIds)))
        var queued = 0
        var start = 0
        while start < events.count {
            let chunk = Array(events[start..<min(events.count, start + Self.replayBatchMax)])
            queued += try await requeue(route: route, chunk, nowMs: nowMs, deadlineMs: deadlineMs)
            start += Self.replayBatchMax
        }
        return queued
    }

    /// The same for every event created at or after `sinceMs`, in writes of `replayBatchMax` events.
    public func replayWebhookDeliveries(route: WebhookRoute, sinceMs: Int64, nowMs: Int64, deadlineMs: Int64) async throws(KakinError) -> Int {
        var queued = 0
        var after: (createdAtMs: Int64, position: Int64) = (sinceMs, -1)
        while true {
            let from = after
            let page = try await read { db -> [(row: OutboxEventRow, position: Int64)] in
                try db.query("""
                    SELECT \(Self.outboxColumns) FROM outbox_events WHERE (created_at_ms, feed_pos) > (?, ?)
                    ORDER BY created_at_ms, feed_pos LIMIT ?
                    """, [.integer(from.createdAtMs), .integer(from.position), .integer(Int64(Self.replayBatchMax))])
                .map { (Self.outboxRow($0), $0.int("feed_pos") ?? 0) }
            }
            guard let last = page.last else { return queued }
            queued += try await requeue(route: route, page.map(\.row), nowMs: nowMs, deadlineMs: deadlineMs)
            after = (last.row.createdAtMs, last.position)
            if page.count < Self.replayBatchMax { return queued }
        }
    }

    func requeue(route: WebhookRoute, _ events: [OutboxEventRow], nowMs: Int64, deadlineMs: Int64) async throws(KakinError) -> Int {
        let admitted = events.filter { route.types.contains($0.type) }
        if admitted.isEmpty { return 0 }
        return try await write { db in
            let customers = Self.distinct(try Self.insertDeliveries(
                db, route.endpointId, admitted.map { ($0.eventId, $0.customerId, $0.sequence) }, nowMs: nowMs, deadlineMs: deadlineMs, onConflict: """
                    DO UPDATE SET state = 'pending', attempts = 0, next_attempt_ms = excluded.next_attempt_ms, deadline_ms = excluded.deadline_ms,
                        finished_at_ms = NULL
                    """))
            try Self.scheduleChains(db, route.endpointId, customers, dueMs: nowMs, nowMs: nowMs)
            // A chain nobody holds is due when its (possibly new) oldest undone delivery is; a held one is put back by its holder.
            for chunk in SQLList.chunks(customers.count, max: Self.rowsPerStatementMax) {
                if let due = Self.rescheduleChains(route.endpointId, Array(customers[chunk]), nowMs: nowMs, alsoSet: "",
                                                   condition: "(claimed_by IS NULL OR lease_until_ms <= ?)", conditionParameters: [.integer(nowMs)]) {
                    try db.executeBatch([due])
                }
            }
            return admitted.count
        }
    }

    // MARK: Retention

    /// One bounded pass of retention: deletes up to `batchMax` finished (delivered or dead) deliveries created before
    /// `deliveryCutoffMs` per configured endpoint, any delivery of an endpoint no longer configured created before it,
    /// idle chains untouched since it, and up to `batchMax` events created before `eventCutoffMs` that no configured
    /// endpoint still has to deliver (an undone delivery) and no cursor still has to read (`outboxCursors`: the
    /// endpoints' fan-out and the business numbers'). Two cutoffs: events carry Kakin's clock (the simulator's in local
    /// mode), deliveries the worker's real one. Answers the rows deleted; call again while a batch comes back full.
    public func purgeOutbox(eventCutoffMs: Int64, deliveryCutoffMs: Int64, endpointIds: [String], batchMax: Int) async throws(KakinError) -> (events: Int, deliveries: Int) {
        precondition((1...10_000).contains(batchMax), "purge batches are 1...10000 rows")
        return try await write { db in
            var deliveries = 0
            let configured = Set(endpointIds)
            for id in endpointIds.sorted() {
                for state in [WebhookDeliveryState.delivered, .dead] {
                    deliveries += try db.execute("""
                        DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND event_id IN (
                            SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ? AND state = ? AND created_at_ms < ? LIMIT ?)
                        """, [.text(id), .text(id), .text(state.rawValue), .integer(deliveryCutoffMs), .integer(Int64(batchMax))])
                }
            }
            let known = try db.query("SELECT endpoint_id FROM webhook_cursors", []).compactMap { $0.string("endpoint_id") }
            for id in known where !configured.contains(id) {
                deliveries += try db.execute("""
                    DELETE FROM webhook_deliveries WHERE endpoint_id = ? AND event_id IN (
                        SELECT event_id FROM webhook_deliveries WHERE endpoint_id = ? AND created_at_ms < ? LIMIT ?)
                    """, [.text(id), .text(id), .integer(deliveryCutoffMs), .integer(Int64(batchMax))])
            }
            try db.execute("""
                DELETE FROM webhook_chains WHERE next_attempt_ms IS NULL AND claimed_by IS NULL AND updated_at_ms < ?
                """, [.integer(deliveryCutoffMs)])
            let behind = try Self.outboxCursors(db, endpointIds: endpointIds).map(\.cursor)
            let fannedOut = behind.min().map { _ in " AND (e.txid, e.feed_pos) <= (?, ?)" } ?? ""
            let undone = endpointIds.isEmpty ? "" : """
                 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id IN (\(Array(repeating: "?", count: endpointIds.count).joined(separator: ", ")))
                    AND d.event_id = e.event_id AND d.state IN ('pending', 'retrying'))
                """
            var parameters: [SQLValue] = [.integer(eventCutoffMs)]
            if let min = behind.min() { parameters += [.integer(min.txid), .integer(min.position)] }
            parameters += endpointIds.map { .text($0) }
            parameters.append(.integer(Int64(batchMax)))
            let events = try db.execute("""
                DELETE FROM outbox_events WHERE feed_pos IN (
                    SELECT e.feed_pos FROM outbox_events e WHERE e.created_at_ms < ?\(fannedOut)\(undone) ORDER BY e.created_at_ms LIMIT ?)
                """, parameters)
            return (events, deliveries)
        }
    }

    /// Every cursor that reads the outbox, so retention must wait for it: each configured endpoint's fan-out cursor
    /// (`webhook:<id>`) and the business numbers' (`metrics`), those that exist.
    static func outboxCursors(_ db: SQLConnection, endpointIds: [String]) throws -> [(name: String, cursor: EventFeedCursor)] {
        var out: [(name: String, cursor: EventFeedCursor)] = []
        for id in endpointIds { if let c = try cursor(db, id) { out.append(("webhook:\(id)", c)) } }
        if let r = try db.queryOne("SELECT txid, feed_pos FROM metric_cursors WHERE name = ?", [.text(metricsCursorName)]) {
            out.append(("metrics", EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)))
        }
        return out
    }

    /// Each cursor that reads the outbox (`outboxCursors`) with when the first event it has not read yet was created
    /// (nil: it has read everything). One indexed row per cursor.
    public func outboxCursorLags(endpointIds: [String]) async throws(KakinError) -> [(name: String, oldestUnreadCreatedAtMs: Int64?)] {
        try await read { db in
            try Self.outboxCursors(db, endpointIds: endpointIds).map { name, c in
                let first = try db.queryOne("""
                    SELECT created_at_ms FROM outbox_events WHERE (txid, feed_pos) > (?, ?) ORDER BY txid, feed_pos LIMIT 1
                    """, [.integer(c.txid), .integer(c.position)])
                return (name, first?.int("created_at_ms"))
            }
        }
    }

    // MARK: Counts and lists

    /// Each endpoint's queue (one read).
    public func webhookCounts(endpointIds: [String]) async throws(KakinError) -> [WebhookEndpointCounts] {
        try await read { db in
            try endpointIds.map { id in
                var counts = WebhookEndpointCounts(endpointId: id, pending: 0, retrying: 0, dead: 0, notFannedOut: 0)
                for r in try db.query("""
                    SELECT state, COUNT(*) AS n, MIN(created_at_ms) AS oldest FROM webhook_deliveries
                    WHERE endpoint_id = ? AND state IN ('pending', 'retrying', 'dead') GROUP BY state
                    """, [.text(id)]) {
                    let n = Int(r.int("n") ?? 0)
                    switch r.string("state") {
                    case "pending": counts.pending = n
                    case "retrying": counts.retrying = n
                    case "dead": counts.dead = n; continue
                    default: continue
                    }
                    if let oldest = r.int("oldest") { counts.oldestDeliveryCreatedAtMs = min(counts.oldestDeliveryCreatedAtMs ?? oldest, oldest) }
                }
                if let c = try Self.cursor(db, id) {
                    let lag = try db.queryOne("""
                        SELECT COUNT(*) AS n, MIN(created_at_ms) AS oldest FROM (
                            SELECT created_at_ms FROM outbox_events WHERE \(Self.afterFeedCursor(db)) ORDER BY txid, feed_pos LIMIT ?) AS behind
                        """, [.integer(c.txid), .integer(c.position), .integer(Int64(Self.fanOutLagCountMax))])
                    counts.notFannedOut = Int(lag?.int("n") ?? 0)
                    counts.oldestNotFannedOutCreatedAtMs = lag?.int("oldest")
                }
                return counts
            }
        }
    }

    /// An endpoint's deliveries, newest first, optionally of one state; `before` continues after a page's last row.
    public func webhookDeliveries(endpointId: String, state: WebhookDeliveryState?, limit: Int,
                                  before: (createdAtMs: Int64, eventId: String)? = nil) async throws(KakinError) -> [WebhookDeliveryRow] {
        precondition((1...500).contains(limit), "delivery pages are 1...500 rows")
        return try await read { db in
            var sql = """
                SELECT d.endpoint_id, d.event_id, d.customer_id, d.sequence, e.event_type, d.state, d.attempts, d.created_at_ms, d.next_attempt_ms,
                    d.deadline_ms, d.last_attempt_ms, d.last_status, d.last_answer,
                    CASE WHEN d.state IN ('pending', 'retrying') THEN c.claimed_by END AS claimed_by, d.finished_at_ms
                FROM webhook_deliveries d LEFT JOIN outbox_events e ON e.event_id = d.event_id
                    LEFT JOIN webhook_chains c ON c.endpoint_id = d.endpoint_id AND c.customer_id = d.customer_id
                WHERE d.endpoint_id = ?
                """
            var parameters: [SQLValue] = [.text(endpointId)]
            if let state {
                sql += " AND d.state = ?"
                parameters.append(.text(state.rawValue))
            }
            if let before {
                sql += " AND (d.created_at_ms, d.event_id) < (?, ?)"
                parameters += [.integer(before.createdAtMs), .text(before.eventId)]
            }
            sql += " ORDER BY d.created_at_ms DESC, d.event_id DESC LIMIT ?"
            parameters.append(.integer(Int64(limit)))
            return try db.query(sql, parameters).map { r in
                WebhookDeliveryRow(endpointId: r.string("endpoint_id") ?? "", eventId: r.string("event_id") ?? "", customerId: r.string("customer_id") ?? "",
                                   sequence: r.int("sequence") ?? 0, type: r.string("event_type"),
                                   state: WebhookDeliveryState(rawValue: r.string("state") ?? "") ?? .pending, attempts: Int(r.int("attempts") ?? 0),
                                   createdAtMs: r.int("created_at_ms") ?? 0, nextAttemptMs: r.int("next_attempt_ms") ?? 0,
                                   deadlineMs: r.int("deadline_ms") ?? 0, lastAttemptMs: r.int("last_attempt_ms"),
                                   lastStatus: r.int("last_status").map { Int($0) }, lastAnswer: r.string("last_answer"),
                                   claimedBy: r.string("claimed_by"), finishedAtMs: r.int("finished_at_ms"))
            }
        }
    }
}
