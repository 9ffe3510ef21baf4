import KakinCore

/// A stored transaction (the newest signed copy) with how and when Kakin applied it, for the support desk.
public struct StoredTransaction: Sendable, Hashable {
    public var transactionId: String
    public var originalTransactionId: String
    public var bundleId: String
    public var productId: String
    /// Apple's `type` (`Consumable`, `Auto-Renewable Subscription`, …).
    public var productType: String
    public var environment: String
    public var purchaseDateMs: Int64
    public var expiresDateMs: Int64?
    public var revocationDateMs: Int64?
    public var signedDateMs: Int64
    public var appAccountToken: String?
    public var jws: String
    /// The customer its purchase chain is linked to (nil: nobody has claimed it yet).
    public var customerId: String?
    public var firstSeenMs: Int64
    /// Set once it was applied (the 201): when, by which path (`client`, `notification`, `restore`), and the
    /// app's purchase-process ID if it sent one.
    public var appliedAtMs: Int64?
    public var appliedVia: String?
    public var purchaseProcessId: String?
}

/// One line of a customer's timeline, from any of the sources that record what happened to them.
public struct TimelineItem: Sendable, Hashable {
    /// Within one millisecond, items sort by source (higher first), then by key.
    public enum Source: Int, Sendable, Hashable, CaseIterable {
        case transaction = 0, notification, ledger, event, error

        public var name: String {
            switch self {
            case .transaction: return "transaction"
            case .notification: return "notification"
            case .ledger: return "ledger"
            case .event: return "event"
            case .error: return "error"
            }
        }
    }

    public enum Key: Sendable, Hashable, Comparable {
        case seq(Int64)
        case text(String)

        public static func < (a: Key, b: Key) -> Bool {
            switch (a, b) {
            case (.seq(let x), .seq(let y)): return x < y
            case (.text(let x), .text(let y)): return x < y
            case (.seq, .text): return true
            case (.text, .seq): return false
            }
        }

        var string: String {
            switch self {
            case .seq(let n): return "s\(n)"
            case .text(let s): return "t\(s)"
            }
        }

        init?(_ s: Substring) {
            if s.hasPrefix("s"), let n = Int64(s.dropFirst()) {
                self = .seq(n)
            } else if s.hasPrefix("t") {
                self = .text(String(s.dropFirst()))
            } else {
                return nil
            }
        }
    }

    public var atMs: Int64
    public var source: Source
    public var key: Key
    /// e.g. `purchase.applied`, `spend`, `DID_RENEW`, `KKN-3004`.
    public var kind: String
    public var reference: String?
    public var detail: JSONValue

    public var json: JSONValue {
        ["at": .string(Timestamp.rfc3339(atMs)), "source": .string(source.name), "kind": .string(kind),
         "reference": .string(reference), "detail": detail]
    }

    public init(position: TimelineCursor, kind: String, reference: String?, detail: JSONValue) {
        atMs = position.atMs
        source = position.source
        key = position.key
        self.kind = kind
        self.reference = reference
        self.detail = detail
    }
}

/// Where a timeline page continues (opaque to callers).
public struct TimelineCursor: Sendable, Hashable {
    public var atMs: Int64
    public var source: TimelineItem.Source
    public var key: TimelineItem.Key

    public var token: String { Base64.urlEncode(Array("t:\(atMs):\(source.rawValue):\(key.string)".utf8)) }

    init(atMs: Int64, source: TimelineItem.Source, key: TimelineItem.Key) {
        self.atMs = atMs
        self.source = source
        self.key = key
    }

    public init(_ item: TimelineItem) {
        self.init(atMs: item.atMs, source: item.source, key: item.key)
    }

    /// The listing is newest first: (at, source, key) descending.
    func isAfter(_ c: TimelineCursor) -> Bool {
        if atMs != c.atMs { return atMs < c.atMs }
        if source != c.source { return source.rawValue < c.source.rawValue }
        return key < c.key
    }

    public init?(token: String) {
        guard let bytes = Base64.decode(token), let text = String(validating: bytes, as: UTF8.self), text.hasPrefix("t:") else { return nil }
        let parts = text.dropFirst(2).split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let at = Int64(parts[0]), let s = Int(parts[1]), let source = TimelineItem.Source(rawValue: s),
              let key = TimelineItem.Key(parts[2]) else { return nil }
        atMs = at
        self.source = source
        self.key = key
    }
}

public struct TimelinePage: Sendable {
    public var items: [TimelineItem]
    public var nextCursor: TimelineCursor?

    public init(items: [TimelineItem], nextCursor: TimelineCursor?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// One row of a customer's timeline as stored, typed, at its place in the listing.
public struct TimelineRow: Sendable {
    public var position: TimelineCursor
    public var content: Content

    public enum Content: Sendable {
        case transaction(StoredTransaction)
        case notification(StoredNotification)
        case ledger(LedgerEntry)
        /// A timeline entry a use case recorded (`Records.recordTimeline`): its kind, reference and detail JSON text.
        case recorded(kind: String, reference: String?, detail: String?)
        case error(RecentError)
    }
}

public struct TimelineRowsPage: Sendable {
    public var rows: [TimelineRow]
    public var nextCursor: TimelineCursor?
}

extension KakinStore {
    static let storedTransactionSelect = """
        SELECT t.transaction_id AS transaction_id, t.original_transaction_id AS original_transaction_id, t.bundle_id AS bundle_id,
               t.product_id AS product_id, t.product_type AS product_type, t.environment AS environment,
               t.purchase_date_ms AS purchase_date_ms, t.expires_date_ms AS expires_date_ms, t.revocation_date_ms AS revocation_date_ms,
               t.signed_date_ms AS signed_date_ms, t.app_account_token AS app_account_token, t.jws AS jws, t.customer_id AS customer_id,
               t.first_seen_ms AS first_seen_ms, a.applied_at_ms AS applied_at_ms, a.via AS via, a.purchase_process_id AS purchase_process_id
        FROM transactions t LEFT JOIN applied_transactions a ON a.transaction_id = t.transaction_id
        """

    static func storedTransaction(_ r: SQLRow) -> StoredTransaction {
        StoredTransaction(
            transactionId: r.string("transaction_id") ?? "", originalTransactionId: r.string("original_transaction_id") ?? "",
            bundleId: r.string("bundle_id") ?? "", productId: r.string("product_id") ?? "", productType: r.string("product_type") ?? "",
            environment: r.string("environment") ?? "", purchaseDateMs: r.int("purchase_date_ms") ?? 0,
            expiresDateMs: r.int("expires_date_ms"), revocationDateMs: r.int("revocation_date_ms"),
            signedDateMs: r.int("signed_date_ms") ?? 0, appAccountToken: r.string("app_account_token"), jws: r.string("jws") ?? "",
            customerId: r.string("customer_id"), firstSeenMs: r.int("first_seen_ms") ?? 0, appliedAtMs: r.int("applied_at_ms"),
            appliedVia: r.string("via"), purchaseProcessId: r.string("purchase_process_id"))
    }

    /// Transactions whose `transactionId` or `originalTransactionId` is `id` (a whole subscription chain for an
    /// original id), newest purchase first.
    public func transactions(matching id: String, limit: Int) async throws(KakinError) -> [StoredTransaction] {
        try await read { db in
            try db.query("""
                \(Self.storedTransactionSelect) WHERE t.transaction_id = ? OR t.original_transaction_id = ?
                ORDER BY t.purchase_date_ms DESC, t.transaction_id DESC LIMIT ?
                """, [.text(id), .text(id), .integer(Int64(limit))]).map(Self.storedTransaction)
        }
    }

    /// Every stored transaction of a customer, newest purchase first.
    public func transactions(customerId: String, limit: Int) async throws(KakinError) -> [StoredTransaction] {
        try await read { db in
            try db.query("""
                \(Self.storedTransactionSelect) WHERE t.customer_id = ? ORDER BY t.purchase_date_ms DESC, t.transaction_id DESC LIMIT ?
                """, [.text(customerId), .integer(Int64(limit))]).map(Self.storedTransaction)
        }
    }

    /// Transactions the app applied under one `X-Purchase-Process-Id`.
    public func transactions(purchaseProcessId: String, limit: Int) async throws(KakinError) -> [StoredTransaction] {
        try await read { db in
            try db.query("""
                \(Self.storedTransactionSelect) WHERE a.purchase_process_id = ? ORDER BY t.purchase_date_ms DESC LIMIT ?
                """, [.text(purchaseProcessId), .integer(Int64(limit))]).map(Self.storedTransaction)
        }
    }

    public func customer(appAccountToken token: String) async throws(KakinError) -> Customer? {
        try await read { db in
            guard let id = try Self.customerOwningToken(db, token.lowercased()) else { return nil }
            return try Self.loadCustomer(db, id)
        }
    }

    /// The newest signed renewal info of a subscription.
    public func renewalInfoJWS(originalTransactionId: String) async throws(KakinError) -> String? {
        try await read { db in
            try db.queryOne("SELECT jws FROM renewal_infos WHERE original_transaction_id = ?", [.text(originalTransactionId)])?.string("jws")
        }
    }

    /// Records something done to a customer from the support desk (who, what), in their timeline.
    public func recordSupportAction(customerId: String, kind: String, reference: String?, detail: JSONValue) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in try Self.recordEvent(db, customerId: customerId, atMs: now, kind: kind, reference: reference, detail: detail) }
    }

    /// A page of the customer's timeline rows, newest first, from every source (`KakinService`'s `CustomerTimeline`
    /// projects them for display).
    public func timelineRows(customerId: String, limit: Int, after cursor: TimelineCursor?) async throws(KakinError) -> TimelineRowsPage {
        try await read { db in
            var rows: [TimelineRow] = []
            for source in TimelineItem.Source.allCases {
                rows += try Self.timelineRows(db, source, customerId: customerId, limit: limit + 1, after: cursor)
            }
            rows.sort { $1.position.isAfter($0.position) }
            let page = Array(rows.prefix(limit))
            return TimelineRowsPage(rows: page, nextCursor: rows.count > limit ? page.last?.position : nil)
        }
    }

    /// Up to `limit` rows of one source after the cursor, newest first.
    static func timelineRows(_ db: SQLConnection, _ source: TimelineItem.Source, customerId: String, limit: Int,
                             after cursor: TimelineCursor?) throws -> [TimelineRow] {
        // Transactions' signed payloads stay out of the timeline (the pages show them per transaction); a
        // notification's is read for the subscription status it reports.
        let (table, columns, atColumn, keyColumn): (String, String, String, String)
        switch source {
        case .transaction:
            (table, atColumn, keyColumn) = ("transactions", "first_seen_ms", "transaction_id")
            columns = """
                transaction_id, original_transaction_id, bundle_id, product_id, product_type, environment, purchase_date_ms,
                expires_date_ms, revocation_date_ms, signed_date_ms, app_account_token, first_seen_ms
                """
        case .notification:
            (table, atColumn, keyColumn) = ("notifications", "received_at_ms", "notification_uuid")
            columns = Self.notificationColumns
        case .ledger:
            (table, columns, atColumn, keyColumn) = ("ledger_entries", "*", "at_ms", "seq")
        case .event:
            (table, columns, atColumn, keyColumn) = ("events", "*", "at_ms", "seq")
        case .error:
            (table, columns, atColumn, keyColumn) = ("recent_errors", Self.recentErrorColumns, "at_ms", "error_key")
        }
        var condition = ""
        var params: [SQLValue] = [.text(customerId)]
        if let cursor {
            if source.rawValue < cursor.source.rawValue {
                condition = " AND \(atColumn) <= ?"
                params.append(.integer(cursor.atMs))
            } else if source.rawValue > cursor.source.rawValue {
                condition = " AND \(atColumn) < ?"
                params.append(.integer(cursor.atMs))
            } else {
                condition = " AND (\(atColumn) < ? OR (\(atColumn) = ? AND \(keyColumn) < ?))"
                let key: SQLValue
                switch cursor.key {
                case .seq(let n): key = .integer(n)
                case .text(let s): key = .text(s)
                }
                params += [.integer(cursor.atMs), .integer(cursor.atMs), key]
            }
        }
        params.append(.integer(Int64(limit)))
        let rows = try db.query("""
            SELECT \(columns) FROM \(table) WHERE customer_id = ?\(condition) ORDER BY \(atColumn) DESC, \(keyColumn) DESC LIMIT ?
            """, params)
        return rows.map { r in
            let at = r.int(atColumn) ?? 0
            switch source {
            case .transaction:
                let tx = StoredTransaction(
                    transactionId: r.string("transaction_id") ?? "", originalTransactionId: r.string("original_transaction_id") ?? "",
                    bundleId: r.string("bundle_id") ?? "", productId: r.string("product_id") ?? "",
                    productType: r.string("product_type") ?? "", environment: r.string("environment") ?? "",
                    purchaseDateMs: r.int("purchase_date_ms") ?? 0, expiresDateMs: r.int("expires_date_ms"),
                    revocationDateMs: r.int("revocation_date_ms"), signedDateMs: r.int("signed_date_ms") ?? 0,
                    appAccountToken: r.string("app_account_token"), jws: "", customerId: customerId, firstSeenMs: at)
                return TimelineRow(position: TimelineCursor(atMs: at, source: source, key: .text(tx.transactionId)), content: .transaction(tx))
            case .notification:
                let n = Self.storedNotification(r)
                return TimelineRow(position: TimelineCursor(atMs: at, source: source, key: .text(n.notificationUUID)), content: .notification(n))
            case .ledger:
                return TimelineRow(position: TimelineCursor(atMs: at, source: source, key: .seq(r.int("seq") ?? 0)), content: .ledger(Self.ledgerEntry(r)))
            case .event:
                return TimelineRow(position: TimelineCursor(atMs: at, source: source, key: .seq(r.int("seq") ?? 0)),
                                   content: .recorded(kind: r.string("kind") ?? "", reference: r.string("reference"), detail: r.string("detail")))
            case .error:
                let e = Self.recentError(r)
                return TimelineRow(position: TimelineCursor(atMs: at, source: source, key: .text(e.errorKey)), content: .error(e))
            }
        }
    }
}

