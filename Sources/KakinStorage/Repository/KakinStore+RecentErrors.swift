import KakinCore

/// An error Kakin answered, kept so that support can look it up by the request ID an app showed (every
/// process writes here, so any process can answer). Bounded: pruned by age and count.
public struct RecentError: Sendable, Hashable {
    /// Unique per row (request IDs are unique per process only).
    public var errorKey: String
    public var requestId: String
    public var atMs: Int64
    /// `KKN-…`.
    public var errorId: String
    public var code: String
    public var httpStatus: Int
    public var message: String
    public var method: String
    public var path: String
    public var customerId: String?
    /// The app's `X-Purchase-Process-Id`, when it sent one.
    public var purchaseProcessId: String?
    /// The transaction the request named (as the app sent it; not verified).
    public var transactionId: String?
    /// The log-only detail (never a token, key or whole JWS); shown to admins only.
    public var detail: String?

    public init(errorKey: String, requestId: String, atMs: Int64, errorId: String, code: String, httpStatus: Int, message: String,
                method: String, path: String, customerId: String? = nil, purchaseProcessId: String? = nil, transactionId: String? = nil,
                detail: String? = nil) {
        self.errorKey = errorKey
        self.requestId = requestId
        self.atMs = atMs
        self.errorId = errorId
        self.code = code
        self.httpStatus = httpStatus
        self.message = message
        self.method = method
        self.path = path
        self.customerId = customerId
        self.purchaseProcessId = purchaseProcessId
        self.transactionId = transactionId
        self.detail = detail
    }

    public var json: JSONValue {
        ["requestId": .string(requestId), "at": .string(Timestamp.rfc3339(atMs)), "id": .string(errorId), "code": .string(code),
         "httpStatus": .int(Int64(httpStatus)), "message": .string(message), "method": .string(method), "path": .string(path),
         "customerId": .string(customerId), "purchaseProcessId": .string(purchaseProcessId), "transactionId": .string(transactionId),
         "detail": .string(detail)]
    }
}

extension KakinStore {
    static let recentErrorColumns = """
        error_key, request_id, at_ms, error_id, code, http_status, message, method, path, customer_id, purchase_process_id,
        transaction_id, detail
        """

    static func recentError(_ r: SQLRow) -> RecentError {
        RecentError(errorKey: r.string("error_key") ?? "", requestId: r.string("request_id") ?? "", atMs: r.int("at_ms") ?? 0,
                    errorId: r.string("error_id") ?? "", code: r.string("code") ?? "", httpStatus: Int(r.int("http_status") ?? 0),
                    message: r.string("message") ?? "", method: r.string("method") ?? "", path: r.string("path") ?? "",
                    customerId: r.string("customer_id"), purchaseProcessId: r.string("purchase_process_id"),
                    transactionId: r.string("transaction_id"), detail: r.string("detail"))
    }

    /// Stores a batch of errors in one write. With `prune`, also drops rows older than `keepForMs` before the
    /// newest and everything beyond the newest `keepMax` (pruning reads an index, so callers do it now and then).
    public func recordErrors(_ errors: [RecentError], keepMax: Int, keepForMs: Int64, prune: Bool) async throws(KakinError) {
        guard !errors.isEmpty || prune else { return }
        let now = clock.nowMs()
        try await write { db in
            for e in errors {
                try db.execute("""
                    INSERT INTO recent_errors (error_key, request_id, at_ms, error_id, code, http_status, message, method, path,
                        customer_id, purchase_process_id, transaction_id, detail)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (error_key) DO NOTHING
                    """, [.text(e.errorKey), .text(e.requestId), .integer(e.atMs), .text(e.errorId), .text(e.code),
                          .integer(Int64(e.httpStatus)), .text(e.message), .text(e.method), .text(e.path), SQLValue(e.customerId),
                          SQLValue(e.purchaseProcessId), SQLValue(e.transactionId), SQLValue(e.detail)])
            }
            if prune {
                try db.execute("DELETE FROM recent_errors WHERE at_ms < ?", [.integer(now - keepForMs)])
                try db.execute("""
                    DELETE FROM recent_errors WHERE at_ms < (SELECT at_ms FROM recent_errors ORDER BY at_ms DESC LIMIT 1 OFFSET ?)
                    """, [.integer(Int64(keepMax))])
            }
        }
    }

    /// The errors answered to one request ID (normally one; two processes may have reused an ID).
    public func recentErrors(requestId: String) async throws(KakinError) -> [RecentError] {
        try await read { db in
            try db.query("SELECT \(Self.recentErrorColumns) FROM recent_errors WHERE request_id = ? ORDER BY at_ms DESC LIMIT 10",
                         [.text(requestId)]).map(Self.recentError)
        }
    }

    /// Recent errors matching one column (`error_id`, `customer_id`, `purchase_process_id`, `transaction_id`), newest first.
    public func recentErrors(where column: RecentErrorColumn, equals value: String, limit: Int) async throws(KakinError) -> [RecentError] {
        try await read { db in
            try db.query("SELECT \(Self.recentErrorColumns) FROM recent_errors WHERE \(column.rawValue) = ? ORDER BY at_ms DESC LIMIT ?",
                         [.text(value), .integer(Int64(limit))]).map(Self.recentError)
        }
    }
}

/// The indexed columns recent errors can be looked up by.
public enum RecentErrorColumn: String, Sendable {
    case errorId = "error_id"
    case customerId = "customer_id"
    case purchaseProcessId = "purchase_process_id"
    case transactionId = "transaction_id"
}
