import KakinCore

/// What `kakin export` writes (`docs/export.md`): four tables, each with stable columns, selected by the time each row
/// was last written (`--since` ≤ time < the run's `until`), read in pages by a unique key.
public enum ExportTable: String, Sendable, CaseIterable {
    case transactions, ledger, events, customers

    /// The columns, in file order (CSV header, JSON lines keys). Never reordered or renamed; new ones go at the end.
    public var columns: [String] {
        switch self {
        case .transactions:
            return ["transactionId", "originalTransactionId", "customerId", "bundleId", "productId", "productType", "environment",
                    "purchaseDate", "expiresDate", "revocationDate", "revocationType", "price", "currency", "quantity", "offerType",
                    "offerDiscountType", "transactionReason", "ownership", "isUpgraded", "storefront", "firstSeenAt", "updatedAt", "source"]
        case .ledger:
            return ["entryId", "seq", "customerId", "at", "kind", "paidDelta", "freeDelta", "paidAfter", "freeAfter", "reference", "item",
                    "recipient", "priceMilli", "currency"]
        case .events:
            return ["eventId", "customerId", "sequence", "type", "createdAt", "environment", "bundleId", "payload"]
        case .customers:
            return ["customerId", "appAccountToken", "createdAt"]
        }
    }

    /// The row's unique key column (pages follow it) and the time column `--since` selects on.
    var keyColumn: String {
        switch self {
        case .transactions: return "transaction_id"
        case .ledger: return "seq"
        case .events: return "feed_pos"
        case .customers: return "customer_id"
        }
    }

    var timeColumn: String {
        switch self {
        case .transactions: return "updated_ms"
        case .ledger: return "at_ms"
        case .events: return "created_at_ms"
        case .customers: return "created_at_ms"
        }
    }

    var select: String {
        switch self {
        case .transactions:
            // The App Store's transactions and Google Play's orders (`order_id` set), one key space (Play's are `GPA.…`).
            return """
                SELECT * FROM (
                    SELECT transaction_id, customer_id, product_type, first_seen_ms, updated_ms, COALESCE(status_json, jws) AS payload,
                        NULL AS order_id, NULL AS chain_id, NULL AS package_name, NULL AS kind, NULL AS resource, NULL AS revocation,
                        NULL AS charge, NULL AS read_at_ms FROM transactions
                    UNION ALL
                    SELECT o.order_id, o.customer_id, NULL, o.read_at_ms,
                        CASE WHEN o.charge_read_ms > o.read_at_ms THEN o.charge_read_ms ELSE o.read_at_ms END, NULL,
                        o.order_id, o.chain_id, t.package_name, t.kind, o.resource, o.revocation, o.charge, o.read_at_ms
                    FROM play_orders o JOIN play_tokens t ON t.purchase_token = o.purchase_token
                ) AS x
                """
        case .ledger:
            return """
                SELECT seq, entry_id, customer_id, at_ms, kind, paid_delta, free_delta, paid_after, free_after, reference, item, recipient,
                    price_milli, currency FROM ledger_entries
                """
        case .events:
            return "SELECT feed_pos, event_id, customer_id, sequence, event_type, created_at_ms, environment, bundle_id, payload FROM outbox_events"
        case .customers:
            return "SELECT customer_id, app_account_token, created_at_ms FROM customers"
        }
    }
}

/// One exported row: its page key and its values by column.
public struct ExportRow: Sendable {
    public var key: String
    public var values: [String: JSONValue]
}

/// The clock Kakin stamps rows with when it is not the wall clock — local mode's simulated clock, which moves only
/// when told (or at `rate` simulated ms per real ms) — as one reading: what it said (`simulatedMs`) at wall time
/// `wallMs`. Local mode records it in the database at start, after every clock move and at shutdown (stopped), so
/// `kakin export`, another process, takes its window from the clock the rows were stamped with.
public struct StampClock: Sendable, Equatable {
    public var simulatedMs: Int64
    public var wallMs: Int64
    /// Simulated ms per real ms; 0: the clock stands still between moves.
    public var rate: Double

    public init(simulatedMs: Int64, wallMs: Int64, rate: Double) {
        precondition(rate >= 0, "a stamp clock never runs backwards")
        self.simulatedMs = simulatedMs
        self.wallMs = wallMs
        self.rate = rate
    }

    /// What the clock says at wall time `atWallMs` (never before the reading: it may have jumped just then).
    public func nowMs(atWallMs: Int64) -> Int64 {
        simulatedMs + Int64((Double(max(0, atWallMs - wallMs)) * rate).rounded(.down))
    }

    var json: JSONValue { ["simulatedMs": .int(simulatedMs), "wallMs": .int(wallMs), "rate": .double(rate)] }

    init?(json: JSONValue) {
        guard let simulated = json["simulatedMs"]?.int64Value, let wall = json["wallMs"]?.int64Value, let rate = json["rate"]?.doubleValue,
              rate >= 0 else { return nil }
        self.init(simulatedMs: simulated, wallMs: wall, rate: rate)
    }
}

extension KakinStore {
    /// `sync_state`'s name for the recorded `StampClock`.
    static let stampClockName = "stamps.clock"

    /// Records the clock rows are stamped with (local mode: the simulator's).
    public func recordStampClock(_ clock: StampClock) async throws(KakinError) {
        try await setSyncValue(Self.stampClockName, clock.json.jsonString)
    }

    /// The recorded stamp clock; nil for a database whose rows carry the wall clock (every server with a config).
    public func stampClock() async throws(KakinError) -> StampClock? {
        guard let text = try await syncValue(Self.stampClockName), let json = try? JSONParser.parse(Array(text.utf8)) else { return nil }
        return StampClock(json: json)
    }

    /// Rows of `table` written in `[sinceMs, untilMs)`, after `afterKey` in key order, at most `limit`.
    public func exportPage(_ table: ExportTable, sinceMs: Int64, untilMs: Int64, afterKey: String?, limit: Int) async throws(KakinError) -> [ExportRow] {
        precondition((1...Self.exportPageRowsMax).contains(limit), "export pages are 1...\(Self.exportPageRowsMax) rows")
        return try await read { db in
            let numericKey = table == .ledger || table == .events
            var parameters: [SQLValue] = [.integer(sinceMs), .integer(untilMs)]
            var after = ""
            if let afterKey {
                after = " AND \(table.keyColumn) > ?"
                parameters.append(numericKey ? .integer(Int64(afterKey) ?? 0) : .text(afterKey))
            }
            parameters.append(.integer(Int64(limit)))
            let rows = try db.query("""
                \(table.select) WHERE \(table.timeColumn) >= ? AND \(table.timeColumn) < ?\(after) ORDER BY \(table.keyColumn) LIMIT ?
                """, parameters)
            return rows.map { Self.exportRow(table, $0) }
        }
    }

    static func exportRow(_ table: ExportTable, _ r: SQLRow) -> ExportRow {
        func text(_ c: String) -> JSONValue { r.string(c).map(JSONValue.string) ?? .null }
        func int(_ c: String) -> JSONValue { r.int(c).map(JSONValue.int) ?? .null }
        func time(_ c: String) -> JSONValue { r.int(c).map { .string(Timestamp.rfc3339($0)) } ?? .null }
        switch table {
        case .transactions where r.string("order_id") != nil:
            return ExportRow(key: r.string("transaction_id") ?? "", values: playOrderValues(r))
        case .transactions:
            let t = r.string("payload").flatMap(StoredStatusFields.transaction)
            func ms(_ v: Int64?) -> JSONValue { v.map { .string(Timestamp.rfc3339($0)) } ?? .null }
            let values: [String: JSONValue] = [
                "transactionId": text("transaction_id"), "originalTransactionId": t.map { .string($0.originalTransactionId) } ?? .null,
                "customerId": text("customer_id"), "bundleId": t.map { .string($0.bundleId) } ?? .null,
                "productId": t.map { .string($0.productId) } ?? .null, "productType": text("product_type"),
                "environment": t.map { .string($0.environment.rawValue) } ?? .null, "purchaseDate": ms(t?.purchaseDate),
                "expiresDate": ms(t?.expiresDate), "revocationDate": ms(t?.revocationDate),
                "revocationType": t?.revocationType.map { .string($0.rawValue) } ?? .null, "price": t?.price.map(JSONValue.int) ?? .null,
                "currency": t?.currency.map(JSONValue.string) ?? .null, "quantity": t.map { .int(Int64($0.quantity)) } ?? .null,
                "offerType": t?.offerType.map { .int(Int64($0.rawValue)) } ?? .null,
                "offerDiscountType": t?.offerDiscountType.map { .string($0.rawValue) } ?? .null,
                "transactionReason": t?.transactionReason.map { .string($0.rawValue) } ?? .null,
                "ownership": t.map { .string($0.inAppOwnershipType.rawValue) } ?? .null, "isUpgraded": t.map { .bool($0.isUpgraded) } ?? .null,
                "storefront": t?.storefront.map(JSONValue.string) ?? .null, "firstSeenAt": time("first_seen_ms"), "updatedAt": time("updated_ms"),
                "source": .string(PurchaseSource.appStore),
            ]
            return ExportRow(key: r.string("transaction_id") ?? "", values: values)
        case .ledger:
            return ExportRow(key: String(r.int("seq") ?? 0), values: [
                "entryId": text("entry_id"), "seq": int("seq"), "customerId": text("customer_id"), "at": time("at_ms"), "kind": text("kind"),
                "paidDelta": int("paid_delta"), "freeDelta": int("free_delta"), "paidAfter": int("paid_after"), "freeAfter": int("free_after"),
                "reference": text("reference"), "item": text("item"), "recipient": text("recipient"), "priceMilli": int("price_milli"),
                "currency": text("currency"),
            ])
        case .events:
            return ExportRow(key: String(r.int("feed_pos") ?? 0), values: [
                "eventId": text("event_id"), "customerId": text("customer_id"), "sequence": int("sequence"), "type": text("event_type"),
                "createdAt": time("created_at_ms"), "environment": text("environment"), "bundleId": text("bundle_id"),
                "payload": r.string("payload").flatMap { try? JSONParser.parse(Array($0.utf8)) } ?? .null,
            ])
        case .customers:
            return ExportRow(key: r.string("customer_id") ?? "", values: [
                "customerId": text("customer_id"), "appAccountToken": text("app_account_token"), "createdAt": time("created_at_ms"),
            ])
        }
    }

    /// A Google Play order as a `transactions` row (`docs/export.md`): the order, its chain, the package, the price it
    /// charged (`orders.get`'s `total`, else a subscription plan's price until that is read), its voided refund.
    static func playOrderValues(_ r: SQLRow) -> [String: JSONValue] {
        func ms(_ v: Int64?) -> JSONValue { v.map { .string(Timestamp.rfc3339($0)) } ?? .null }
        let fact = Records.playOrder(r)
        let orderId = r.string("order_id") ?? ""
        let charged = r.string("charge").flatMap { try? JSONParser.parse($0) }
        return [
            "transactionId": .string(orderId), "originalTransactionId": r.string("chain_id").map(JSONValue.string) ?? .null,
            "customerId": r.string("customer_id").map(JSONValue.string) ?? .null, "bundleId": r.string("package_name").map(JSONValue.string) ?? .null,
            "productId": fact.map { .string($0.productId) } ?? .null,
            "productType": fact?.storeKind.map { .string($0.appleType.rawValue) } ?? .null, "environment": .null,
            "purchaseDate": ms(charged?["createTime"]?.stringValue.flatMap(Timestamp.parseRFC3339) ?? fact?.purchasedAtMs),
            "expiresDate": ms(fact?.expiresAtMs), "revocationDate": ms(fact?.revocation?.atMs), "revocationType": .null,
            "price": fact?.priceMilli.map(JSONValue.int) ?? .null, "currency": fact?.currency.map(JSONValue.string) ?? .null,
            "quantity": fact.map { .int(Int64($0.quantity)) } ?? .null, "offerType": .null,
            "offerDiscountType": fact?.offer?.type == "freeTrial" ? "FREE_TRIAL" : .null,
            "transactionReason": .string(orderId.contains("..") ? "RENEWAL" : "PURCHASE"), "ownership": "PURCHASED", "isUpgraded": .null,
            "storefront": .null, "firstSeenAt": ms(r.int("read_at_ms")), "updatedAt": ms(r.int("updated_ms")),
            "source": .string(PlayPurchaseFacts.source),
        ]
    }
}
