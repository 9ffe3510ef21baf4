import Foundation
import KakinCore
import KakinService
import KakinPostgreSQL
import KakinStorage
import KakinTestPostgres
import Synchronization
import Testing

/// Three `kakin serve` processes on one PostgreSQL database, as behind a load balancer: every guarantee of
/// one process still holds when requests for the same customer land on different processes at once.
/// One test at a time: each runs three servers, and the rest of the suite shares the machine.
@Suite(.serialized, .postgreSQL) struct MultiProcessTests {
    static let processes = 3

    @Test func oneTransactionPostedSixtyFourTimesAcrossThreeProcessesIsCreditedOnce() async throws {
        try await KakinProcesses.with(Self.processes) { k in
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let tx = try k.appStore.transaction(purchaseMs: nowMs)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<64 {
                    group.addTask {
                        try await k.request(n % Self.processes, "POST", "/v1/customers/u1/transactions", json: ["signedTransaction": .string(tx.jws)]).status
                    }
                }
                return try await group.reduce(into: [Int: Int]()) { $0[$1, default: 0] += 1 }
            }
            #expect(statuses == [201: 1, 409: 63])
            let wallet = try await k.request(1, "GET", "/v1/customers/u1/wallet").json
            #expect(wallet["paid"]?.int64Value == 100)
            #expect(try await k.ledgerCheck().status == 0)
        }
    }

    @Test func spendsRacingAcrossThreeProcessesNeverOverdraw() async throws {
        try await KakinProcesses.with(Self.processes) { k in
            let granted = try await k.request(0, "POST", "/v1/customers/u1/wallet/grants", json: ["amount": 1000, "reason": "test"],
                                              headers: ["Idempotency-Key": "g1"])
            #expect(granted.status == 201)
            let answers = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
                for n in 0..<90 {
                    group.addTask {
                        let r = try await k.request(n % Self.processes, "POST", "/v1/customers/u1/wallet/spend",
                                                    json: ["amount": 30, "item": "stamp.heart", "recipient": "program:1"],
                                                    headers: ["Idempotency-Key": "spend-\(n)"])
                        return (r.status, r.errorCode)
                    }
                }
                return try await group.reduce(into: [String: Int]()) { $0["\($1.0) \($1.1 ?? "")", default: 0] += 1 }
            }
            #expect(answers == ["201 ": 33, "409 insufficient_balance": 57])
            let wallet = try await k.request(2, "GET", "/v1/customers/u1/wallet").json
            #expect(wallet["total"]?.int64Value == 10)
            #expect(try await k.ledgerCheck().status == 0)
        }
    }

    @Test func oneIdempotencyKeySentToAllThreeProcessesSpendsOnce() async throws {
        try await KakinProcesses.with(Self.processes) { k in
            _ = try await k.request(0, "POST", "/v1/customers/u1/wallet/grants", json: ["amount": 500, "reason": "test"], headers: ["Idempotency-Key": "g1"])
            let answers = try await withThrowingTaskGroup(of: TestKakin.Response.self) { group in
                for n in 0..<30 {
                    group.addTask {
                        try await k.request(n % Self.processes, "POST", "/v1/customers/u1/wallet/spend",
                                            json: ["amount": 120, "item": "stamp.heart", "recipient": "program:1"],
                                            headers: ["Idempotency-Key": "the-one-key"])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.allSatisfy { $0.status == 201 })
            #expect(Set(answers.map(\.body)).count == 1)
            #expect(answers.filter { $0.headers["idempotent-replayed"] == "true" }.count == 29)
            let ledger = try await k.request(1, "GET", "/v1/customers/u1/wallet/ledger").json["entries"]?.arrayValue ?? []
            #expect(ledger.filter { $0["kind"] == "spend" }.count == 1)
            #expect(try await k.request(2, "GET", "/v1/customers/u1/wallet").json["total"]?.int64Value == 380)
        }
    }

    @Test func oneNotificationDeliveredToAllThreeProcessesIsAppliedOnce() async throws {
        try await KakinProcesses.with(Self.processes) { k in
            let token = try await k.request(0, "GET", "/v1/customers/u1").json["appAccountToken"]?.stringValue
            let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
            let tx = try k.appStore.transaction(appAccountToken: token, purchaseMs: nowMs)
            let uuid = UUID().uuidString.lowercased()
            let notification = try k.appStore.notification("ONE_TIME_CHARGE", uuid: uuid, transaction: tx.jws, signedMs: nowMs)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<12 {
                    group.addTask {
                        try await k.request(n % Self.processes, "POST", "/v1/notifications/appstore", json: ["signedPayload": .string(notification)]).status
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { $0 == 200 })
            let database = try PostgresDatabase(url: k.schema.url, options: .init(writerConnections: 1, readerConnections: 1))
            defer { Task { await database.close() } }
            var state: SQLRow?
            // Applied by one of the other processes: a generous deadline on a loaded machine.
            #expect(try await eventually(timeoutSeconds: 60) {
                state = try await database.read { try $0.queryOne("SELECT state, attempts, claimed_by FROM notifications WHERE notification_uuid = ?", .text(uuid)) }
                return state?.string("state") == "applied"
            })
            #expect(state?.string("state") == "applied")
            #expect(state?.int("attempts") == 1)
            let counts = try await database.read { db in
                try db.queryOne("""
                    SELECT (SELECT COUNT(*) FROM notifications) AS stored,
                           (SELECT COUNT(*) FROM events WHERE kind = 'notification.applied' AND reference = ?) AS applied,
                           (SELECT COUNT(*) FROM ledger_entries WHERE kind = 'purchase') AS credited
                    """, .text(uuid))
            }
            #expect(counts?.int("stored") == 1 && counts?.int("applied") == 1 && counts?.int("credited") == 1)
            #expect(try await k.request(2, "GET", "/v1/customers/u1/wallet").json["paid"]?.int64Value == 100)
        }
    }

    /// Clients buy and spend through all three processes; one is SIGKILLed mid-load. Every answer a client
    /// got is in the ledger exactly once, every operation left without an answer is safe to retry, and the
    /// ledger check passes.
    @Test func aProcessKilledUnderLoadLosesNothingAcknowledged() async throws {
        try await KakinProcesses.with(Self.processes) { k in
            struct Operation: Sendable {
                var customer: String
                var key: String
                var body: JSONValue
                var isSpend: Bool
                var answered: TestKakin.Response?
            }
            let stop = StopSignal()
            let answered = Tally(), unanswered = Tally()
            let operations = try await withThrowingTaskGroup(of: [Operation].self) { group in
                for client in 0..<6 {
                    group.addTask {
                        var done: [Operation] = []
                        var n = 0
                        while !stop.isSet, n < 60 {
                            n += 1
                            let customer = "c\(client % 3)"
                            let isSpend = n % 3 == 0
                            let op = Operation(customer: customer, key: "k-\(client)-\(n)",
                                               body: isSpend ? ["amount": 7, "item": "stamp.heart"] : ["amount": 10, "reason": "load"], isSpend: isSpend)
                            let path = "/v1/customers/\(customer)/wallet/\(isSpend ? "spend" : "grants")"
                            var finished = op
                            finished.answered = try? await k.request(client % Self.processes, "POST", path, json: op.body, headers: ["Idempotency-Key": op.key])
                            done.append(finished)
                            // No answer: its process died. Like an app, this client stops and retries later.
                            if finished.answered == nil {
                                unanswered.add()
                                break
                            }
                            answered.add()
                        }
                        return done
                    }
                }
                // The kill comes once a third of the operations were answered: under load, whatever the machine's speed.
                for _ in 0..<3_000 where answered.count < 120 { try await Task.sleep(for: .milliseconds(10)) }
                await k.kill(0)
                // The clients stop once a request was left without an answer by the kill (what the test is about), however
                // long a loaded machine takes to get a client of the killed process to its next request.
                _ = try await eventually(timeoutSeconds: 60) { unanswered.count > 0 }
                stop.set()
                return try await group.reduce(into: []) { $0 += $1 }
            }
            // Every operation again, through the survivors: an acknowledged one replays its answer byte for
            // byte; one left without an answer either had committed (replayed) or is applied now.
            let retried = try await withThrowingTaskGroup(of: [(Operation, TestKakin.Response)].self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        var out: [(Operation, TestKakin.Response)] = []
                        for op in operations.enumerated().filter({ $0.offset % 8 == worker }).map(\.element) {
                            let path = "/v1/customers/\(op.customer)/wallet/\(op.isSpend ? "spend" : "grants")"
                            out.append((op, try await k.request(1 + worker % 2, "POST", path, json: op.body, headers: ["Idempotency-Key": op.key])))
                        }
                        return out
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            var acknowledged = 0
            var expected: [String: Set<String>] = [:]
            for (op, retry) in retried {
                if let answer = op.answered, answer.status == 201 || answer.status == 409 {
                    acknowledged += 1
                    #expect(retry.status == answer.status && retry.body == answer.body && retry.headers["idempotent-replayed"] == "true")
                } else {
                    #expect(retry.status == 201 || retry.status == 409)
                }
                if retry.status == 201 { expected[op.customer, default: []].insert(op.isSpend ? retry.json["spendId"]?.stringValue ?? "?" : op.key) }
            }
            #expect(acknowledged > 0 && operations.contains { $0.answered == nil })
            for (customer, references) in expected {
                var seen: [String] = []
                var cursor: String?
                repeat {
                    let page = try await k.request(2, "GET", "/v1/customers/\(customer)/wallet/ledger?limit=200" + (cursor.map { "&cursor=\($0)" } ?? "")).json
                    seen += (page["entries"]?.arrayValue ?? []).compactMap { $0["reference"]?.stringValue }
                    cursor = page["nextCursor"]?.stringValue
                } while cursor != nil
                #expect(seen.count == Set(seen).count, "an operation is in \(customer)'s ledger twice")
                #expect(Set(seen) == references, "\(customer)'s ledger holds exactly the operations that were answered 201")
            }
            let check = try await k.ledgerCheck()
            #expect(check.status == 0 && check.report["ok"] == true)
        }
    }
}

/// A flag the test sets and its client tasks poll.
final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .relaxed) }
    var isSet: Bool { flag.load(ordering: .relaxed) }
}

/// A count several tasks add to.
final class Tally: Sendable {
    private let value = Atomic<Int>(0)
    func add() { value.add(1, ordering: .relaxed) }
    var count: Int { value.load(ordering: .relaxed) }
}
