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
    /// after `deadlineMs`. Answers the events read (`batchMax`: call again, more may wait) and the deliveries created.
    public func fanOutWebhookEvents(routes: [WebhookRoute], nowMs: Int64, deadlineMs: Int64, batchMax: Int) async throws(KakinError) -> (eventsRead: Int, deliveriesCreated: Int) {
        precondition((1...10_000).contains(batchMax), "fan-out batches are 1...10000 events")
        if routes.isEmpty { return (0, 0) }
        let (cursors, events) = try await read { db -> ([String: EventFeedCursor], [(cursor: EventFeedCursor, eventId: String, customerId: String, sequence: Int64, type: String)]) in
            var cursors: [String: EventFeedCursor] = [:]
            for r in routes { if let c = try Self.cursor(db, r.endpointId) { cursors[r.endpointId] = c } }
            guard let from = cursors.values.min() else { return (cursors, []) }
            let rows = try db.query("""
                SELECT txid, feed_pos, event_id, customer_id, sequence, event_type FROM outbox_events
                WHERE (txid, feed_pos) > (?, ?)\(Self.feedVisibility(db)) ORDER BY txid, feed_pos LIMIT ?
                """, [.integer(from.txid), .integer(from.position), .integer(Int64(batchMax))])
            return (cursors, rows.map { r in
                (EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0), r.string("event_id") ?? "",
                 r.string("customer_id") ?? "", r.int("sequence") ?? 0, r.string("event_type") ?? "")
            })
        }
        guard let last = events.last?.cursor else { return (0, 0) }
        let created = try await write { db in
            var created = 0
            for route in routes {
                guard let from = cursors[route.endpointId], from < last else { continue }
                let moved = try db.execute("""
                    UPDATE webhook_cursors SET txid = ?, feed_pos = ?, updated_at_ms = ? WHERE endpoint_id = ? AND txid = ? AND feed_pos = ?
                    """, [.integer(last.txid), .integer(last.position), .integer(nowMs), .text(route.endpointId), .integer(from.txid), .integer(from.position)])
                guard moved == 1 else { continue }
                var customers: [String] = []
                var seen = Set<String>()
                for e in events where from < e.cursor && route.types.contains(e.type) {
                    let inserted = try db.execute("""
                        INSERT INTO webhook_deliveries (endpoint_id, event_id, customer_id, sequence, state, attempts, created_at_ms, next_attempt_ms, deadline_ms)
                        VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?) ON CONFLICT (endpoint_id, event_id) DO NOTHING
                        """, [.text(route.endpointId), .text(e.eventId), .text(e.customerId), .integer(e.sequence), .integer(nowMs), .integer(nowMs),
                              .integer(deadlineMs)])
                    created += inserted
                    if inserted == 1, seen.insert(e.customerId).inserted { customers.append(e.customerId) }
                }
                for customer in customers { try Self.scheduleChain(db, route.endpointId, customer, dueMs: nowMs, nowMs: nowMs) }
            }
            return created
        }
        return (events.count, created)
    }

    /// Makes a chain due at `dueMs` if nothing was undone in it (an idle chain has no next attempt); a chain with
    /// undone deliveries keeps its own time (its oldest delivery's backoff, or its lease).
    static func scheduleChain(_ db: SQLConnection, _ endpointId: String, _ customerId: String, dueMs: Int64, nowMs: Int64) throws {
        try db.execute("""
            INSERT INTO webhook_chains (endpoint_id, customer_id, next_attempt_ms, updated_at_ms) VALUES (?, ?, ?, ?)
            ON CONFLICT (endpoint_id, customer_id) DO UPDATE SET
                next_attempt_ms = COALESCE(webhook_chains.next_attempt_ms, excluded.next_attempt_ms), updated_at_ms = excluded.updated_at_ms
            """, [.text(endpointId), .text(customerId), .integer(dueMs), .integer(nowMs)])
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

    /// The chain's oldest undone delivery: the only one of the customer's that may be sent to the endpoint now.
    static func chainHead(_ db: SQLConnection, _ endpointId: String, _ customerId: String) throws -> SQLRow? {
        try db.queryOne("""
            SELECT event_id, sequence, attempts, deadline_ms, next_attempt_ms FROM webhook_deliveries
            WHERE endpoint_id = ? AND customer_id = ? AND state IN ('pending', 'retrying') ORDER BY sequence LIMIT 1
            """, [.text(endpointId), .text(customerId)])
    }

    /// Marks `head` as held by `owner` and answers it as a claim (payload read later, off the writer).
    static func holdHead(_ db: SQLConnection, _ endpointId: String, _ customerId: String, _ head: SQLRow, owner: String,
                         leaseUntilMs: Int64) throws -> ClaimedWebhookDelivery {
        let eventId = head.string("event_id") ?? ""
        try db.execute("UPDATE webhook_deliveries SET claimed_by = ?, lease_until_ms = ? WHERE endpoint_id = ? AND event_id = ?",
                       [.text(owner), .integer(leaseUntilMs), .text(endpointId), .text(eventId)])
        return ClaimedWebhookDelivery(endpointId: endpointId, eventId: eventId, customerId: customerId, sequence: head.int("sequence") ?? 0,
                                      attempts: Int(head.int("attempts") ?? 0), deadlineMs: head.int("deadline_ms") ?? 0, payload: nil)
    }

    /// Puts a chain back: due when its oldest undone delivery is (never, when none is), no longer held.
    static func releaseChain(_ db: SQLConnection, _ endpointId: String, _ customerId: String, head: SQLRow?, nowMs: Int64) throws {
        try db.execute("""
            UPDATE webhook_chains SET next_attempt_ms = ?, claimed_by = NULL, lease_until_ms = NULL, updated_at_ms = ?
            WHERE endpoint_id = ? AND customer_id = ?
            """, [SQLValue(head?.int("next_attempt_ms")), .integer(nowMs), .text(endpointId), .text(customerId)])
    }

    /// Claims up to `limit` due chains of `endpointId` for `owner` until `nowMs + leaseMs` and answers the delivery
    /// each may send now (its oldest undone one), with the event's JSON. A claim moves the chain's next attempt to the
    /// lease's end, so no other worker sees it due meanwhile, and if `owner` dies it comes due again when the lease
    /// runs out (the delivery is then sent again: at least once). On PostgreSQL, chains another process is claiming
    /// at this moment are skipped (`FOR UPDATE SKIP LOCKED`) rather than waited for.
    public func claimWebhookDeliveries(endpointId: String, owner: String, nowMs: Int64, leaseMs: Int64, limit: Int) async throws(KakinError) -> [ClaimedWebhookDelivery] {
        precondition((1...1_000).contains(limit), "claims are 1...1000 chains")
        precondition(leaseMs > 0, "a lease lasts")
        let leaseUntil = nowMs + leaseMs
        let claimed = try await write { db -> [ClaimedWebhookDelivery] in
            let skipLocked = db.dialect == .postgresql ? " FOR UPDATE SKIP LOCKED" : ""
            let customers = try db.query("""
                UPDATE webhook_chains SET next_attempt_ms = ?, claimed_by = ?, lease_until_ms = ?, updated_at_ms = ?
                WHERE endpoint_id = ? AND customer_id IN (
                    SELECT customer_id FROM webhook_chains WHERE endpoint_id = ? AND next_attempt_ms IS NOT NULL AND next_attempt_ms <= ?
                    ORDER BY next_attempt_ms LIMIT ?\(skipLocked))
                RETURNING customer_id
                """, [.integer(leaseUntil), .text(owner), .integer(leaseUntil), .integer(nowMs), .text(endpointId), .text(endpointId),
                      .integer(nowMs), .integer(Int64(limit))]).compactMap { $0.string("customer_id") }
            var claims: [ClaimedWebhookDelivery] = []
            for customer in customers {
                let head = try Self.chainHead(db, endpointId, customer)
                guard let head, (head.int("next_attempt_ms") ?? 0) <= nowMs else {
                    try Self.releaseChain(db, endpointId, customer, head: head, nowMs: nowMs)
                    continue
                }
                claims.append(try Self.holdHead(db, endpointId, customer, head, owner: owner, leaseUntilMs: leaseUntil))
            }
            return claims
        }
        return try await withPayloads(claimed)
    }

    /// Reads the claimed events' JSON (immutable rows: a read of its own, not the claim's write).
    func withPayloads(_ claims: [ClaimedWebhookDelivery]) async throws(KakinError) -> [ClaimedWebhookDelivery] {
        if claims.isEmpty { return [] }
        let payloads = try await read { db -> [String: String] in
            let rows = try db.query("""
                SELECT event_id, payload FROM outbox_events WHERE event_id IN (\(Array(repeating: "?", count: claims.count).joined(separator: ", ")))
                """, claims.map { .text($0.eventId) })
            return Dictionary(rows.map { ($0.string("event_id") ?? "", $0.string("payload") ?? "") }, uniquingKeysWith: { a, _ in a })
        }
        return claims.map { var c = $0; c.payload = payloads[c.eventId]; return c }
    }

    /// Records an attempt's result for a delivery `owner` holds, and either hands the chain's next delivery straight
    /// back (`continueChain`, when it is due now: one write per delivery while a customer's backlog drains) or puts
    /// the chain back, due when its oldest undone delivery is. A delivery that already ended (another worker after a
    /// lapsed lease, or a replay meanwhile) is left as it is; a chain `owner` no longer holds is not touched.
    public func finishWebhookDelivery(_ claim: ClaimedWebhookDelivery, result: WebhookAttemptResult, owner: String, nowMs: Int64,
                                      leaseMs: Int64, continueChain: Bool) async throws(KakinError) -> ClaimedWebhookDelivery? {
        let answer = result.answer.map { String($0.prefix(Self.answerExcerptMax)) }
        let next = try await write { db -> ClaimedWebhookDelivery? in
            try db.execute("""
                UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, last_attempt_ms = ?, last_status = ?, last_answer = ?,
                    next_attempt_ms = ?, finished_at_ms = ?, claimed_by = NULL, lease_until_ms = NULL
                WHERE endpoint_id = ? AND event_id = ? AND state IN ('pending', 'retrying')
                """, [.text(result.state.rawValue), .integer(nowMs), SQLValue(result.status), SQLValue(answer),
                      .integer(result.nextAttemptMs ?? nowMs), result.state == .retrying ? .null : .integer(nowMs),
                      .text(claim.endpointId), .text(claim.eventId)])
            let holder = try db.queryOne("SELECT claimed_by FROM webhook_chains WHERE endpoint_id = ? AND customer_id = ?",
                                         [.text(claim.endpointId), .text(claim.customerId)])?.string("claimed_by")
            guard holder == owner else { return nil }
            let head = try Self.chainHead(db, claim.endpointId, claim.customerId)
            if continueChain, let head, (head.int("next_attempt_ms") ?? 0) <= nowMs {
                try db.execute("UPDATE webhook_chains SET next_attempt_ms = ?, lease_until_ms = ?, updated_at_ms = ? WHERE endpoint_id = ? AND customer_id = ?",
                               [.integer(nowMs + leaseMs), .integer(nowMs + leaseMs), .integer(nowMs), .text(claim.endpointId), .text(claim.customerId)])
                return try Self.holdHead(db, claim.endpointId, claim.customerId, head, owner: owner, leaseUntilMs: nowMs + leaseMs)
            }
            try Self.releaseChain(db, claim.endpointId, claim.customerId, head: head, nowMs: nowMs)
            return nil
        }
        guard let next else { return nil }
        return try await withPayloads([next]).first
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
            var customers: [String] = []
            var seen = Set<String>()
            for e in admitted {
                try db.execute("""
                    INSERT INTO webhook_deliveries (endpoint_id, event_id, customer_id, sequence, state, attempts, created_at_ms, next_attempt_ms, deadline_ms)
                    VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?)
                    ON CONFLICT (endpoint_id, event_id) DO UPDATE SET state = 'pending', attempts = 0, next_attempt_ms = excluded.next_attempt_ms,
                        deadline_ms = excluded.deadline_ms, finished_at_ms = NULL
                    """, [.text(route.endpointId), .text(e.eventId), .text(e.customerId), .integer(e.sequence), .integer(nowMs), .integer(nowMs),
                          .integer(deadlineMs)])
                if seen.insert(e.customerId).inserted { customers.append(e.customerId) }
            }
            for customer in customers {
                try Self.scheduleChain(db, route.endpointId, customer, dueMs: nowMs, nowMs: nowMs)
                // A chain nobody holds is due when its (possibly new) oldest undone delivery is; a held one is put back by its holder.
                try db.execute("""
                    UPDATE webhook_chains SET next_attempt_ms = ?, updated_at_ms = ?
                    WHERE endpoint_id = ? AND customer_id = ? AND (claimed_by IS NULL OR lease_until_ms <= ?)
                    """, [SQLValue(try Self.chainHead(db, route.endpointId, customer)?.int("next_attempt_ms")), .integer(nowMs),
                          .text(route.endpointId), .text(customer), .integer(nowMs)])
            }
            return admitted.count
        }
    }

    // MARK: Retention

    /// One bounded pass of retention: deletes up to `batchMax` finished (delivered or dead) deliveries created before
    /// `deliveryCutoffMs` per configured endpoint, any delivery of an endpoint no longer configured created before it,
    /// idle chains untouched since it, and up to `batchMax` events created before `eventCutoffMs` that no configured
    /// endpoint still has to deliver (an undone delivery) or to fan out (past its cursor). Two cutoffs: events carry
    /// Kakin's clock (the simulator's in local mode), deliveries the worker's real one. Answers the rows deleted;
    /// call again while a batch comes back full.
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
            var behind: [EventFeedCursor] = []
            for id in endpointIds { if let c = try Self.cursor(db, id) { behind.append(c) } }
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
                            SELECT created_at_ms FROM outbox_events WHERE (txid, feed_pos) > (?, ?) ORDER BY txid, feed_pos LIMIT ?) AS behind
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
                    d.deadline_ms, d.last_attempt_ms, d.last_status, d.last_answer, d.claimed_by, d.finished_at_ms
                FROM webhook_deliveries d LEFT JOIN outbox_events e ON e.event_id = d.event_id WHERE d.endpoint_id = ?
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
