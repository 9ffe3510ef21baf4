import KakinCore

/// The typed records and queries of one database transaction: what a use case reads and writes inside one
/// `KakinStore.transaction` (or reads inside one `KakinStore.snapshot`). Use cases decide (with the core's pure
/// plans) and `Records` stores; no SQL leaves this target.
///
/// Only valid inside the body it was handed to (like the `SQLConnection` it wraps). A write body may run more than
/// once on PostgreSQL (a serialization failure re-runs the whole transaction), so it must decide only from what it
/// reads here and must not act outside the database.
public struct Records {
    let db: SQLConnection
    /// The write's time (drawn once, before the body runs).
    public let nowMs: Int64
    let ids: any IDGenerator

    init(db: SQLConnection, nowMs: Int64, ids: any IDGenerator) {
        self.db = db
        self.nowMs = nowMs
        self.ids = ids
    }

    /// The engine the body runs on: SQLite runs every write alone on one writer; PostgreSQL runs them SERIALIZABLE
    /// side by side (so a read inside a write also takes SSI read locks that other customers' writes can conflict with).
    public var dialect: SQLDialect { db.dialect }

    // MARK: Customers

    public func customer(_ customerId: String) throws -> KakinStore.Customer? {
        try KakinStore.loadCustomer(db, customerId)
    }

    /// The customer, created with a fresh `appAccountToken` (and an empty wallet) on first sight; `created` says
    /// whether this write created it.
    @discardableResult
    public func ensureCustomer(_ customerId: String) throws -> (customer: KakinStore.Customer, created: Bool) {
        if let c = try KakinStore.loadCustomer(db, customerId) { return (c, false) }
        return (try KakinStore.ensureCustomer(db, customerId, newToken: ids.uuid, nowMs: nowMs), true)
    }

    /// The customer whose `appAccountToken` this is, if any.
    public func customerOwning(appAccountToken token: String) throws -> String? {
        try KakinStore.customerOwningToken(db, token)
    }

    /// The customers a purchase's write may name as its owner, read in one statement: whoever holds the fact's account
    /// `token`, and the customers `ids` names (the presenter, the chain's link owner).
    public func ownerCandidates(token: String?, ids: [String]) throws -> OwnerCandidates {
        var conditions: [String] = [], parameters: [SQLValue] = []
        if !ids.isEmpty {
            let list = SQLList.inList(ids.map { .text($0) })
            conditions.append("customer_id IN (\(list.sql))")
            parameters += list.parameters
        }
        if let token {
            conditions.append("app_account_token = ?")
            parameters.append(.text(token))
        }
        guard !conditions.isEmpty else { return OwnerCandidates(tokenOwner: nil, rows: [:], asked: []) }
        let rows = try db.query("SELECT \(KakinStore.customerColumns) FROM customers WHERE \(conditions.joined(separator: " OR "))", parameters)
            .map(KakinStore.customer)
        let tokenOwner = token.flatMap { t in rows.first { $0.appAccountToken == t }?.customerId }
        return OwnerCandidates(tokenOwner: tokenOwner, rows: Dictionary(rows.map { ($0.customerId, $0) }, uniquingKeysWith: { a, _ in a }),
                               asked: Set(ids))
    }

    /// `ensureCustomer` for a customer `candidates` may have read: its row as read, or created without reading again when
    /// the read asked for it and found none.
    public func ensureCustomer(_ customerId: String, among candidates: OwnerCandidates) throws -> (customer: KakinStore.Customer, created: Bool) {
        if let c = candidates.rows[customerId] { return (c, false) }
        guard candidates.asked.contains(customerId) else { return try ensureCustomer(customerId) }
        return (try KakinStore.createCustomer(db, customerId, token: ids.uuid(), nowMs: nowMs), true)
    }

    // MARK: Wallet

    public func wallet(_ customerId: String) throws -> WalletBalance {
        try KakinStore.walletBalance(db, customerId)
    }

    /// Writes a ledger entry and moves the balance with it; returns the balance after.
    @discardableResult
    public func moveCoins(_ movement: LedgerMovement) throws -> WalletBalance {
        try KakinStore.moveCoins(db, movement)
    }

    /// A new ledger entry id (drawn inside the body: a re-run draws another, and only the committed run's is kept).
    public func newEntryId() -> String { ids.id(prefix: "le_") }

    /// A new opaque id with a prefix (`sp_` for spends), drawn like `newEntryId`.
    public func newID(prefix: String) -> String { ids.id(prefix: prefix) }

    // MARK: Timeline

    /// An entry in the customer's support timeline (`GET /v1/admin/customers/{id}/events`).
    public func recordTimeline(customerId: String?, kind: String, reference: String?, detail: JSONValue) throws {
        try KakinStore.recordEvent(db, customerId: customerId, atMs: nowMs, kind: kind, reference: reference, detail: detail)
    }
}

/// The customers `Records.ownerCandidates` read: the account token's holder, and each customer asked for by id that exists.
public struct OwnerCandidates: Sendable {
    public let tokenOwner: String?
    let rows: [String: KakinStore.Customer]
    let asked: Set<String>
}

extension KakinStore {
    /// Runs `body` in one durable write (group-committed, on PostgreSQL SERIALIZABLE and re-run whole on a conflict).
    public func transaction<T: Sendable>(_ body: @escaping @Sendable (Records) throws -> T) async throws(KakinError) -> T {
        let now = clock.nowMs()
        let ids = ids
        return try await write { db in try body(Records(db: db, nowMs: now, ids: ids)) }
    }

    /// Runs `body` on one read snapshot.
    public func snapshot<T: Sendable>(_ body: @escaping @Sendable (Records) throws -> T) async throws(KakinError) -> T {
        let now = clock.nowMs()
        let ids = ids
        return try await read { db in try body(Records(db: db, nowMs: now, ids: ids)) }
    }
}
