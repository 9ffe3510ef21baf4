import Foundation
import KakinCore
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import Synchronization
import Testing

/// A clock the tests control.
public final class TestClock: Clock, @unchecked Sendable {
    public let now = Mutex<Int64>(1_790_000_000_000)
    public init() {}
    public func nowMs() -> Int64 { now.withLock { $0 } }
}

/// Ids the tests can read: `…-000000000001`, `le_2`, …
public final class CountingIDs: IDGenerator {
    let counter = Atomic<Int>(0)
    public init() {}
    public func uuid() -> String {
        let n = counter.add(1, ordering: .relaxed).newValue
        return String(format: "00000000-0000-4000-8000-%012d", n)
    }
    public func id(prefix: String) -> String { prefix + String(counter.add(1, ordering: .relaxed).newValue) }
}

/// The engines a store suite runs on: SQLite always, PostgreSQL when `scripts/test` started a cluster (or when it is
/// required: then the PostgreSQL case fails without one).
public enum Backend: String, CustomTestStringConvertible, Sendable {
    case sqlite, postgresql
    public static var available: [Backend] { TestPostgres.casesRun ? [.sqlite, .postgresql] : [.sqlite] }
    public var testDescription: String { rawValue }
}

/// A migrated store on a fresh database of `backend` (a temporary SQLite file, or a PostgreSQL schema).
public func withStore(_ backend: Backend, clock: TestClock = TestClock(), _ body: (KakinStore) async throws -> Void) async throws {
    try await withDatabase(backend) { db in
        let store = KakinStore(database: db, ids: CountingIDs(), clock: clock)
        try await store.migrate()
        try await body(store)
    }
}

/// A fresh, empty database of `backend`, closed after `body`.
public func withDatabase(_ backend: Backend, _ body: (any SQLDatabase) async throws -> Void) async throws {
    switch backend {
    case .sqlite:
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try await closing(try SQLiteDatabase(path: dir.appendingPathComponent("k.db").path), body)
    case .postgresql:
        try await TestPostgres.withSchema { schema in try await closing(try PostgresDatabase(url: schema.url, options: .init(connectTimeoutSeconds: 30)), body) }
    }
}

private func closing(_ db: any SQLDatabase, _ body: (any SQLDatabase) async throws -> Void) async throws {
    do {
        try await body(db)
    } catch {
        await db.close()
        throw error
    }
    await db.close()
}

/// A coin pack: 100 paid coins and 10 free ones per unit, at ¥120.
public let coins100 = Product(productId: "coins.100", kind: .consumable, coins: 100, bonusCoins: 10, priceMilli: 120_000, currency: "JPY")

/// A decoded App Store transaction of the test app `com.example` (signed dates near the test clock).
public func transaction(_ id: String, product: String = "coins.100", token: String? = nil, original: String? = nil,
                 signedDate: Int64 = 1_790_000_000_000, revokedAt: Int64? = nil, quantity: Int = 1,
                 type: AppleProductType = .consumable) -> TransactionPayload {
    var o: [String: JSONValue] = [
        "transactionId": .string(id), "originalTransactionId": .string(original ?? id), "bundleId": "com.example",
        "productId": .string(product), "purchaseDate": .int(1_789_999_000_000), "quantity": .int(Int64(quantity)),
        "type": .string(type.rawValue), "inAppOwnershipType": "PURCHASED", "signedDate": .int(signedDate), "environment": "Sandbox",
        "price": 120000, "currency": "JPY",
    ]
    if let token { o["appAccountToken"] = .string(token) }
    if let revokedAt {
        o["revocationDate"] = .int(revokedAt)
        o["revocationReason"] = 1
    }
    return try! TransactionPayload(json: .object(o))
}

/// Lets two of the outbox's PostgreSQL tests (KakinStorageTests and KakinEventsTests) at a time hold connections (two
/// per database instance: a writer and a reader), so the whole suite's parallel tests stay under the test cluster's
/// connection limit (`scripts/postgres`).
public final class OutboxTestGate: Sendable {
    public static let shared = OutboxTestGate(slots: 2)
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    public init(slots: Int) { state = Mutex(State(free: slots)) }

    public func run<T>(_ body: () async throws -> T) async throws -> T {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.free > 0 {
                    s.free -= 1
                    return true
                }
                s.waiting.append(c)
                return false
            }
            if now { c.resume() }
        }
        defer {
            let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
                if s.waiting.isEmpty {
                    s.free += 1
                    return nil
                }
                return s.waiting.removeFirst()
            }
            next?.resume()
        }
        return try await body()
    }
}
