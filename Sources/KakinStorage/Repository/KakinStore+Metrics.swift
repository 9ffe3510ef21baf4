import KakinCore

/// One rollup cell as stored (`metric_days`): a metric for an app, a product, a source and a currency on a local date.
public struct MetricCell: Sendable, Hashable {
    public var metric: String
    public var bundleId: String
    public var productId: String
    public var source: String
    public var currency: String
    public var day: Int64
    public var value: Int64

    public init(metric: String, bundleId: String, productId: String, source: String, currency: String, day: Int64, value: Int64) {
        self.metric = metric
        self.bundleId = bundleId
        self.productId = productId
        self.source = source
        self.currency = currency
        self.day = day
        self.value = value
    }
}

/// A customer's ledger entries of one kind in one span of UTC time, summed, as the numbers read them (they only add
/// the deltas up per day, and a day is the same over the whole span: `metricFacts`' `ledgerSpanMs`).
public struct MetricLedgerRow: Sendable, Hashable {
    public var kind: String
    public var paidDelta: Int64
    public var freeDelta: Int64
    /// The span's first millisecond.
    public var atMs: Int64
}

/// A customer's stored facts for the numbers: the newest copy of every transaction it owns (consumables too), the
/// renewal info of each of its subscriptions, its ledger entries (summed per kind and span), the purchases outside the
/// App Store applied to it and the entitlements they give, and the Google Play orders it owns.
public struct StoredMetricFacts: Sendable {
    public var customerId: String
    public var transactions: [TransactionPayload] = []
    public var renewalInfos: [RenewalInfoPayload] = []
    public var ledger: [MetricLedgerRow] = []
    public var externalPurchases: [ExternalPurchaseRow] = []
    public var externalEntitlements: [ExternalEntitlement] = []
    /// Each Play order's newest read, as the one apply kept it (`play_orders`), read again by Play's adapter.
    public var playOrders: [PurchaseFact] = []
}

extension KakinStore {
    static let metricsCursorName = "rollups"
}

/// What a rollup pass read of the events outbox (`customersWithEvents`).
public struct MetricsEventsRead: Sendable {
    /// The customers the events name, each once, in the order of their first event.
    public var customers: [String]
    /// The cursor after the last event taken.
    public var next: EventFeedCursor
    /// Events taken.
    public var events: Int
    /// The feed had nothing after them.
    public var end: Bool
}

extension Records {
    // MARK: Facts

    /// The facts of up to `metricFactsCustomersMax` customers (every one asked for is in the answer, possibly empty).
    /// The ledger comes summed by the engine per kind and per `ledgerSpanMs` of UTC time from the epoch (a span over
    /// which the caller's days do not change), so a customer's long ledger is a few rows here.
    public func metricFacts(customerIds: [String], ledgerSpanMs: Int64) throws -> [StoredMetricFacts] {
        precondition(customerIds.count <= KakinStore.metricFactsCustomersMax, "at most \(KakinStore.metricFactsCustomersMax) customers per read")
        precondition(ledgerSpanMs > 0, "a span is some time")
        guard !customerIds.isEmpty else { return [] }
        var facts = Dictionary(uniqueKeysWithValues: customerIds.map { ($0, StoredMetricFacts(customerId: $0)) })
        let list = Array(repeating: "?", count: customerIds.count).joined(separator: ", ")
        let ids = customerIds.map { SQLValue.text($0) }
        for r in try db.query("SELECT customer_id, COALESCE(status_json, jws) AS payload FROM transactions WHERE customer_id IN (\(list))", ids) {
            guard let c = r.string("customer_id"), let t = r.string("payload").flatMap(StoredStatusFields.transaction) else { continue }
            facts[c]?.transactions.append(t)
        }
        for r in try db.query("""
            SELECT l.customer_id AS customer_id, COALESCE(r.status_json, r.jws) AS payload FROM renewal_infos r
            JOIN original_links l ON l.original_transaction_id = r.original_transaction_id WHERE l.customer_id IN (\(list))
            """, ids) {
            guard let c = r.string("customer_id"), let info = r.string("payload").flatMap(StoredStatusFields.renewalInfo) else { continue }
            facts[c]?.renewalInfos.append(info)
        }
        // The span numbers `at_ms` falls in, rounded down before the epoch too (both engines' integer division truncates
        // towards 0). The width is the caller's constant, written into the text (one prepared statement per width).
        for r in try db.query("""
            SELECT customer_id, kind, SUM(paid_delta) AS paid_delta, SUM(free_delta) AS free_delta,
                (at_ms - CASE WHEN at_ms < 0 THEN \(ledgerSpanMs - 1) ELSE 0 END) / \(ledgerSpanMs) AS ledger_span
            FROM ledger_entries WHERE customer_id IN (\(list)) GROUP BY customer_id, kind, ledger_span
            """, ids) {
            guard let c = r.string("customer_id") else { continue }
            facts[c]?.ledger.append(MetricLedgerRow(kind: r.string("kind") ?? "", paidDelta: r.int("paid_delta") ?? 0,
                                                    freeDelta: r.int("free_delta") ?? 0, atMs: (r.int("ledger_span") ?? 0) * ledgerSpanMs))
        }
        for r in try db.query("SELECT \(Self.purchaseColumns) FROM external_purchases WHERE customer_id IN (\(list)) AND applied = 1", ids) {
            let row = Self.purchaseRow(r)
            if let c = row.customerId { facts[c]?.externalPurchases.append(row) }
        }
        for r in try db.query("SELECT customer_id, entitlement FROM external_entitlements WHERE customer_id IN (\(list))", ids) {
            guard let c = r.string("customer_id"),
                  let e = r.string("entitlement").flatMap({ try? JSONParser.parse($0) }).flatMap(ExternalEntitlement.init(json:)) else { continue }
            facts[c]?.externalEntitlements.append(e)
        }
        for r in try db.query("""
            SELECT o.customer_id AS customer_id, o.order_id AS order_id, o.chain_id AS chain_id, o.read_at_ms AS read_at_ms,
                o.resource AS resource, o.revocation AS revocation, o.charge AS charge, t.package_name AS package_name, t.kind AS kind
            FROM play_orders o JOIN play_tokens t ON t.purchase_token = o.purchase_token WHERE o.customer_id IN (\(list))
            """, ids) {
            guard let c = r.string("customer_id"), let order = Self.playOrder(r) else { continue }
            facts[c]?.playOrders.append(order)
        }
        return customerIds.map { facts[$0]! }
    }

    /// Customer IDs after `after` in ID order, at most `limit` (a rebuild's pages).
    public func customerIds(after: String?, limit: Int) throws -> [String] {
        try db.query("SELECT customer_id FROM customers WHERE customer_id > ? ORDER BY customer_id LIMIT ?",
                     [.text(after ?? ""), .integer(Int64(limit))]).compactMap { $0.string("customer_id") }
    }

    // MARK: The outbox cursor

    /// Gives the rollup worker its cursor at the start of the feed unless it has one, so the outbox's retention waits for
    /// it from the first start on (`purgeOutbox`).
    public func registerMetricsCursor() throws {
        try db.execute("""
            INSERT INTO metric_cursors (name, txid, feed_pos, updated_at_ms) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING
            """, [.text(KakinStore.metricsCursorName), .integer(EventFeedCursor.start.txid), .integer(EventFeedCursor.start.position), .integer(nowMs)])
    }

    /// Where the rollup worker has read the events outbox to (the start before its first pass).
    public func metricsCursor() throws -> EventFeedCursor {
        guard let r = try db.queryOne("SELECT txid, feed_pos FROM metric_cursors WHERE name = ?", [.text(KakinStore.metricsCursorName)]) else {
            return .start
        }
        return EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)
    }

    public func setMetricsCursor(_ cursor: EventFeedCursor) throws {
        try db.execute("""
            INSERT INTO metric_cursors (name, txid, feed_pos, updated_at_ms) VALUES (?, ?, ?, ?)
            ON CONFLICT (name) DO UPDATE SET txid = excluded.txid, feed_pos = excluded.feed_pos, updated_at_ms = excluded.updated_at_ms
            """, [.text(KakinStore.metricsCursorName), .integer(cursor.txid), .integer(cursor.position), .integer(nowMs)])
    }

    /// Moves the cursor from `from` to `to` if it is still at `from` (a compare-and-set in one statement; false: another
    /// pass moved it). Only rollup passes and rebuilds touch this row, so reading it in a write conflicts with no ingest.
    public func moveMetricsCursor(from: EventFeedCursor, to: EventFeedCursor) throws -> Bool {
        let moved = try db.execute("""
            UPDATE metric_cursors SET txid = ?, feed_pos = ?, updated_at_ms = ? WHERE name = ? AND txid = ? AND feed_pos = ?
            """, [.integer(to.txid), .integer(to.position), .integer(nowMs), .text(KakinStore.metricsCursorName), .integer(from.txid),
                  .integer(from.position)])
        if moved > 0 { return true }
        // No row yet reads as the start (`metricsCursor`): a move from there creates it, unless another pass did first.
        guard from == .start else { return false }
        return try db.execute("""
            INSERT INTO metric_cursors (name, txid, feed_pos, updated_at_ms) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO NOTHING
            """, [.text(KakinStore.metricsCursorName), .integer(to.txid), .integer(to.position), .integer(nowMs)]) > 0
    }

    /// The customers of the events after `cursor` in feed order (only what no later commit can precede, as the feed
    /// serves), each once: events are read `metricEventsPerReadMax` a statement until `eventsMax` were taken, the feed
    /// ends, or the next event's customer would be one more than `customersMax` (that event and those after it are left
    /// for the next read).
    public func customersWithEvents(after cursor: EventFeedCursor, eventsMax: Int, customersMax: Int) throws -> MetricsEventsRead {
        precondition(eventsMax > 0 && customersMax > 0, "a read takes at least one event")
        var read = MetricsEventsRead(customers: [], next: cursor, events: 0, end: false)
        var seen = Set<String>()
        while read.events < eventsMax {
            let limit = min(KakinStore.metricEventsPerReadMax, eventsMax - read.events)
            let rows = try db.query("""
                SELECT txid, feed_pos, customer_id FROM outbox_events WHERE \(KakinStore.afterFeedCursor(db))\(KakinStore.feedVisibility(db))
                ORDER BY txid, feed_pos LIMIT ?
                """, [.integer(read.next.txid), .integer(read.next.position), .integer(Int64(limit))])
            for r in rows {
                if let c = r.string("customer_id"), !seen.contains(c) {
                    guard read.customers.count < customersMax else { return read }
                    seen.insert(c)
                    read.customers.append(c)
                }
                read.next = EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)
                read.events += 1
            }
            if rows.count < limit {
                read.end = true
                break
            }
        }
        return read
    }

    /// The last event committed, whether or not the feed serves it yet (on PostgreSQL it waits for older transactions).
    public func eventFeedLastCommitted() throws -> EventFeedCursor {
        guard let r = try db.queryOne("SELECT txid, feed_pos FROM outbox_events ORDER BY txid DESC, feed_pos DESC LIMIT 1", []) else {
            return .start
        }
        return EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)
    }

    /// The end of what the feed serves now (a rebuild's cursor).
    public func eventFeedEnd() throws -> EventFeedCursor {
        guard let r = try db.queryOne("""
            SELECT txid, feed_pos FROM outbox_events WHERE 1 = 1\(KakinStore.feedVisibility(db)) ORDER BY txid DESC, feed_pos DESC LIMIT 1
            """, []) else { return .start }
        return EventFeedCursor(txid: r.int("txid") ?? 0, position: r.int("feed_pos") ?? 0)
    }

    // MARK: Shares and rollups

    /// The stored shares (`Contribution.json`) of these customers; absent = none yet.
    public func metricContributions(customerIds: [String]) throws -> [String: String] {
        guard !customerIds.isEmpty else { return [:] }
        let list = Array(repeating: "?", count: customerIds.count).joined(separator: ", ")
        var out: [String: String] = [:]
        for r in try db.query("SELECT customer_id, cells FROM metric_contributions WHERE customer_id IN (\(list))", customerIds.map { .text($0) }) {
            if let c = r.string("customer_id"), let cells = r.string("cells") { out[c] = cells }
        }
        return out
    }

    /// Each customer's last event sequence (absent: none yet). A rebuild compares it with what it read on a snapshot: a
    /// customer with an event since has facts the rollup worker counts.
    public func lastEventSequences(customerIds: [String]) throws -> [String: Int64] {
        guard !customerIds.isEmpty else { return [:] }
        let list = Array(repeating: "?", count: customerIds.count).joined(separator: ", ")
        var out: [String: Int64] = [:]
        for r in try db.query("SELECT customer_id, last_sequence FROM outbox_heads WHERE customer_id IN (\(list))", customerIds.map { .text($0) }) {
            if let c = r.string("customer_id") { out[c] = r.int("last_sequence") ?? 0 }
        }
        return out
    }

    /// Stores customers' shares (nil: it counts nothing, the row goes), each customer at most once: one multi-row
    /// upsert per chunk of `metricRowsPerStatementMax`, one DELETE per chunk of the emptied ones.
    public func setMetricContributions(_ shares: [(customerId: String, cells: String?)]) throws {
        precondition(Set(shares.map(\.customerId)).count == shares.count, "a customer's share is stored once per call")
        let kept = shares.compactMap { s in s.cells.map { (s.customerId, $0) } }
        for chunk in SQLList.chunks(kept.count, max: KakinStore.metricRowsPerStatementMax) {
            try db.execute("""
                INSERT INTO metric_contributions (customer_id, cells, updated_at_ms) VALUES \(SQLList.rows(chunk.count, "(?, ?, ?)"))
                ON CONFLICT (customer_id) DO UPDATE SET cells = excluded.cells, updated_at_ms = excluded.updated_at_ms
                """, kept[chunk].flatMap { [SQLValue.text($0.0), .text($0.1), .integer(nowMs)] })
        }
        let emptied = shares.filter { $0.cells == nil }.map { SQLValue.text($0.customerId) }
        for chunk in SQLList.chunks(emptied.count, max: KakinStore.metricRowsPerStatementMax) {
            let list = SQLList.inList(Array(emptied[chunk]))
            try db.execute("DELETE FROM metric_contributions WHERE customer_id IN (\(list.sql))", list.parameters)
        }
    }

    /// Adds each cell's value to the rollups (a cell that reaches zero is removed): one multi-row upsert per chunk of
    /// `metricRowsPerStatementMax` cells, each key at most once (a `Contribution`'s cells), and a DELETE per cell that
    /// reached zero.
    public func addToMetricDays(_ cells: [MetricCell]) throws {
        let moving = cells.filter { $0.value != 0 }
        precondition(Set(moving.map(KakinStore.metricKey)).count == moving.count, "a rollup cell is moved once per call")
        var zero: [MetricCell] = []
        for chunk in SQLList.chunks(moving.count, max: KakinStore.metricRowsPerStatementMax) {
            let rows = try db.query("""
                INSERT INTO metric_days (metric, bundle_id, product_id, source, currency, day, value) VALUES \(SQLList.rows(chunk.count, "(?, ?, ?, ?, ?, ?, ?)"))
                ON CONFLICT (metric, bundle_id, product_id, source, currency, day) DO UPDATE SET value = metric_days.value + excluded.value
                RETURNING metric, bundle_id, product_id, source, currency, day, value
                """, moving[chunk].flatMap { c in KakinStore.metricKey(c) + [.integer(c.value)] })
            precondition(rows.count == chunk.count, "every upserted cell answers its value")
            zero += rows.map(KakinStore.metricCell).filter { $0.value == 0 }
        }
        for c in zero {
            try db.execute("""
                DELETE FROM metric_days WHERE metric = ? AND bundle_id = ? AND product_id = ? AND source = ? AND currency = ? AND day = ? AND value = 0
                """, KakinStore.metricKey(c))
        }
    }

    /// Every rollup cell (a rebuild's comparison; the rollups are small: metrics × products × sources × currencies × days).
    public func allMetricDays() throws -> [MetricCell] {
        try db.query("SELECT metric, bundle_id, product_id, source, currency, day, value FROM metric_days", []).map(KakinStore.metricCell)
    }

    /// Stored shares in customer order after `after`, at most `limit` (a rebuild sums them page by page on one snapshot).
    public func metricContributions(after: String?, limit: Int) throws -> [(customerId: String, cells: String)] {
        try db.query("SELECT customer_id, cells FROM metric_contributions WHERE customer_id > ? ORDER BY customer_id LIMIT ?",
                     [.text(after ?? ""), .integer(Int64(limit))]).compactMap { r in
            guard let c = r.string("customer_id"), let cells = r.string("cells") else { return nil }
            return (c, cells)
        }
    }
}

extension KakinStore {
    /// A cell's key as the parameters of `metric_days`' key columns, in their order.
    static func metricKey(_ c: MetricCell) -> [SQLValue] {
        [.text(c.metric), .text(c.bundleId), .text(c.productId), .text(c.source), .text(c.currency), .integer(c.day)]
    }

    static func metricCell(_ r: SQLRow) -> MetricCell {
        MetricCell(metric: r.string("metric") ?? "", bundleId: r.string("bundle_id") ?? "", productId: r.string("product_id") ?? "",
                   source: r.string("source") ?? "", currency: r.string("currency") ?? "", day: r.int("day") ?? 0, value: r.int("value") ?? 0)
    }

    /// Rollups summed over days (`day` column answered as 0): the level metrics up to `day` (inclusive), one query.
    public func metricLevels(_ metrics: [String], upToDay day: Int64) async throws(KakinError) -> [MetricCell] {
        try await read { db in try Self.metricSums(db, metrics, "day <= ?", [.integer(day)]) }
    }

    /// Rollups summed over the days `from…to`.
    public func metricFlows(_ metrics: [String], fromDay: Int64, toDay: Int64) async throws(KakinError) -> [MetricCell] {
        try await read { db in try Self.metricSums(db, metrics, "day BETWEEN ? AND ?", [.integer(fromDay), .integer(toDay)]) }
    }

    /// An overview's three sums on one snapshot: levels before `from`, levels at `to`, flows in between.
    public func metricOverviewSums(levels: [String], flows: [String], fromDay: Int64, toDay: Int64) async throws(KakinError)
        -> (before: [MetricCell], atEnd: [MetricCell], flows: [MetricCell])
    {
        try await read { db in
            (try Self.metricSums(db, levels, "day < ?", [.integer(fromDay)]),
             try Self.metricSums(db, levels, "day <= ?", [.integer(toDay)]),
             try Self.metricSums(db, flows, "day BETWEEN ? AND ?", [.integer(fromDay), .integer(toDay)]))
        }
    }

    /// A series' inputs on one snapshot: levels before `from`, and every cell of the days `from…to`.
    public func metricSeriesCells(levels: [String], fromDay: Int64, toDay: Int64) async throws(KakinError) -> (before: [MetricCell], days: [MetricCell]) {
        try await read { db in
            (try Self.metricSums(db, levels, "day < ?", [.integer(fromDay)]),
             try db.query("SELECT metric, bundle_id, product_id, source, currency, day, value FROM metric_days WHERE day BETWEEN ? AND ?",
                          [.integer(fromDay), .integer(toDay)]).map(Self.metricCell))
        }
    }

    static func metricSums(_ db: SQLConnection, _ metrics: [String], _ condition: String, _ parameters: [SQLValue]) throws -> [MetricCell] {
        guard !metrics.isEmpty else { return [] }
        let list = Array(repeating: "?", count: metrics.count).joined(separator: ", ")
        return try db.query("""
            SELECT metric, bundle_id, product_id, source, currency, 0 AS day, SUM(value) AS value FROM metric_days
            WHERE metric IN (\(list)) AND \(condition) GROUP BY metric, bundle_id, product_id, source, currency
            """, metrics.map { .text($0) } + parameters).map(metricCell)
    }

    /// The sources the rollups count anything for (the desk's source filter).
    public func metricSources() async throws(KakinError) -> [String] {
        try await read { db in
            try db.query("SELECT DISTINCT source FROM metric_days WHERE source <> '' ORDER BY source", []).compactMap { $0.string("source") }
        }
    }
}
