import Dispatch
import Foundation
import KakinTestPostgres
import Synchronization
import Testing
@testable import KakinPostgreSQL
@testable import KakinStorage

/// Opens a database on a fresh schema, runs `body`, closes it. `count` databases on the same schema stand
/// for that many Kakin processes.
func withPostgres<R>(
    _ options: PostgresDatabase.Options = .init(), count: Int = 1,
    _ body: ([PostgresDatabase], TestPostgres.Schema) async throws -> R
) async throws -> R {
    try await TestPostgres.withSchema { schema in
        let databases = try (0..<count).map { _ in try PostgresDatabase(url: schema.url, options: options) }
        do {
            let result = try await body(databases, schema)
            for database in databases { await database.close() }
            return result
        } catch {
            for database in databases { await database.close() }
            throw error
        }
    }
}

func withPostgres<R>(_ options: PostgresDatabase.Options = .init(), _ body: (PostgresDatabase) async throws -> R) async throws -> R {
    try await withPostgres(options, count: 1) { databases, _ in try await body(databases[0]) }
}

struct ExpectedFailure: Error, Equatable {
    let id: Int
}

/// A body's error, caught where it queued the statement that failed.
struct SeenWhereQueued: Error {
    let kind: SQLError.Kind
}

@Suite(.postgreSQL) struct PostgresWriteAndReadTests {
    @Test func writeThenReadReturnsTheRow() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)", []) }
            try await db.write { try $0.execute("INSERT INTO t (k, v) VALUES (?, ?)", "a", 41) }
            let row = try await db.read { try $0.queryOne("SELECT k, v + 1 AS next FROM t WHERE k = ?", "a") }
            #expect(row?.string("k") == "a")
            #expect(row?.int("next") == 42)
        }
    }

    @Test func everyValueKindRoundTripsAsOnSQLite() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE v (n BIGINT, r DOUBLE PRECISION, t TEXT, b BYTEA)", []) }
            let blob: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF]
            try await db.write { db in
                try db.execute("INSERT INTO v (n, r, t, b) VALUES (?, ?, ?, ?)", .integer(Int64.min), 0.1, "héllo ✓ '?'", .blob(blob))
                try db.execute("INSERT INTO v (n, r, t, b) VALUES (?, ?, ?, ?)", .null, .null, "", .blob([]))
            }
            let rows = try await db.read { try $0.query("SELECT n, r, t, b FROM v ORDER BY t DESC", []) }
            #expect(rows[0]["n"] == .integer(Int64.min))
            #expect(rows[0]["r"] == .real(0.1))
            #expect(rows[0]["t"] == .text("héllo ✓ '?'"))
            #expect(rows[0]["b"] == .blob(blob))
            #expect(rows[1]["n"] == .null && rows[1]["r"] == .null)
            #expect(rows[1]["t"] == .text("") && rows[1]["b"] == .blob([]))
            // What SQLite answers as integers: booleans, COUNT, and SUM of integers (numeric in PostgreSQL).
            let answers = try await db.read {
                try $0.queryOne("SELECT 1 = 1 AS yes, COUNT(*) AS count, SUM(n + 1) AS sum, ? AS echoed, ? AS text FROM v", 7, "x")
            }
            #expect(answers?["yes"] == .integer(1))
            #expect(answers?["count"] == .integer(2))
            #expect(answers?["sum"] == .integer(Int64.min + 1))
            #expect(answers?["echoed"] == .integer(7))
            #expect(answers?["text"] == .text("x"))
        }
    }

    @Test func executeCountsOnlyRowsTheStatementChanged() async throws {
        try await withPostgres { db in
            let counts = try await db.write { db in
                try db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT)", [])
                return [
                    try db.execute("INSERT INTO t (k, v) VALUES (?, 1) ON CONFLICT DO NOTHING", "a"),
                    try db.execute("INSERT INTO t (k, v) VALUES (?, 1) ON CONFLICT DO NOTHING", "a"),
                    try db.execute("INSERT INTO t (k, v) VALUES ('b', 1), ('c', 1)", []),
                    try db.execute("UPDATE t SET v = v + 1 WHERE k <> ?", "a"),
                    try db.execute("SELECT * FROM t", []),
                ]
            }
            #expect(counts == [1, 0, 2, 2, 0])
        }
    }

    /// A body's statements whose answers it does not read go to the server in one round trip, and a write batch's
    /// round trips are counted (what the benchmarks print per request).
    @Test func aBatchOfStatementsGoesInOneRoundTripAndCountsAsItsStatements() async throws {
        try await withPostgres(.init(writerConnections: 1)) { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)", []) }
            try await db.write { try $0.execute("INSERT INTO t (k, v) VALUES (?, ?)", "warm", 0) }
            try await db.write { try $0.execute("UPDATE t SET v = v + ? WHERE k = ?", 0, "warm") }
            let before = db.statistics.work
            let counts = try await db.write { connection in
                try connection.executeBatch((0..<10).map { SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("k\($0)"), .integer(Int64($0))]) }
                                            + [SQLStatement("UPDATE t SET v = v + ? WHERE k = ?", [.integer(1), .text("k3")])])
            }
            let after = db.statistics.work
            #expect(counts == Array(repeating: 1, count: 11))
            #expect(after.writeStatements - before.writeStatements == 11)
            // BEGIN and the batch in one round trip, COMMIT in another.
            #expect(after.roundTrips - before.roundTrips == 2)
            #expect(try await db.read { try $0.queryOne("SELECT SUM(v) AS s FROM t", [])?.int("s") } == 46)
        }
    }

    @Test func aFailingStatementInABatchThrowsItsErrorAndNothingAfterItRuns() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)", []) }
            await #expect(throws: SQLError.self) {
                try await db.write { connection in
                    try connection.executeBatch([
                        SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("a"), .integer(1)]),
                        SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("a"), .integer(2)]),
                        SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("b"), .integer(3)]),
                    ])
                }
            }
            let thrown = await #expect(throws: SQLError.self) {
                try await db.write { connection in
                    try connection.executeBatch([SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("c"), .integer(1)]),
                                                 SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("c"), .integer(2)])])
                }
            }
            #expect(thrown?.kind == .constraintViolation)
            // The bodies that threw were rolled back whole; the connection goes on.
            #expect(try await db.read { try $0.query("SELECT k FROM t", []) }.isEmpty)
            try await db.write { try $0.executeBatch([SQLStatement("INSERT INTO t (k, v) VALUES (?, ?)", [.text("d"), .integer(4)])]) }
            #expect(try await db.read { try $0.queryOne("SELECT v FROM t WHERE k = ?", "d")?.int("v") } == 4)
        }
    }

    @Test func aBodysStatementsQueuedForLaterTravelWithTheCommitAndCostNoRoundTripOfTheirOwn() async throws {
        // One writer connection, warmed by the writes before: with two, the measured write could be the other one's first,
        // and carry its connect-time check (`pg_is_in_recovery()`, counted at its first commit) into the counts.
        try await withPostgres(.init(writerConnections: 1)) { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v BIGINT NOT NULL)", []) }
            try await db.write { try $0.execute("INSERT INTO t (k, v) VALUES (?, ?)", "warm", 0) }
            try await db.write { try $0.queryOne("SELECT v FROM t WHERE k = ?", "warm") }
            let before = db.statistics.work
            try await db.write { connection in
                let v = try connection.queryOne("SELECT v FROM t WHERE k = ?", "warm")?.int("v") ?? -1
                var batch = WriteBatch()
                batch.add("INSERT INTO t (k, v) VALUES (?, ?)", [.text("a"), .integer(v + 1)], changes: 1)
                batch.add("INSERT INTO t (k, v) VALUES (?, ?)", [.text("b"), .integer(v + 2)], changes: 1)
                try connection.write(batch)
            }
            let after = db.statistics.work
            #expect(after.writeStatements - before.writeStatements == 3)
            // BEGIN with the SELECT, the two INSERTs with COMMIT.
            #expect(after.roundTrips - before.roundTrips == 2)
            #expect(try await db.read { try $0.queryOne("SELECT SUM(v) AS s FROM t", [])?.int("s") } == 3)
        }
    }

    @Test func aStatementQueuedForLaterThatFailsFailsOnlyItsBodyWhichSeesTheErrorWhereItQueuedIt() async throws {
        try await withPostgres(.init(writerConnections: 1)) { db in
            try await db.write { db in
                try db.execute("CREATE TABLE t (n BIGINT PRIMARY KEY)", [])
                try db.execute("INSERT INTO t (n) VALUES (-1)", [])
            }
            let results = await withTaskGroup(of: (Int, String).self) { group in
                for n in 0..<200 {
                    group.addTask {
                        do {
                            try await db.write { db in
                                // Every fifth body queues a key that is taken.
                                try db.execute("SELECT 1", [])
                                do {
                                    var batch = WriteBatch()
                                    batch.add("INSERT INTO t (n) VALUES (?)", [.integer(n % 5 == 0 ? -1 : Int64(n))], changes: 1)
                                    try db.write(batch)
                                } catch let error as SQLError {
                                    throw SeenWhereQueued(kind: error.kind)
                                }
                            }
                            return (n, "written")
                        } catch {
                            return (n, (error as? SeenWhereQueued)?.kind == .constraintViolation ? "constraint violation where queued" : "\(error)")
                        }
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(results == Dictionary(uniqueKeysWithValues: (0..<200).map { ($0, $0 % 5 == 0 ? "constraint violation where queued" : "written") }))
            let stored = try await db.read { try Set($0.query("SELECT n FROM t", []).compactMap { $0.int("n") }) }
            #expect(stored == Set([-1] + (0..<200).filter { $0 % 5 != 0 }.map(Int64.init)))
            #expect(db.statistics.batchSizeLargest > 1)
        }
    }

    @Test func aBatchQueuedForLaterThatChangesOtherRowsThanItSaysCommitsNothingAndItsBodySeesTheCountsWhereItQueuedIt() async throws {
        // One writer connection: the one that created the table, already connected.
        try await withPostgres(.init(writerConnections: 1)) { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT NOT NULL)", []) }
            let before = db.statistics.work
            let runs = Atomic(0)
            let matched = try await db.write { connection in
                runs.add(1, ordering: .relaxed)
                var written = WriteBatch()
                written.add("INSERT INTO t (k) VALUES (?)", [.text("x")], changes: 1)
                try connection.write(written)
                // No row has this key: the count differs, which only running it at once can tell the body.
                var claimed = WriteBatch()
                claimed.add("UPDATE t SET k = ? WHERE k = ?", [.text("y"), .text("missing")], changes: 1)
                return try connection.executeLater(claimed)
            }
            let after = db.statistics.work
            #expect(matched == false)
            #expect(runs.load(ordering: .relaxed) == 2)
            // BEGIN with the statements and COMMIT (skipped), ROLLBACK; then BEGIN with the INSERT, the UPDATE, COMMIT.
            #expect(after.roundTrips - before.roundTrips == 5)
            // The first run's COMMIT went with its statements and did not run: one row, from the second run.
            #expect(try await db.read { try $0.query("SELECT k FROM t", []).compactMap { $0.string("k") } } == ["x"])
        }
    }

    @Test func questionMarksInLiteralsAndCommentsAreNotPlaceholders() async throws {
        try await withPostgres { db in
            let row = try await db.read {
                try $0.queryOne("SELECT '?' AS q, \"?\".x AS quoted, $$?$$ AS dollar, ? AS v /* ? */ FROM (SELECT 1 AS x) AS \"?\" -- ?", 5)
            }
            #expect(row?.string("q") == "?" && row?.string("dollar") == "?")
            #expect(row?.int("quoted") == 1 && row?.int("v") == 5)
        }
    }
}

@Suite(.postgreSQL) struct PostgresGroupCommitTests {
    @Test func concurrentWritesAllCommitAndShareTransactions() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (n BIGINT PRIMARY KEY)", []) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<500 { group.addTask { _ = try await db.write { try $0.execute("INSERT INTO t (n) VALUES (?)", .integer(Int64(n))) } } }
                try await group.waitForAll()
            }
            #expect(try await db.read { try $0.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c") } == 500)
            let statistics = db.statistics
            #expect(statistics.writesCommitted == 501)
            #expect(statistics.batchSizeLargest > 1)
            #expect(statistics.commits < 501)
        }
    }

    @Test func throwingBodyRollsBackOnlyItsOwnChangesInItsBatch() async throws {
        try await withPostgres(.init(writerConnections: 1)) { db in
            try await db.write { try $0.execute("CREATE TABLE t (n BIGINT PRIMARY KEY)", []) }
            let results = await withTaskGroup(of: (Int, String).self) { group in
                for n in 0..<200 {
                    group.addTask {
                        do {
                            try await db.write { db in
                                try db.execute("INSERT INTO t (n) VALUES (?)", .integer(Int64(n)))
                                if n % 3 == 0 { throw ExpectedFailure(id: n) }
                            }
                            return (n, "written")
                        } catch {
                            return (n, (error as? ExpectedFailure)?.id == n ? "its own error" : "\(error)")
                        }
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            #expect(results == Dictionary(uniqueKeysWithValues: (0..<200).map { ($0, $0 % 3 == 0 ? "its own error" : "written") }))
            let stored = try await db.read { try Set($0.query("SELECT n FROM t", []).compactMap { $0.int("n") }) }
            #expect(stored == Set((0..<200).filter { $0 % 3 != 0 }.map(Int64.init)))
            #expect(db.statistics.batchSizeLargest > 1)
        }
    }

    @Test func uniqueKeyConflictSurfacesAsConstraintViolationAndOtherWritesCommit() async throws {
        try await withPostgres { db in
            try await db.write { db in
                try db.execute("CREATE TABLE t (k TEXT PRIMARY KEY)", [])
                try db.execute("INSERT INTO t (k) VALUES ('taken')", [])
            }
            await #expect {
                try await db.write { try $0.execute("INSERT INTO t (k) VALUES (?)", "taken") }
            } throws: { ($0 as? SQLError)?.kind == .constraintViolation && ($0 as? SQLError)?.sqlState == "23505" }
            try await db.write { try $0.execute("INSERT INTO t (k) VALUES (?)", "free") }
            #expect(try await db.read { try $0.query("SELECT k FROM t ORDER BY k", []).compactMap { $0.string("k") } } == ["free", "taken"])
        }
    }
}

/// Several `PostgresDatabase`s on one schema are several Kakin processes on one database.
@Suite(.postgreSQL) struct PostgresAcrossProcessesTests {
    @Test func exactlyOneOf64ClaimsOfAKeyFromThreeProcessesWins() async throws {
        try await withPostgres(count: 3) { dbs, _ in
            try await dbs[0].write { try $0.execute("CREATE TABLE claims (k TEXT PRIMARY KEY, by BIGINT NOT NULL)", []) }
            let won = try await withThrowingTaskGroup(of: Bool.self) { group in
                for n in 0..<64 {
                    group.addTask {
                        try await dbs[n % 3].write { db in
                            try db.execute("INSERT INTO claims (k, by) VALUES ('key', ?) ON CONFLICT (k) DO NOTHING", .integer(Int64(n))) == 1
                        }
                    }
                }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(won == 1)
        }
    }

    /// Read a balance, then write it: what every Kakin body does. SERIALIZABLE with automatic re-runs keeps
    /// it right with no lock in the body, while three processes race on the same row.
    @Test func readThenWriteBodiesRacingAcrossProcessesNeverLoseAnUpdateOrOverdraw() async throws {
        try await withPostgres(count: 3) { dbs, _ in
            try await dbs[0].write { db in
                try db.execute("CREATE TABLE balances (k TEXT PRIMARY KEY, coins BIGINT NOT NULL)", [])
                try db.execute("INSERT INTO balances (k, coins) VALUES ('counter', 0), ('wallet', 100)", [])
            }
            let spent = try await withThrowingTaskGroup(of: Bool.self) { group in
                for n in 0..<150 {
                    group.addTask {
                        try await dbs[n % 3].write { db in
                            let counter = try db.queryOne("SELECT coins FROM balances WHERE k = 'counter'", [])!.int("coins")!
                            try db.execute("UPDATE balances SET coins = ? WHERE k = 'counter'", .integer(counter + 1))
                            let wallet = try db.queryOne("SELECT coins FROM balances WHERE k = 'wallet'", [])!.int("coins")!
                            guard wallet >= 3 else { return false }
                            try db.execute("UPDATE balances SET coins = ? WHERE k = 'wallet'", .integer(wallet - 3))
                            return true
                        }
                    }
                }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            let rows = try await dbs[1].read { try $0.query("SELECT k, coins FROM balances ORDER BY k", []) }
            #expect(rows.map { $0.int("coins") } == [150, 1])
            #expect(spent == 33)
        }
    }

    @Test func migrationsStartedByThreeProcessesAtOnceRunOnce() async throws {
        try await withPostgres(count: 3) { dbs, _ in
            let migrations = [
                SQLMigration(version: 1, name: "one", sql: "CREATE TABLE one (k BIGINT PRIMARY KEY); INSERT INTO one (k) VALUES (1)"),
                SQLMigration(version: 2, name: "two", sql: "CREATE TABLE two (k BIGINT PRIMARY KEY)"),
            ]
            try await withThrowingTaskGroup(of: Void.self) { group in
                for db in dbs { group.addTask { try await db.migrate(migrations) } }
                try await group.waitForAll()
            }
            let applied = try await dbs[0].read { try $0.query("SELECT version FROM schema_migrations ORDER BY version", []).compactMap { $0.int("version") } }
            #expect(applied == [1, 2])
            #expect(try await dbs[0].read { try $0.queryOne("SELECT COUNT(*) AS c FROM one", [])?.int("c") } == 1)
        }
    }
}

@Suite(.postgreSQL) struct PostgresMigrationTests {
    @Test func postgresqlFormIsRunWhenGivenAndPortableSQLOtherwise() async throws {
        try await withPostgres { db in
            try await db.migrate([
                SQLMigration(version: 1, name: "sqlite-only", sql: "CREATE TABLE a (id INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB) WITHOUT ROWID",
                             postgresql: "CREATE TABLE a (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, b BYTEA)"),
                SQLMigration(version: 2, name: "portable", sql: "ALTER TABLE a ADD COLUMN note TEXT; CREATE INDEX a_by_note ON a(note)"),
            ])
            let id = try await db.write { try $0.queryOne("INSERT INTO a (b, note) VALUES (?, ?) RETURNING id", .blob([1]), "n")?.int("id") }
            #expect(id == 1)
        }
    }

    @Test func databaseMigratedByANewerBuildRefusesToRun() async throws {
        try await withPostgres { db in
            let v1 = SQLMigration(version: 1, name: "one", sql: "CREATE TABLE one (k BIGINT)")
            try await db.migrate([v1, SQLMigration(version: 2, name: "two", sql: "CREATE TABLE two (k BIGINT)")])
            try await db.migrate([v1, SQLMigration(version: 2, name: "two", sql: "CREATE TABLE two (k BIGINT)")])
            await #expect { try await db.migrate([v1]) } throws: { ($0 as? SQLError)?.kind == .migration }
            await #expect { try await db.migrate([v1, SQLMigration(version: 2, name: "renamed", sql: "")]) } throws: { ($0 as? SQLError)?.kind == .migration }
        }
    }

    @Test func failingMigrationIsRolledBackAndReported() async throws {
        try await withPostgres { db in
            await #expect {
                try await db.migrate([SQLMigration(version: 1, name: "bad", sql: "CREATE TABLE ok (k BIGINT); CREATE TABLE broken (")])
            } throws: { ($0 as? SQLError)?.kind == .migration }
            let tables = try await db.read { try $0.query("SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'ok'", []) }
            #expect(tables.isEmpty)
        }
    }
}

@Suite(.postgreSQL) struct PostgresBodyRulesTests {
    @Test func bodiesCannotControlTheSharedTransaction() async throws {
        try await withPostgres { db in
            for statement in ["COMMIT", "begin", "ROLLBACK", "SAVEPOINT x", "RELEASE SAVEPOINT x", "  /* c */ END", "PREPARE TRANSACTION 'x'"] {
                await #expect { try await db.write { try $0.execute(statement, []) } } throws: { ($0 as? SQLError)?.kind == .misuse }
            }
        }
    }

    @Test func oneStatementPerCallAndPlaceholdersMustMatch() async throws {
        try await withPostgres { db in
            await #expect { try await db.read { try $0.query("SELECT 1; SELECT 2", []) } } throws: { ($0 as? SQLError)?.kind == .misuse }
            await #expect { try await db.read { try $0.query("SELECT ? AS a", []) } } throws: { ($0 as? SQLError)?.kind == .misuse }
            let one = try await db.read { try $0.queryOne("SELECT 1 AS a; -- done", [])?.int("a") }
            #expect(one == 1)
        }
    }

    @Test func errorsNeverContainParameterValues() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY)", []) }
            try await db.write { try $0.execute("INSERT INTO t (k) VALUES (?)", "secret-value") }
            for attempt in ["INSERT INTO t (k) VALUES (?)", "SELECT CAST(? AS BIGINT) AS n"] {
                do {
                    try await db.write { try $0.execute(attempt, "secret-value") }
                    Issue.record("expected an error")
                } catch {
                    #expect(!"\(error)".contains("secret-value"))
                }
            }
        }
    }

    @Test func aBodyThatSwallowsAFailedStatementIsNotReportedAsWritten() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k TEXT PRIMARY KEY)", []) }
            await #expect {
                try await db.write { db in
                    try db.execute("INSERT INTO t (k) VALUES ('a')", [])
                    _ = try? db.execute("INSERT INTO nowhere (k) VALUES ('b')", [])
                }
            } throws: { ($0 as? SQLError)?.kind == .misuse }
            #expect(try await db.read { try $0.query("SELECT k FROM t", []) }.isEmpty)
        }
    }

    @Test func readsAreReadOnly() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k BIGINT)", []) }
            await #expect { try await db.read { try $0.execute("INSERT INTO t (k) VALUES (1)", []) } } throws: { $0 is SQLError }
        }
    }

    /// BEGIN travels with a read's first query and COMMIT with the next read: the snapshot must still be
    /// one per read, and the next read must see what committed meanwhile.
    @Test func oneReadSeesOneSnapshotWhileWritesCommitAndTheNextReadSeesThem() async throws {
        try await withPostgres(.init(readerConnections: 1)) { db in
            try await db.write { try $0.execute("CREATE TABLE t (k BIGINT)", []) }
            let (firstQueryDone, firstQueryDoneContinuation) = AsyncStream<Void>.makeStream()
            let resume = DispatchSemaphore(value: 0)
            let reading = Task {
                try await db.read { connection in
                    let before = try connection.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c")
                    firstQueryDoneContinuation.yield()
                    _ = resume.wait(timeout: .now() + 30)
                    let after = try connection.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c")
                    return [before, after]
                }
            }
            for await _ in firstQueryDone { break }
            try await db.write { try $0.execute("INSERT INTO t (k) VALUES (1)", []) }
            resume.signal()
            #expect(try await reading.value == [0, 0])
            let next = try await db.read { try $0.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c") }
            #expect(next == 1)
            // Idle, the reader ends its transaction: no session of this database stays "idle in transaction". (Polled:
            // pg_stat_activity shows a session's state as of its last report, and the reader ends its transaction on its own time.)
            var open: Int64?
            let deadline = ContinuousClock.now + .seconds(30)
            repeat {
                try await Task.sleep(for: .milliseconds(20))
                open = try await db.write { db in
                    try db.queryOne("SELECT COUNT(*) AS c FROM pg_stat_activity WHERE application_name = current_setting('application_name') AND state = 'idle in transaction'", [])?.int("c")
                }
            } while open != 0 && ContinuousClock.now < deadline
            #expect(open == 0)
        }
    }
}

@Suite(.postgreSQL) struct PostgresConnectionFailureTests {
    @Test func unreachableServerFailsFastAsUnavailable() async throws {
        let db = try PostgresDatabase(url: "postgresql://kakin@127.0.0.1:1/kakin", options: .init(connectTimeoutSeconds: 2))
        await #expect { try await db.write { try $0.execute("SELECT 1", []) } } throws: { ($0 as? SQLError)?.kind == .unavailable }
        await #expect { try await db.read { try $0.query("SELECT 1", []) } } throws: { ($0 as? SQLError)?.kind == .unavailable }
        await #expect { try await db.migrate([]) } throws: { ($0 as? SQLError)?.kind == .unavailable }
        await db.close()
    }

    @Test func sessionsEndedByTheServerAreReplacedOnTheirNextUse() async throws {
        try await withPostgres(count: 1) { dbs, schema in
            let db = dbs[0]
            try await db.write { try $0.execute("CREATE TABLE t (k BIGINT)", []) }
            _ = try await db.read { try $0.query("SELECT k FROM t", []) }
            try await TestPostgres.terminateSessions(of: schema)
            try await db.write { try $0.execute("INSERT INTO t (k) VALUES (1)", []) }
            #expect(try await db.read { try $0.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c") } == 1)
            #expect(db.statistics.reconnects >= 1)
        }
    }

    @Test func aWriteWhoseConnectionBrokeBeforeCommitRunsAgainAndIsAppliedOnce() async throws {
        try await withPostgres { db in
            try await db.write { try $0.execute("CREATE TABLE t (k BIGINT)", []) }
            let runs = Atomic<Int>(0)
            try await db.write { db in
                try db.execute("INSERT INTO t (k) VALUES (1)", [])
                if runs.add(1, ordering: .relaxed).newValue == 1 {
                    _ = try? db.query("SELECT pg_terminate_backend(pg_backend_pid())", [])
                }
            }
            #expect(runs.load(ordering: .relaxed) == 2)
            #expect(try await db.read { try $0.queryOne("SELECT COUNT(*) AS c FROM t", [])?.int("c") } == 1)
        }
    }

    /// The server dies while committing: the caller must hear "unknown", never "done".
    @Test func aCommitWithoutAnAnswerIsReportedAsOutcomeUnknown() async throws {
        try await withPostgres { db in
            try await db.write { db in
                try db.execute("CREATE TABLE t (k BIGINT)", [])
                try db.execute("""
                    CREATE FUNCTION die_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); RETURN NULL; END $$
                    """, [])
                try db.execute("""
                    CREATE CONSTRAINT TRIGGER die_at_commit AFTER INSERT ON t DEFERRABLE INITIALLY DEFERRED
                    FOR EACH ROW WHEN (NEW.k = 13) EXECUTE FUNCTION die_at_commit()
                    """, [])
            }
            await #expect { try await db.write { try $0.execute("INSERT INTO t (k) VALUES (13)", []) } } throws: {
                ($0 as? SQLError)?.kind == .outcomeUnknown
            }
            try await db.write { try $0.execute("INSERT INTO t (k) VALUES (1)", []) }
            #expect(db.statistics.outcomesUnknown == 1)
        }
    }
}

@Suite struct PostgresURLTests {
    @Test func passwordsAreRedactedWhereverTheURLHoldsThem() {
        #expect(PostgresDatabase.redacted("postgresql://kakin:s3cret@db.example:5432/kakin?sslmode=require") == "postgresql://kakin:***@db.example:5432/kakin?sslmode=require")
        #expect(PostgresDatabase.redacted("postgresql://kakin@db/kakin?password=s3cret&sslmode=verify-full") == "postgresql://kakin@db/kakin?password=***&sslmode=verify-full")
        #expect(PostgresDatabase.redacted("postgresql://kakin@db/kakin") == "postgresql://kakin@db/kakin")
    }

    @Test func placeholdersBecomeNumberedAndTransactionControlIsRefused() throws {
        #expect(try PostgresSQLText("SELECT a FROM t WHERE b = ? AND c = '?' AND d = ?").text == "SELECT a FROM t WHERE b = $1 AND c = '?' AND d = $2")
        #expect(try PostgresSQLText("SELECT 'it''s ?' AS x, ? AS y").placeholderCount == 1)
        #expect(throws: SQLError.self) { try PostgresSQLText("commit") }
        #expect(throws: SQLError.self) { try PostgresSQLText("SELECT 1; DELETE FROM t") }
        #expect(throws: SQLError.self) { try PostgresSQLText("SELECT 'unterminated") }
    }

    /// A server error is answered as SQLite's would be: a full disk or an exhausted server is a 503 that
    /// clears by itself, a serialization failure is run again, a broken connection is reconnected.
    @Test func serverErrorsMapToTheSameKindsAsSQLite() {
        #expect(PGConnection.kind(sqlState: "53100") == .full)
        #expect(PGConnection.kind(sqlState: "53200") == .overloaded)
        #expect(PGConnection.kind(sqlState: "53300") == .overloaded)
        #expect(PGConnection.kind(sqlState: "40001") == .conflict)
        #expect(PGConnection.kind(sqlState: "57P01") == .unavailable)
        #expect(PGConnection.kind(sqlState: "08006") == .unavailable)
        #expect(PGConnection.kind(sqlState: "23505") == .constraintViolation)
        #expect(PGConnection.kind(sqlState: "42P01") == .database)
    }
}
