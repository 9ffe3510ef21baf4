import Foundation
import KakinCore
import KakinPostgreSQL
import KakinSQLite
import KakinTestPostgres
import Synchronization
import Testing
@testable import KakinStorage

/// `count` databases on one store (one SQLite file, or one PostgreSQL schema): several processes sharing it. The first
/// is migrated; all are closed afterwards.
func withDatabases(_ backend: Backend, count: Int, _ body: ([any SQLDatabase]) async throws -> Void) async throws {
    func run(_ open: () throws -> any SQLDatabase) async throws {
        var databases: [any SQLDatabase] = []
        do {
            for _ in 0..<count { databases.append(try open()) }
            try await databases[0].migrate(KakinStore.migrations)
            try await body(databases)
        } catch {
            for d in databases { await d.close() }
            throw error
        }
        for d in databases { await d.close() }
    }
    switch backend {
    case .sqlite:
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("k.db").path
        try await run { try SQLiteDatabase(path: path) }
    case .postgresql:
        try await OutboxTestGate.shared.run {
            try await TestPostgres.withSchema { schema in
                try await run { try PostgresDatabase(url: schema.url, options: .init(writerConnections: 1, readerConnections: 1)) }
            }
        }
    }
}

/// A migrated store on a fresh database of `backend`, on the lean, gated PostgreSQL connections of `withDatabases`.
func withOutboxStore(_ backend: Backend, _ body: (KakinStore) async throws -> Void) async throws {
    try await withDatabases(backend, count: 1) { databases in
        try await body(KakinStore(database: databases[0], ids: CountingIDs(), clock: TestClock()))
    }
}

/// Waits until the feed may show every event stored so far. On PostgreSQL an event enters the feed (and the fan-out)
/// once every transaction older than it has ended — in the whole cluster, so other tests' writes delay it briefly.
/// SQLite's feed shows what committed at once.
func settle(_ database: any SQLDatabase) async throws {
    for _ in 0..<1_000 {
        let settled = try await database.read { db -> Bool in
            guard db.dialect == .postgresql else { return true }
            let newest = try db.queryOne("SELECT COALESCE(MAX(txid), 0) AS t FROM outbox_events", [])?.int("t") ?? 0
            let xmin = try db.queryOne("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS x", [])?.int("x") ?? 0
            return newest < xmin
        }
        if settled { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    Issue.record("the feed did not settle within 10 s")
}

/// Appends events of `types` for `customer` inside `db`'s current write, as `KakinEvents.EventOutbox.append` does.
@discardableResult
func appendRaw(_ db: SQLConnection, _ customer: String, _ types: [String], atMs: Int64 = 1_790_000_000_000) throws -> [OutboxEventRow] {
    let last = try KakinStore.lastEventSequence(db, customerId: customer)
    let first = last + 1
    let rows = types.enumerated().map { i, type in
        let id = "evt_\(UUID().uuidString.lowercased())"
        return OutboxEventRow(eventId: id, customerId: customer, sequence: first + Int64(i), type: type, createdAtMs: atMs, environment: "Sandbox",
                              bundleId: "com.example", payload: #"{"id":"\#(id)","sequence":\#(first + Int64(i)),"type":"\#(type)"}"#)
    }
    var batch = WriteBatch()
    KakinStore.appendEvents(to: &batch, customerId: customer, lastSequence: last, rows: rows, statusView: nil)
    try db.write(batch)
    return rows
}

@Suite struct OutboxAppends {
    @Test(arguments: Backend.available) func sequencesCountFromOneWithoutGapsAndTheVersionFollows(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            #expect(try await store.eventVersion(customerId: "u1") == 0)
            let first = try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited"]) }
            let next = try await store.database.write { db in try appendRaw(db, "u1", ["subscription.started", "entitlement.granted"]) }
            _ = try await store.database.write { db in try appendRaw(db, "u2", ["coins.spent"]) }
            #expect(first.map(\.sequence) == [1])
            #expect(next.map(\.sequence) == [2, 3])
            #expect(try await store.eventVersion(customerId: "u1") == 3)
            #expect(try await store.eventVersion(customerId: "u2") == 1)
            let events = try await store.customerEvents(customerId: "u1", afterSequence: 1, limit: 10)
            #expect(events.map(\.sequence) == [2, 3])
            #expect(events.map(\.type) == ["subscription.started", "entitlement.granted"])
        }
    }

    @Test(arguments: Backend.available) func aRolledBackChangeTakesItsSequenceNumbersWithIt(_ backend: Backend) async throws {
        struct Refused: Error {}
        try await withOutboxStore(backend) { store async throws in
            _ = try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited"]) }
            await #expect(throws: Refused.self) {
                try await store.database.write { db -> Void in
                    try appendRaw(db, "u1", ["coins.spent", "coins.spent"])
                    throw Refused()
                }
            }
            let after = try await store.database.write { db in try appendRaw(db, "u1", ["coins.granted"]) }
            #expect(after.map(\.sequence) == [2])
            #expect(try await store.customerEvents(customerId: "u1", afterSequence: 0, limit: 10).map(\.sequence) == [1, 2])
        }
    }

    /// Three "processes" (database instances on one store), each with concurrent writes, append to one customer: the
    /// sequence ends up exactly 1…N.
    @Test(arguments: Backend.available) func concurrentAppendsFromSeveralConnectionsNeverGapOrDuplicate(_ backend: Backend) async throws {
        try await withDatabases(backend, count: 3) { databases async throws in
            let perProcess = 20
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (p, database) in databases.enumerated() {
                    for i in 0..<perProcess {
                        group.addTask {
                            let n = (p + i) % 3 + 1
                            try await database.write { db in
                                try appendRaw(db, "shared", Array(repeating: "coins.credited", count: n))
                                try appendRaw(db, "own-\(p)", ["coins.spent"])
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let expected = (0..<3).flatMap { p in (0..<perProcess).map { i in (p + i) % 3 + 1 } }.reduce(0, +)
            let sequences = try await databases[0].read { db in
                try db.query("SELECT sequence FROM outbox_events WHERE customer_id = 'shared' ORDER BY sequence", []).compactMap { $0.int("sequence") }
            }
            #expect(sequences == Array(1...Int64(expected)))
            #expect(try await databases[1].read { db in try KakinStore.lastEventSequence(db, customerId: "shared") } == Int64(expected))
            for p in 0..<3 {
                #expect(try await databases[2].read { db in try KakinStore.lastEventSequence(db, customerId: "own-\(p)") } == Int64(perProcess))
            }
        }
    }
}

@Suite struct EventFeedReads {
    @Test(arguments: Backend.available) func theFeedPagesInCommitOrderAndACursorResumesExactly(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            var written: [String] = []
            for i in 0..<7 {
                let rows = try await store.database.write { db in try appendRaw(db, "u\(i % 3)", i % 2 == 0 ? ["coins.credited"] : ["subscription.renewed", "coins.granted"]) }
                written += rows.map(\.eventId)
            }
            try await settle(store.database)
            var seen: [String] = []
            var cursor = EventFeedCursor.start
            while true {
                let page = try await store.eventFeed(after: cursor, limit: 4, types: nil)
                if page.events.isEmpty {
                    #expect(page.nextCursor == cursor)
                    break
                }
                seen += page.events.map(\.eventId)
                #expect(EventFeedCursor(token: page.nextCursor.token) == page.nextCursor)
                cursor = page.nextCursor
            }
            #expect(seen == written)
            let more = try await store.database.write { db in try appendRaw(db, "u9", ["coins.spent"]) }
            try await settle(store.database)
            #expect(try await store.eventFeed(after: cursor, limit: 500, types: nil).events.map(\.eventId) == more.map(\.eventId))
        }
    }

    @Test(arguments: Backend.available) func aTypeFilterReturnsOnlyThoseTypesAndItsCursorMovesPastTheRest(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            for i in 0..<10 { try await store.database.write { db in try appendRaw(db, "u1", [i == 2 || i == 7 ? "coins.spent" : "coins.credited"]) } }
            try await settle(store.database)
            let first = try await store.eventFeed(after: .start, limit: 1, types: ["coins.spent"])
            #expect(first.events.map(\.sequence) == [3])
            #expect(try await store.eventFeed(after: first.nextCursor, limit: 500, types: nil).events.map(\.sequence) == Array(4...10))
            let page = try await store.eventFeed(after: first.nextCursor, limit: 5, types: ["coins.spent"])
            #expect(page.events.map(\.sequence) == [8])
            // The page looked at everything up to the end: its cursor is past the rest.
            #expect(try await store.eventFeed(after: page.nextCursor, limit: 5, types: nil).events.isEmpty)
            let none = try await store.eventFeed(after: .start, limit: 5, types: ["subscription.expired"])
            #expect(none.events.isEmpty)
            #expect(try await store.eventFeed(after: none.nextCursor, limit: 5, types: nil).events.isEmpty)
        }
    }

    @Test func cursorsThisServerDidNotIssueAreRefused() {
        for token in ["", "abc", Base64.urlEncode(Array("ev:1".utf8)), Base64.urlEncode(Array("ev:-1:2".utf8)), Base64.urlEncode(Array("le:1:2".utf8))] {
            #expect(EventFeedCursor(token: token) == nil)
        }
        let c = EventFeedCursor(txid: 812, position: 99)
        #expect(EventFeedCursor(token: c.token) == c)
    }

    /// PostgreSQL assigns positions when rows are inserted, not when they commit: while an earlier transaction is still
    /// open, a later one's committed events stay out of the feed, so no cursor can pass the earlier one's events.
    @Test(.postgreSQL) func onPostgreSQLAnOpenTransactionHoldsBackLaterCommitsSoNoEventIsSkipped() async throws {
        try await withDatabases(.postgresql, count: 2) { databases async throws in
            let (slow, fast) = (databases[0], databases[1])
            let store = KakinStore(database: fast, ids: CountingIDs(), clock: TestClock())
            let inserted = Atomic<Bool>(false)
            let release = DispatchSemaphore(value: 0)
            let open = Task {
                // Blocks slow's writer thread (not the cooperative pool) with its transaction open.
                try await slow.write { db -> [OutboxEventRow] in
                    let rows = try appendRaw(db, "early", ["coins.credited"])
                    // The batch waits for the write's next round trip (`executeLater`): this one.
                    try db.execute("SELECT 1", [])
                    inserted.store(true, ordering: .sequentiallyConsistent)
                    release.wait()
                    return rows
                }
            }
            let later: [OutboxEventRow], during: EventFeedPage
            do {
                // However this block ends, the blocked writer is let go once (closing its database waits for it).
                defer { release.signal() }
                for _ in 0..<2_000 where !inserted.load(ordering: .sequentiallyConsistent) { try await Task.sleep(for: .milliseconds(5)) }
                guard inserted.load(ordering: .sequentiallyConsistent) else {
                    Issue.record("the slow writer never got to its insert")
                    return
                }
                later = try await fast.write { db in try appendRaw(db, "late", ["coins.spent"]) }
                during = try await store.eventFeed(after: .start, limit: 500, types: nil)
            }
            #expect(during.events.isEmpty)
            let early = try await open.value
            try await settle(fast)
            let after = try await store.eventFeed(after: during.nextCursor, limit: 500, types: nil)
            #expect(after.events.map(\.eventId) == early.map(\.eventId) + later.map(\.eventId))
        }
    }
}

@Suite struct WebhookDeliveryStore {
    static let all: Set<String> = ["coins.credited", "coins.spent", "subscription.renewed"]
    static let t0: Int64 = 1_790_000_000_000

    func setUp(_ store: KakinStore, endpoints: [String] = ["a"]) async throws {
        try await settle(store.database)
        try await store.registerWebhookCursors(endpointIds: endpoints, nowMs: Self.t0)
    }

    func delivered(_ status: Int = 200) -> WebhookAttemptResult { WebhookAttemptResult(state: .delivered, status: status, answer: "ok") }

    /// Records one attempt's result and, with `claimNext`, claims one due chain: the chain just put back when its next
    /// delivery is due (what the worker's batches do, one delivery at a time).
    func finish(_ store: KakinStore, _ claim: ClaimedWebhookDelivery, _ result: WebhookAttemptResult, owner: String, nowMs: Int64, leaseMs: Int64,
                claimNext: Bool) async throws -> ClaimedWebhookDelivery? {
        try await store.settleWebhookDeliveries(endpointId: claim.endpointId, results: [(claim, result)], unattempted: [], owner: owner, nowMs: nowMs,
                                                leaseMs: leaseMs, claimLimit: claimNext ? 1 : 0).first
    }

    @Test(arguments: Backend.available) func anEndpointDeliversWhatCommittedAfterItsRegistrationInSequenceOrderPerCustomer(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited"]) }
            try await setUp(store)
            try await store.database.write { db in try appendRaw(db, "u1", ["coins.spent", "coins.credited"]) }
            try await store.database.write { db in try appendRaw(db, "u2", ["subscription.renewed"]) }
            try await settle(store.database)
            let fan = try await store.fanOutWebhookEvents(routes: [WebhookRoute(endpointId: "a", types: Self.all)], nowMs: Self.t0, deadlineMs: Self.t0 + 1000, batchMax: 500)
            #expect(fan.deliveriesCreated == 3)
            let claims = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w1", nowMs: Self.t0, leaseMs: 60_000, limit: 10)
            #expect(Set(claims.map { "\($0.customerId):\($0.sequence)" }) == ["u1:2", "u2:1"])
            #expect(claims.allSatisfy { $0.payload?.contains($0.eventId) == true })
            // Nothing else of u1 is claimable while its chain is held.
            #expect(try await store.claimWebhookDeliveries(endpointId: "a", owner: "w2", nowMs: Self.t0, leaseMs: 60_000, limit: 10).isEmpty)
            let u1 = try #require(claims.first { $0.customerId == "u1" })
            let next = try await finish(store, u1, delivered(), owner: "w1", nowMs: Self.t0 + 5, leaseMs: 60_000, claimNext: true)
            #expect(next?.sequence == 3 && next?.customerId == "u1")
            let done = try await finish(store, try #require(next), delivered(), owner: "w1", nowMs: Self.t0 + 6, leaseMs: 60_000, claimNext: true)
            #expect(done == nil)
            let counts = try #require(try await store.webhookCounts(endpointIds: ["a"]).first)
            #expect(counts.pending == 1 && counts.retrying == 0 && counts.dead == 0 && counts.notFannedOut == 0)
            #expect(counts.oldestWaitingCreatedAtMs == Self.t0)
            let rows = try await store.webhookDeliveries(endpointId: "a", state: .delivered, limit: 10)
            #expect(Set(rows.map(\.sequence)) == [2, 3] && rows.allSatisfy { $0.lastStatus == 200 && $0.attempts == 1 && $0.type != nil })
        }
    }

    /// The worker records deliveries in batches: one write of a few statements however many ended, and the chains just
    /// put back come straight back with their next delivery; what was claimed and never sent goes back untouched.
    @Test(arguments: Backend.available) func oneWriteRecordsABatchAndHandsEachChainsNextDeliveryBack(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await setUp(store)
            let customers = (1...12).map { "u\($0)" }
            for c in customers { try await store.database.write { db in try appendRaw(db, c, ["coins.credited", "coins.spent"]) } }
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [WebhookRoute(endpointId: "a", types: Self.all)], nowMs: Self.t0, deadlineMs: Self.t0 + 10_000, batchMax: 500)
            let claims = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0, leaseMs: 60_000, limit: 100)
            #expect(claims.count == 12 && claims.allSatisfy { $0.sequence == 1 && $0.payload != nil })
            let retry = WebhookAttemptResult(state: .retrying, status: 503, answer: "busy", nextAttemptMs: Self.t0 + 1_000)
            let before = writeStatements(store.database)
            let next = try await store.settleWebhookDeliveries(
                endpointId: "a", results: claims.map { ($0, $0.customerId == "u1" ? retry : delivered()) }, unattempted: [], owner: "w", nowMs: Self.t0 + 1,
                leaseMs: 60_000, claimLimit: 100)
            // Two outcomes, the chains put back, claimed again: four statements in the write for twelve deliveries.
            #expect(writeStatements(store.database) - before == 4)
            #expect(Set(next.map { "\($0.customerId):\($0.sequence)" }) == Set(customers.dropFirst().map { "\($0):2" }))
            // Claimed and never sent: back, due at once, no attempt counted.
            _ = try await store.settleWebhookDeliveries(endpointId: "a", results: [], unattempted: next, owner: "w", nowMs: Self.t0 + 2, leaseMs: 60_000,
                                                        claimLimit: 0)
            let again = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w2", nowMs: Self.t0 + 2, leaseMs: 60_000, limit: 100)
            #expect(Set(again.map(\.eventId)) == Set(next.map(\.eventId)) && again.allSatisfy { $0.attempts == 0 })
            #expect(try await store.webhookDeliveries(endpointId: "a", state: .delivered, limit: 100).count == 11)
            #expect(try await store.webhookDeliveries(endpointId: "a", state: .retrying, limit: 100).map(\.customerId) == ["u1"])
        }
    }

    /// Statements write bodies have run on `database` so far (both engines count them).
    func writeStatements(_ database: any SQLDatabase) -> Int {
        if let sqlite = database as? SQLiteDatabase { return sqlite.statistics.work.writeStatements }
        return (database as? PostgresDatabase)?.statistics.work.writeStatements ?? 0
    }

    @Test(arguments: Backend.available) func aFailedDeliveryHoldsItsCustomersNextEventsUntilItsRetryButNotOtherCustomers(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await setUp(store)
            try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited", "coins.spent"]) }
            try await store.database.write { db in try appendRaw(db, "u2", ["coins.credited"]) }
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [WebhookRoute(endpointId: "a", types: Self.all)], nowMs: Self.t0, deadlineMs: Self.t0 + 10_000, batchMax: 500)
            let claims = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0, leaseMs: 60_000, limit: 10)
            let u1 = try #require(claims.first { $0.customerId == "u1" })
            let retry = WebhookAttemptResult(state: .retrying, status: 503, answer: "busy", nextAttemptMs: Self.t0 + 1000)
            #expect(try await finish(store, u1, retry, owner: "w", nowMs: Self.t0 + 1, leaseMs: 60_000, claimNext: true) == nil)
            let u2 = try #require(claims.first { $0.customerId == "u2" })
            _ = try await finish(store, u2, delivered(), owner: "w", nowMs: Self.t0 + 1, leaseMs: 60_000, claimNext: true)
            #expect(try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0 + 999, leaseMs: 60_000, limit: 10).isEmpty)
            let again = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0 + 1000, leaseMs: 60_000, limit: 10)
            #expect(again.map(\.sequence) == [1] && again.first?.attempts == 1 && again.first?.customerId == "u1")
            let rows = try await store.webhookDeliveries(endpointId: "a", state: .retrying, limit: 10)
            #expect(rows.count == 1 && rows.first?.lastStatus == 503 && rows.first?.lastAnswer == "busy")
            // Dead: the next event of the chain comes straight back.
            let dead = WebhookAttemptResult(state: .dead, status: nil, answer: "timed out")
            let next = try await finish(store, try #require(again.first), dead, owner: "w", nowMs: Self.t0 + 1001, leaseMs: 60_000, claimNext: true)
            #expect(next?.sequence == 2)
            let counts = try #require(try await store.webhookCounts(endpointIds: ["a"]).first)
            #expect(counts.dead == 1 && counts.pending == 1)
        }
    }

    @Test(arguments: Backend.available) func aLapsedLeaseLetsAnotherWorkerSendAgainAndTheLateResultChangesNothing(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await setUp(store)
            try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited", "coins.spent"]) }
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [WebhookRoute(endpointId: "a", types: Self.all)], nowMs: Self.t0, deadlineMs: Self.t0 + 10_000, batchMax: 500)
            let first = try #require(try await store.claimWebhookDeliveries(endpointId: "a", owner: "dying", nowMs: Self.t0, leaseMs: 1_000, limit: 1).first)
            #expect(try await store.claimWebhookDeliveries(endpointId: "a", owner: "other", nowMs: Self.t0 + 999, leaseMs: 1_000, limit: 1).isEmpty)
            let taken = try #require(try await store.claimWebhookDeliveries(endpointId: "a", owner: "other", nowMs: Self.t0 + 1_000, leaseMs: 1_000, limit: 1).first)
            #expect(taken.eventId == first.eventId)
            let next = try await finish(store, taken, delivered(), owner: "other", nowMs: Self.t0 + 1_001, leaseMs: 1_000, claimNext: true)
            #expect(next?.sequence == 2)
            // The first holder wakes up: its result is ignored and the chain stays with "other".
            #expect(try await finish(store, first, delivered(), owner: "dying", nowMs: Self.t0 + 1_002, leaseMs: 1_000, claimNext: true) == nil)
            let rows = try await store.webhookDeliveries(endpointId: "a", state: nil, limit: 10)
            #expect(rows.first { $0.sequence == 1 }?.attempts == 1)
            #expect(rows.first { $0.sequence == 2 }?.claimedBy == "other")
        }
    }

    @Test(arguments: Backend.available) func replayPutsDeliveredAndDeadEventsBackWithAFreshBudgetAndFillsInMissingOnes(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            let before = try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited"], atMs: Self.t0 - 10) }
            try await setUp(store)
            let rows = try await store.database.write { db in try appendRaw(db, "u1", ["coins.spent", "coins.credited"]) }
            let route = WebhookRoute(endpointId: "a", types: Self.all)
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [route], nowMs: Self.t0, deadlineMs: Self.t0 + 10, batchMax: 500)
            var claim = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0, leaseMs: 60_000, limit: 1).first
            claim = try await finish(store, try #require(claim), WebhookAttemptResult(state: .dead, status: 500, answer: "no"),
                                                          owner: "w", nowMs: Self.t0, leaseMs: 60_000, claimNext: true)
            _ = try await finish(store, try #require(claim), delivered(), owner: "w", nowMs: Self.t0, leaseMs: 60_000, claimNext: true)
            #expect(try await store.webhookCounts(endpointIds: ["a"]).first?.dead == 1)

            #expect(try await store.replayWebhookDeliveries(route: route, eventIds: [rows[0].eventId, "evt_unknown"], nowMs: Self.t0 + 100, deadlineMs: Self.t0 + 200) == 1)
            let replayed = try #require(try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0 + 100, leaseMs: 60_000, limit: 1).first)
            #expect(replayed.eventId == rows[0].eventId && replayed.attempts == 0 && replayed.deadlineMs == Self.t0 + 200)
            _ = try await finish(store, replayed, delivered(), owner: "w", nowMs: Self.t0 + 101, leaseMs: 60_000, claimNext: false)

            // Since a time: the event from before the endpoint existed is created, the others requeued, all in sequence order.
            #expect(try await store.replayWebhookDeliveries(route: route, sinceMs: Self.t0 - 10, nowMs: Self.t0 + 300, deadlineMs: Self.t0 + 400) == 3)
            var order: [Int64] = []
            var next = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0 + 300, leaseMs: 60_000, limit: 5).first
            while let c = next {
                order.append(c.sequence)
                next = try await finish(store, c, delivered(), owner: "w", nowMs: Self.t0 + 301, leaseMs: 60_000, claimNext: true)
            }
            #expect(order == [1, 2, 3])
            #expect(before.count == 1)
            // A type the endpoint does not take is never queued.
            #expect(try await store.replayWebhookDeliveries(route: WebhookRoute(endpointId: "a", types: ["subscription.renewed"]), sinceMs: 0,
                                                            nowMs: Self.t0, deadlineMs: Self.t0) == 0)
        }
    }

    @Test(arguments: Backend.available) func retentionKeepsWhatIsUndeliveredAndWhatIsNotFannedOut(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await setUp(store, endpoints: ["a", "b"])
            let old = try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited", "coins.spent"], atMs: Self.t0) }
            let route = WebhookRoute(endpointId: "a", types: Self.all)
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [route], nowMs: Self.t0, deadlineMs: Self.t0 + 10, batchMax: 500)
            let claim = try #require(try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0, leaseMs: 60_000, limit: 1).first)
            _ = try await finish(store, claim, delivered(), owner: "w", nowMs: Self.t0, leaseMs: 60_000, claimNext: false)
            let later = Self.t0 + 40 * 86_400_000
            // "b" never fanned out: nothing goes while it still has to.
            var purged = try await store.purgeOutbox(eventCutoffMs: later, deliveryCutoffMs: later, endpointIds: ["a", "b"], batchMax: 100)
            #expect(purged.events == 0 && purged.deliveries == 1)
            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [WebhookRoute(endpointId: "b", types: [])], nowMs: Self.t0, deadlineMs: Self.t0, batchMax: 500)
            // "a" still owes u1's second event: only the first goes.
            purged = try await store.purgeOutbox(eventCutoffMs: later, deliveryCutoffMs: later, endpointIds: ["a", "b"], batchMax: 100)
            #expect(purged.events == 1)
            #expect(try await store.outboxEvents(ids: old.map(\.eventId)).map(\.eventId) == [old[1].eventId])
            // Once dead, it goes too; the sequence never restarts.
            let second = try #require(try await store.claimWebhookDeliveries(endpointId: "a", owner: "w", nowMs: Self.t0, leaseMs: 60_000, limit: 1).first)
            _ = try await finish(store, second, WebhookAttemptResult(state: .dead, status: nil, answer: "x"), owner: "w", nowMs: Self.t0,
                                                      leaseMs: 60_000, claimNext: false)
            purged = try await store.purgeOutbox(eventCutoffMs: later, deliveryCutoffMs: later, endpointIds: ["a", "b"], batchMax: 100)
            #expect(purged.events == 1 && purged.deliveries == 1)
            #expect(try await store.database.write { db in try appendRaw(db, "u1", ["coins.granted"]) }.map(\.sequence) == [3])
        }
    }

    @Test(arguments: Backend.available) func retentionWaitsForTheBusinessNumbersCursorAndTellsHowFarBehindItIs(_ backend: Backend) async throws {
        try await withOutboxStore(backend) { store async throws in
            try await store.transaction { r in try r.registerMetricsCursor() }
            let old = try await store.database.write { db in try appendRaw(db, "u1", ["coins.credited", "coins.spent"], atMs: Self.t0) }
            try await settle(store.database)
            let later = Self.t0 + 40 * 86_400_000
            // The rollup worker has read nothing yet: nothing goes, and its first unread event is the oldest.
            var purged = try await store.purgeOutbox(eventCutoffMs: later, deliveryCutoffMs: later, endpointIds: [], batchMax: 100)
            #expect(purged.events == 0)
            let lags = try await store.outboxCursorLags(endpointIds: [])
            #expect(lags.map(\.name) == ["metrics"] && lags.first?.oldestUnreadCreatedAtMs == Self.t0)
            // It reads the first event: that one goes, the second stays for it.
            let first = try await store.snapshot { r in try r.customersWithEvents(after: .start, eventsMax: 1, customersMax: 1).next }
            try await store.transaction { r in _ = try r.moveMetricsCursor(from: .start, to: first) }
            purged = try await store.purgeOutbox(eventCutoffMs: later, deliveryCutoffMs: later, endpointIds: [], batchMax: 100)
            #expect(purged.events == 1)
            #expect(try await store.outboxEvents(ids: old.map(\.eventId)).map(\.eventId) == [old[1].eventId])
        }
    }

    /// Several workers (processes) claim side by side: each delivery is sent once (nobody's lease lapses here) and each
    /// customer's events go out in sequence order (two holders of one chain would send its head twice).
    @Test(arguments: Backend.available) func severalWorkersClaimingSideBySideSendEachDeliveryOnceInOrderPerCustomer(_ backend: Backend) async throws {
        try await withDatabases(backend, count: 3) { databases async throws in
            let stores = databases.map { KakinStore(database: $0, ids: CountingIDs(), clock: TestClock()) }
            try await stores[0].registerWebhookCursors(endpointIds: ["a"], nowMs: Self.t0)
            let customers = 12, perCustomer = 6
            try await withThrowingTaskGroup(of: Void.self) { group in
                for c in 0..<customers {
                    group.addTask {
                        for _ in 0..<perCustomer { try await databases[c % 3].write { db in try appendRaw(db, "c\(c)", ["coins.credited"]) } }
                    }
                }
                try await group.waitForAll()
            }
            try await settle(databases[0])
            let route = WebhookRoute(endpointId: "a", types: Self.all)
            let log = SendLog()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (w, store) in stores.enumerated() {
                    group.addTask {
                        var idle = 0
                        while idle < 3 {
                            try await settle(store.database)
            _ = try await store.fanOutWebhookEvents(routes: [route], nowMs: Self.t0, deadlineMs: Self.t0 + 10_000, batchMax: 7)
                            let claims = try await store.claimWebhookDeliveries(endpointId: "a", owner: "w\(w)", nowMs: Self.t0, leaseMs: 600_000, limit: 3)
                            idle = claims.isEmpty ? idle + 1 : 0
                            if claims.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
                            for first in claims {
                                var next: ClaimedWebhookDelivery? = first
                                var run = 0
                                while let c = next {
                                    run += 1
                                    log.state.withLock { l in l.sent[c.customerId, default: []].append(c.sequence); l.sends += 1 }
                                    next = try await finish(store, c, WebhookAttemptResult(state: .delivered, status: 200, answer: nil),
                                                                                 owner: "w\(w)", nowMs: Self.t0, leaseMs: 600_000, claimNext: run < 2)
                                }
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let result = log.state.withLock { $0 }
            #expect(result.sends == customers * perCustomer)
            for c in 0..<customers { #expect(result.sent["c\(c)"] == Array(1...Int64(perCustomer))) }
            let counts = try await stores[1].webhookCounts(endpointIds: ["a"])
            #expect(counts.first?.backlog == 0)
        }
    }
}

/// What side-by-side workers sent, in the order they sent it.
final class SendLog: Sendable {
    struct Log { var sent: [String: [Int64]] = [:]; var sends = 0 }
    let state = Mutex(Log())
}
