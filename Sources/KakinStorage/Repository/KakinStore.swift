import KakinCore

/// Kakin's data, over any `SQLDatabase` (SQLite, or PostgreSQL running the same statements).
/// Every state change happens inside one `write` body, so its idempotency key, its ledger entry and the
/// balance it moves commit together or not at all. A body may run more than once (PostgreSQL re-runs a
/// transaction after a serialization failure) and beside other processes' bodies: it does nothing but
/// SQL, draws ids before the write, and decides from what it reads in the same transaction.
public final class KakinStore: Sendable {
    public let database: any SQLDatabase
    /// Where ids and tokens come from (also the nonces of signed offers).
    public let ids: any IDGenerator
    let clock: any Clock

    public init(database: any SQLDatabase, ids: any IDGenerator, clock: any Clock) {
        self.database = database
        self.ids = ids
        self.clock = clock
    }

    public static var migrations: [SQLMigration] { Schema.migrations }

    public func migrate() async throws(KakinError) {
        try await storage { try await self.database.migrate(Schema.migrations) }
    }

    /// Runs a database call, turning storage failures into the catalogue's errors while passing domain errors
    /// (`KakinError`) through unchanged. All 503: a full disk `storage_full`, a full queue
    /// `service_unavailable` (both with `Retry-After`); an unreachable database, a commit without an answer
    /// and conflicts past the retries `retryable_failure` (PostgreSQL); others `storage_unavailable`.
    func storage<T>(_ body: () async throws -> T) async throws(KakinError) -> T {
        do {
            return try await body()
        } catch let error as KakinError {
            throw error
        } catch let error as SQLError {
            let kind: ErrorKind
            var message: String?
            switch error.kind {
            case .full: kind = .storageFull
            case .overloaded: (kind, message) = (.serviceUnavailable, "The database is overloaded; retry shortly.")
            case .unavailable: kind = .databaseUnavailable
            case .outcomeUnknown: kind = .writeOutcomeUnknown
            case .conflict: kind = .writeConflict
            default: kind = .storageUnavailable
            }
            throw KakinError(kind, message, detail: String(describing: error))
        } catch {
            throw KakinError(.storageUnavailable, detail: String(describing: error))
        }
    }

    @discardableResult
    func write<T: Sendable>(_ body: @escaping @Sendable (SQLConnection) throws -> T) async throws(KakinError) -> T {
        try await storage { try await self.database.write(body) }
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (SQLConnection) throws -> T) async throws(KakinError) -> T {
        try await storage { try await self.database.read(body) }
    }

    /// `read` for one statement on an indexed key and a few pages (`SQLDatabase.shortRead`): a wallet. Not a status
    /// read: its pages are re-read after every commit (SQLite drops a connection's cache when the database changed), which
    /// the reader threads' shared read transactions pay once a batch.
    func shortRead<T: Sendable>(_ body: @escaping @Sendable (SQLConnection) throws -> T) async throws(KakinError) -> T {
        try await storage { try await self.database.shortRead(body) }
    }

    // MARK: Customers

    public struct Customer: Sendable, Hashable {
        public var customerId: String
        public var appAccountToken: String
        public var createdAtMs: Int64
        /// When a RESCIND_CONSENT arrived for the customer (migration 15); nil: never.
        public var consentRescindedAtMs: Int64? = nil
    }

    public func customer(_ customerId: String) async throws(KakinError) -> Customer? {
        try await read { db in try Self.loadCustomer(db, customerId) }
    }

    static func loadCustomer(_ db: SQLConnection, _ customerId: String) throws -> Customer? {
        try db.queryOne("SELECT \(customerColumns) FROM customers WHERE customer_id = ?", [.text(customerId)]).map(customer)
    }

    static let customerColumns = "customer_id, app_account_token, created_at_ms, consent_rescinded_at_ms"

    /// A customer as `customerColumns` read it.
    static func customer(_ row: SQLRow) -> Customer {
        Customer(customerId: row.string("customer_id") ?? "", appAccountToken: row.string("app_account_token") ?? "",
                 createdAtMs: row.int("created_at_ms") ?? 0, consentRescindedAtMs: row.int("consent_rescinded_at_ms"))
    }

    /// The customer, created (with a token from `newToken`, drawn only then) if it doesn't exist.
    static func ensureCustomer(_ db: SQLConnection, _ customerId: String, newToken: () -> String, nowMs: Int64) throws -> Customer {
        if let c = try loadCustomer(db, customerId) { return c }
        return try createCustomer(db, customerId, token: newToken(), nowMs: nowMs)
    }

    /// A new customer (the caller read that there is none), with its empty wallet.
    static func createCustomer(_ db: SQLConnection, _ customerId: String, token: String, nowMs: Int64) throws -> Customer {
        var batch = WriteBatch()
        let customer = createCustomer(customerId, token: token, nowMs: nowMs, in: &batch)
        try db.write(batch)
        return customer
    }

    /// `createCustomer`'s two inserts, into `batch`.
    static func createCustomer(_ customerId: String, token: String, nowMs: Int64, in batch: inout WriteBatch) -> Customer {
        batch.add("INSERT INTO customers (customer_id, app_account_token, created_at_ms) VALUES (?, ?, ?)",
                  [.text(customerId), .text(token), .integer(nowMs)], changes: 1)
        batch.add("INSERT INTO wallets (customer_id, paid, free, updated_at_ms) VALUES (?, 0, 0, ?)",
                  [.text(customerId), .integer(nowMs)], changes: 1)
        return Customer(customerId: customerId, appAccountToken: token, createdAtMs: nowMs)
    }

    static func customerOwningToken(_ db: SQLConnection, _ token: String) throws -> String? {
        try db.queryOne("SELECT customer_id FROM customers WHERE app_account_token = ?", [.text(token)])?.string("customer_id")
    }

    // MARK: Events (the support timeline)

    static func recordEvent(_ db: SQLConnection, customerId: String?, atMs: Int64, kind: String, reference: String?, detail: JSONValue) throws {
        try db.execute("INSERT INTO events (customer_id, at_ms, kind, reference, detail) VALUES (?, ?, ?, ?, ?)",
                       [SQLValue(customerId), .integer(atMs), .text(kind), SQLValue(reference), .text(detail.jsonString)])
    }
}

extension KakinStore {
    /// Readiness: the database answers a trivial read.
    public func ping() async throws(KakinError) {
        _ = try await read { db in try db.queryOne("SELECT 1 AS one", []) != nil }
    }
}
