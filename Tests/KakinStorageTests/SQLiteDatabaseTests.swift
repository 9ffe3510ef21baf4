import Dispatch
import Foundation
import KakinSQLite
import KakinStorage
import Synchronization
import Testing

private let createItems = "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)"

/// How many times write bodies ran.
private final class BodyRuns: Sendable {
    let count = Atomic<Int>(0)
}

private func itemNames(_ database: SQLiteDatabase) async throws -> [String] {
    try await database.read { connection in
        try connection.query("SELECT name FROM items ORDER BY id").compactMap { $0.string("name") }
    }
}

@Suite struct SQLiteWriteAndReadTests {
    @Test func writeThenReadReturnsTheRow() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let changed = try await database.write { try $0.execute("INSERT INTO items (id, name) VALUES (?, ?)", 7, "gold") }
            #expect(changed == 1)
            let row = try await database.read { try $0.queryOne("SELECT id, name FROM items WHERE id = ?", 7) }
            #expect(row?.int("id") == 7)
            #expect(row?.string("name") == "gold")
            #expect(row?[1] == .text("gold"))
            #expect(row?.columnNames == ["id", "name"])
        }
    }

    /// What the benchmarks divide by requests: statements by kind, and an fsync per commit.
    @Test func statementsAndTheCommitsFsyncAreCounted() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let before = database.statistics.work
            try await database.write { connection in
                try connection.executeBatch([SQLStatement("INSERT INTO items (id, name) VALUES (?, ?)", [1, "a"]),
                                             SQLStatement("INSERT INTO items (id, name) VALUES (?, ?)", [2, "b"])])
                try connection.execute("UPDATE items SET name = ? WHERE id = ?", "c", 2)
            }
            #expect(try await itemNames(database) == ["a", "c"])
            let after = database.statistics.work
            #expect(after.writeStatements - before.writeStatements == 3)
            #expect(after.readStatements - before.readStatements == 1)
            #expect(after.syncs - before.syncs >= 1)
            #expect(after.roundTrips == 0)
            // BEGIN IMMEDIATE, COMMIT (a body that succeeds runs without a savepoint); the read's BEGIN (its COMMIT comes
            // after the body).
            #expect(after.transactionControlStatements - before.transactionControlStatements >= 3)
        }
    }

    @Test func everyValueKindRoundTrips() async throws {
        let values: [SQLValue] = [
            .null, .integer(0), .integer(Int64.max), .integer(Int64.min), .real(1.5), .real(-2.5e300),
            .text(""), .text("コイン 🪙 ñ — ü"), .text("nul\u{0}inside"), .blob([]), .blob([0, 1, 127, 128, 255]),
            .blob([UInt8](repeating: 0xAB, count: 100_000)),
            SQLValue(String?.none), SQLValue(42 as Int), SQLValue(true), SQLValue([UInt8]([9])),
        ]
        try await withDatabase { database in
            let read = try await database.write { connection in
                // No declared type: no column affinity converting what was bound.
                try connection.execute("CREATE TABLE anything (position INTEGER PRIMARY KEY, value)")
                for (position, value) in values.enumerated() {
                    try connection.execute("INSERT INTO anything (position, value) VALUES (?, ?)", [SQLValue(position), value])
                }
                return try connection.query("SELECT value FROM anything ORDER BY position").map { $0["value"] }
            }
            #expect(read == values)
            let reread = try await database.read { try $0.query("SELECT value FROM anything ORDER BY position").map { $0[0] } }
            #expect(reread == values)
        }
    }

    @Test func typedAccessorsReadMatchingKindsAndNilOtherwise() async throws {
        try await withDatabase { database in
            let row = try #require(try await database.read {
                try $0.queryOne("SELECT 5 AS i, 2.0 AS r, 2.5 AS f, 'x' AS t, x'01' AS b, NULL AS n, 1 AS yes")
            })
            #expect(row.int("i") == 5 && row.double("i") == 5 && row.string("i") == nil)
            #expect(row.int("r") == 2 && row.int("f") == nil && row.double("f") == 2.5)
            #expect(row.string("t") == "x" && row.bytes("t") == nil)
            #expect(row.bytes("b") == [1])
            #expect(row["n"].isNull && row.int("n") == nil && row.string("n") == nil)
            #expect(row.bool("yes") == true && row.bool("i") == true && row.bool("t") == nil)
        }
    }

    @Test func executeCountsOnlyRowsTheStatementChanged() async throws {
        try await withDatabase { database in
            let counts = try await database.write { connection in
                [
                    try connection.execute(createItems),
                    try connection.execute("INSERT INTO items (name) VALUES ('a'), ('b'), ('c')"),
                    try connection.execute("CREATE INDEX items_by_name ON items (name)"),
                    try connection.execute("SELECT * FROM items"),
                    try connection.execute("INSERT INTO items (name) VALUES ('a') ON CONFLICT DO NOTHING"),
                    try connection.execute("UPDATE items SET name = name || '!' WHERE name != 'a'"),
                    try connection.execute("DELETE FROM items WHERE name = 'nobody'"),
                ]
            }
            #expect(counts == [0, 3, 0, 0, 0, 2, 0])
        }
    }

    @Test func writerCommitsDurablyInWALWithForeignKeysOn() async throws {
        try await withDatabase { database in
            let settings = try await database.write { connection in
                [
                    try connection.queryOne("PRAGMA journal_mode")?[0],
                    try connection.queryOne("PRAGMA synchronous")?[0],
                    try connection.queryOne("PRAGMA foreign_keys")?[0],
                ]
            }
            #expect(settings == [.text("wal"), .integer(2), .integer(1)])  // synchronous 2 = FULL
        }
    }

    @Test func dataSurvivesCloseAndReopen() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let first = try SQLiteDatabase(path: directory.databasePath)
        try await first.write { connection in
            try connection.execute(createItems)
            try connection.execute("INSERT INTO items (name) VALUES (?)", "kept")
        }
        await first.close()

        let second = try SQLiteDatabase(path: directory.databasePath)
        let names = try await itemNames(second)
        await second.close()
        #expect(names == ["kept"])
    }
}

@Suite struct SQLiteGroupCommitTests {
    @Test func thousandConcurrentWritesAllCommitAndShareCommits() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<1_000 {
                    group.addTask {
                        try await database.write { try $0.execute("INSERT INTO items (name) VALUES (?)", [SQLValue("item-\(index)")]) }
                    }
                }
                for try await changed in group { #expect(changed == 1) }
            }
            let count = try await database.read { try $0.queryOne("SELECT count(*) AS n FROM items")?.int("n") }
            #expect(count == 1_000)
            let statistics = database.statistics
            #expect(statistics.writesCommitted == 1_001)
            #expect(statistics.writesFailed == 0)
            #expect(statistics.batchSizeLargest > 1, "no group commit happened: \(statistics)")
            #expect(statistics.commits < 1_001)
            #expect(statistics.writeQueueDepth == 0)
        }
    }

    @Test func throwingBodyRollsBackOnlyItsOwnChangesInItsBatch() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let gate = WriterGate()
            let held = await gate.hold(database)
            let writes = try await queueWritesInOrder(database, (0..<5).map { index in
                { @Sendable connection in
                    try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue("item-\(index)")])
                    if index == 2 { throw ExpectedFailure(id: index) }
                }
            })
            gate.open()
            try await held.value

            for (index, write) in writes.enumerated() {
                if index == 2 {
                    await #expect(throws: ExpectedFailure(id: 2)) { try await write.value }
                } else {
                    try await write.value
                }
            }
            #expect(try await itemNames(database) == ["item-0", "item-1", "item-3", "item-4"])
            #expect(database.statistics.batchSizeLargest == 5)
            #expect(database.statistics.writesFailed == 1)
        }
    }

    /// Bodies run without savepoints: one that throws before writing leaves nothing to undo, so its batch runs once; one
    /// that throws after writing makes the batch run again from its first body, each in its own savepoint.
    @Test func aBodyThatThrowsBeforeWritingCostsItsBatchNoSecondRun() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            for (failing, runsExpected) in [("refused", 5), ("after writing", 3 + 5)] {
                try await database.write { try $0.execute("DELETE FROM items") }
                let runs = BodyRuns()
                let gate = WriterGate()
                let held = await gate.hold(database)
                let writes = try await queueWritesInOrder(database, (0..<5).map { index in
                    { @Sendable connection in
                        runs.count.add(1, ordering: .relaxed)
                        if index == 2, failing == "refused" { throw ExpectedFailure(id: index) }
                        try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue("item-\(index)")])
                        if index == 2 { throw ExpectedFailure(id: index) }
                    }
                })
                gate.open()
                try await held.value
                for (index, write) in writes.enumerated() where index != 2 { try await write.value }
                await #expect(throws: ExpectedFailure(id: 2)) { try await writes[2].value }
                #expect(try await itemNames(database) == ["item-0", "item-1", "item-3", "item-4"])
                #expect(runs.count.load(ordering: .relaxed) == runsExpected, "\(failing)")
            }
        }
    }

    @Test func uniqueKeyConflictSurfacesAsConstraintViolationAndOtherWritesCommit() async throws {
        try await withDatabase { database in
            try await database.write { connection in
                try connection.execute(createItems)
                try connection.execute("CREATE TABLE audit (note TEXT NOT NULL)")
            }
            let gate = WriterGate()
            let held = await gate.hold(database)
            let writes = try await queueWritesInOrder(database, ["a", "a", "b"].map { name in
                { @Sendable connection in
                    try connection.execute("INSERT INTO audit (note) VALUES (?)", [SQLValue("adding \(name)")])
                    try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue(name)])
                }
            })
            gate.open()
            try await held.value

            try await writes[0].value
            let error = await #expect(throws: SQLError.self) { try await writes[1].value }
            #expect(error?.isConstraintViolation == true)
            #expect(error?.extendedCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
            #expect(error?.sql == "INSERT INTO items (name) VALUES (?)")
            try await writes[2].value

            #expect(try await itemNames(database) == ["a", "b"])
            let notes = try await database.read { try $0.query("SELECT note FROM audit ORDER BY rowid").compactMap { $0.string("note") } }
            #expect(notes == ["adding a", "adding b"])
        }
    }

    @Test func exactlyOneOf64ConcurrentClaimsOfAKeyWins() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute("CREATE TABLE claims (key TEXT PRIMARY KEY, owner INTEGER NOT NULL)") }
            let winners = try await withThrowingTaskGroup(of: Int?.self) { group in
                for owner in 0..<64 {
                    group.addTask {
                        try await database.write { connection in
                            let row = try connection.queryOne(
                                "INSERT INTO claims (key, owner) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING owner",
                                "purchase-1", SQLValue(owner))
                            return row.flatMap { $0.int("owner") }.map { Int($0) }
                        }
                    }
                }
                return try await group.reduce(into: [Int]()) { winners, owner in
                    if let owner { winners.append(owner) }
                }
            }
            #expect(winners.count == 1)
            let stored = try await database.read { try $0.query("SELECT owner FROM claims").compactMap { $0.int("owner") } }
            #expect(stored.map(Int.init) == winners)
        }
    }

    @Test func fullWriteQueueThrowsOverloadedWithoutQueueing() async throws {
        try await withDatabase(.init(queueDepthMax: 2)) { database in
            try await database.write { try $0.execute(createItems) }
            let gate = WriterGate()
            let held = await gate.hold(database)
            let queued = try await queueWritesInOrder(database, ["first", "second"].map { name in
                { @Sendable connection in try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue(name)]) }
            })
            let error = await #expect(throws: SQLError.self) {
                try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('third')") }
            }
            #expect(error?.isOverloaded == true)
            gate.open()
            try await held.value
            for write in queued { _ = try await write.value }
            #expect(try await itemNames(database) == ["first", "second"])
        }
    }

    @Test func writesAndReadsAfterCloseThrowClosed() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        await database.close()
        await database.close()  // idempotent
        let writeError = await #expect(throws: SQLError.self) { try await database.write { try $0.execute("SELECT 1") } }
        #expect(writeError?.kind == .closed)
        let readError = await #expect(throws: SQLError.self) { try await database.read { try $0.query("SELECT 1") } }
        #expect(readError?.kind == .closed)
        let shortReadError = await #expect(throws: SQLError.self) { try await database.shortRead { try $0.query("SELECT 1") } }
        #expect(shortReadError?.kind == .closed)
    }

    @Test func closeFinishesQueuedWritesFirst() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let database = try SQLiteDatabase(path: directory.databasePath)
        try await database.write { try $0.execute(createItems) }
        let gate = WriterGate()
        let held = await gate.hold(database)
        let queued = try await queueWritesInOrder(database, ["x", "y"].map { name in
            { @Sendable connection in try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue(name)]) }
        })
        let closing = Task { await database.close() }
        gate.open()
        await closing.value
        try await held.value
        for write in queued { #expect(try await write.value == 1) }

        let reopened = try SQLiteDatabase(path: directory.databasePath)
        #expect(try await itemNames(reopened) == ["x", "y"])
        await reopened.close()
    }
}

@Suite struct SQLiteBodyRulesTests {
    @Test func bodiesCannotControlTheSharedTransaction() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            for statement in ["COMMIT", "ROLLBACK", "BEGIN", "SAVEPOINT mine", "RELEASE w", "ROLLBACK TO w", "END"] {
                let error = await #expect(throws: SQLError.self, "\(statement)") {
                    try await database.write { connection in
                        try connection.execute("INSERT INTO items (name) VALUES (?)", [SQLValue(statement)])
                        try connection.execute(statement)
                    }
                }
                #expect(error?.kind == .misuse)
                await #expect(throws: SQLError.self) { try await database.read { try $0.execute(statement) } }
            }
            try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('after')") }
            #expect(try await itemNames(database) == ["after"])
        }
    }

    @Test func connectionUsedAfterItsClosureReturnedThrowsMisuse() async throws {
        final class Escaped: @unchecked Sendable { var connection: (any SQLConnection)? }
        let escaped = Escaped()
        try await withDatabase { database in
            try await database.write { escaped.connection = $0 }
            try await database.write { connection in
                let error = #expect(throws: SQLError.self) { try escaped.connection?.execute("SELECT 1") }
                #expect(error?.kind == .misuse)
                _ = connection
            }
        }
    }

    @Test func oneStatementPerCallAndPlaceholdersMustMatch() async throws {
        try await withDatabase { database in
            try await database.write { connection in
                try connection.execute(createItems)
                let twoStatements = #expect(throws: SQLError.self) {
                    try connection.execute("INSERT INTO items (name) VALUES ('a'); DELETE FROM items")
                }
                #expect(twoStatements?.kind == .misuse)
                let missing = #expect(throws: SQLError.self) { try connection.execute("INSERT INTO items (name) VALUES (?)") }
                #expect(missing?.kind == .misuse)
                // Trailing semicolons and comments are fine.
                try connection.execute("INSERT INTO items (name) VALUES ('b'); -- done")
            }
            #expect(try await itemNames(database) == ["b"])
        }
    }

    @Test func readConnectionsCannotWrite() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let error = await #expect(throws: SQLError.self) {
                try await database.read { try $0.execute("INSERT INTO items (name) VALUES ('sneaky')") }
            }
            #expect(error?.kind == .database)
            #expect(try await itemNames(database) == [])
        }
    }

    @Test func errorsNeverContainParameterValues() async throws {
        try await withDatabase { database in
            try await database.write { connection in
                try connection.execute(createItems)
                try connection.execute("INSERT INTO items (name) VALUES (?)", "secret-token-123")
            }
            let error = await #expect(throws: SQLError.self) {
                try await database.write { try $0.execute("INSERT INTO items (name) VALUES (?)", "secret-token-123") }
            }
            #expect(error.map { !String(describing: $0).contains("secret-token-123") } == true)
        }
    }

    @Test func queryReturningMoreThanRowLimitThrows() async throws {
        try await withDatabase(.init(queryRowsMax: 3)) { database in
            let error = await #expect(throws: SQLError.self) {
                try await database.read { try $0.query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 4) SELECT i FROM n") }
            }
            #expect(error?.kind == .resultTooLarge)
        }
    }

    @Test func inMemoryDatabaseIsRefused() throws {
        #expect(throws: SQLError.self) { try SQLiteDatabase(path: ":memory:") }
    }
}

@Suite struct SQLiteReadSnapshotTests {
    @Test func readsCompleteWhileAWriteBatchIsInProgressAndDoNotSeeIt() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let gate = WriterGate()
            let held = await gate.hold(database) { try $0.execute("INSERT INTO items (name) VALUES ('uncommitted')") }
            // The writer is parked inside an open transaction; reads still run and see the last commit.
            #expect(try await itemNames(database) == [])
            #expect(try await itemNames(database) == [])
            gate.open()
            try await held.value
            #expect(try await itemNames(database) == ["uncommitted"])
        }
    }

    @Test func oneReadSeesOneSnapshotWhileWritesCommit() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            let (firstQueryDone, firstQueryDoneContinuation) = AsyncStream<Void>.makeStream()
            let resume = DispatchSemaphore(value: 0)
            let reading = Task {
                try await database.read { connection in
                    let before = try connection.query("SELECT name FROM items").count
                    firstQueryDoneContinuation.yield()
                    _ = resume.wait(timeout: .now() + 30)
                    let after = try connection.query("SELECT name FROM items").count
                    return (before, after)
                }
            }
            for await _ in firstQueryDone { break }
            try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('committed meanwhile')") }
            resume.signal()
            let (before, after) = try await reading.value
            #expect(before == 0)
            #expect(after == 0)
            #expect(try await itemNames(database) == ["committed meanwhile"])
        }
    }
}

@Suite struct SQLiteShortReadTests {
    @Test func shortReadsSeeTheLastCommitAndCannotWrite() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('gold')") }
            let names = try await database.shortRead { connection in
                try connection.query("SELECT name FROM items").compactMap { $0.string("name") }
            }
            #expect(names == ["gold"])
            let error = await #expect(throws: SQLError.self) {
                try await database.shortRead { try $0.execute("INSERT INTO items (name) VALUES ('sneaky')") }
            }
            #expect(error?.kind == .database)
            #expect(try await itemNames(database) == ["gold"])
        }
    }

    @Test func aShortReadWhileEveryLentConnectionIsBusyStillCompletes() async throws {
        try await withDatabase(.init(readerCount: 1)) { database in
            try await database.write { try $0.execute(createItems) }
            try await database.write { try $0.execute("INSERT INTO items (name) VALUES ('gold')") }
            let (holding, holdingContinuation) = AsyncStream<Void>.makeStream()
            let release = DispatchSemaphore(value: 0)
            let holder = Task {
                try await database.shortRead { connection in
                    holdingContinuation.yield()
                    _ = release.wait(timeout: .now() + 30)
                    return try connection.query("SELECT name FROM items").count
                }
            }
            for await _ in holding { break }
            // The one lent connection is held: this read goes to the reader thread.
            let count = try await database.shortRead { connection in try connection.query("SELECT name FROM items").count }
            #expect(count == 1)
            release.signal()
            #expect(try await holder.value == 1)
        }
    }
}

@Suite struct SQLiteMigrationTests {
    private let migrations = [
        SQLMigration(version: 1, name: "create coins", sql: """
            CREATE TABLE coins (account TEXT PRIMARY KEY, balance INTEGER NOT NULL);
            CREATE INDEX coins_by_balance ON coins (balance);
            """),
        SQLMigration(version: 2, name: "seed house account", sql: "INSERT INTO coins (account, balance) VALUES ('house', 0)"),
    ]

    private func appliedVersions(_ database: SQLiteDatabase) async throws -> [Int64] {
        try await database.read { try $0.query("SELECT version FROM schema_migrations ORDER BY version").compactMap { $0.int("version") } }
    }

    @Test func migrationsApplyOnceAndRerunningIsANoOp() async throws {
        try await withDatabase { database in
            try await database.migrate(migrations)
            try await database.migrate(migrations)
            #expect(try await appliedVersions(database) == [1, 2])
            let accounts = try await database.read { try $0.queryOne("SELECT count(*) AS n FROM coins")?.int("n") }
            #expect(accounts == 1)

            let more = migrations + [SQLMigration(version: 3, name: "add currency", sql: "ALTER TABLE coins ADD COLUMN currency TEXT")]
            try await database.migrate(more)
            #expect(try await appliedVersions(database) == [1, 2, 3])
        }
    }

    @Test func databaseWithNewerVersionMakesMigrateThrow() async throws {
        try await withDatabase { database in
            try await database.migrate(migrations)
            let error = await #expect(throws: SQLError.self) { try await database.migrate(Array(migrations.prefix(1))) }
            #expect(error?.kind == .migration)
            #expect(try await appliedVersions(database) == [1, 2])
        }
    }

    @Test func renamedOrSkippedMigrationsAreRefused() async throws {
        try await withDatabase { database in
            try await database.migrate(migrations)
            var renamed = migrations
            renamed[0].name = "something else"
            await #expect(throws: SQLError.self) { try await database.migrate(renamed) }
            let inserted = [migrations[0], SQLMigration(version: 2, name: "x", sql: "SELECT 1"), migrations[1]]
            await #expect(throws: SQLError.self) { try await database.migrate(inserted) }
            let unordered = [migrations[1], migrations[0]]
            let error = await #expect(throws: SQLError.self) { try await database.migrate(unordered) }
            #expect(error?.kind == .misuse)
        }
    }

    @Test func failingMigrationIsRolledBackAndReported() async throws {
        try await withDatabase { database in
            try await database.migrate(migrations)
            let broken = migrations + [SQLMigration(version: 3, name: "broken", sql: """
                CREATE TABLE half_done (id INTEGER);
                INSERT INTO no_such_table VALUES (1);
                """)]
            let error = await #expect(throws: SQLError.self) { try await database.migrate(broken) }
            #expect(error?.kind == .migration)
            #expect(error?.sql == "INSERT INTO no_such_table VALUES (1);")
            #expect(try await appliedVersions(database) == [1, 2])
            let tables = try await database.read {
                try $0.query("SELECT name FROM sqlite_master WHERE name = 'half_done'").count
            }
            #expect(tables == 0)
            // Writes keep working after a failed migration.
            try await database.write { try $0.execute("UPDATE coins SET balance = 5 WHERE account = 'house'") }
        }
    }
}

@Suite struct SQLiteBaselineTests {
    @Test func singleRowDurableBaselineCountsCommits() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let commitsPerSecond = try SQLiteDatabase.measureSingleRowDurableCommits(path: directory.databasePath, seconds: 0.2)
        #expect(commitsPerSecond > 0)
    }
}

@Suite struct SQLiteCheckpointTests {
    /// Checkpoints run on their own thread; under a steady stream of commits the writer still catches up at
    /// `walFramesMax`, so the WAL restarts from its beginning instead of growing with the database.
    @Test func theWALStaysBoundedUnderSteadyWritesAndEveryCommitSurvivesReopening() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var options = SQLiteDatabase.Options()
        options.durable = false
        options.checkpointFramesMin = 20
        options.walFramesMax = 200
        let database = try SQLiteDatabase(path: directory.databasePath, options: options)
        try await database.write { try $0.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)") }
        let payload = String(repeating: "x", count: 3_000)
        var walBytesMax: UInt64 = 0
        for round in 0..<40 {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<25 {
                    group.addTask {
                        try await database.write {
                            try $0.execute("INSERT INTO rows (id, payload) VALUES (?, ?)", [.integer(Int64(round * 25 + n)), .text(payload)])
                        }
                    }
                }
                for try await changed in group { #expect(changed == 1) }
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: directory.databasePath + "-wal")[.size] as? UInt64) ?? 0
            walBytesMax = max(walBytesMax, size)
        }
        // 1,000 rows of 3 KB are 4 MB; the WAL stays within its bound plus one batch's frames.
        #expect(walBytesMax < 2_000_000, "the WAL reached \(walBytesMax) bytes")
        await database.close()

        let reopened = try SQLiteDatabase(path: directory.databasePath)
        let count = try await reopened.read { try $0.queryOne("SELECT COUNT(*) AS n FROM rows")?.int("n") }
        await reopened.close()
        #expect(count == 1_000)
    }
}

struct BodyFailure: Error {}

@Suite struct SQLiteReadBatchTests {
    /// Reads queued together share one read transaction; each still gets its own result or error, and sees
    /// every write acknowledged before it was queued.
    @Test func concurrentReadsGetTheirOwnResultsAndSeeEarlierWrites() async throws {
        try await withDatabase { database in
            try await database.write { try $0.execute(createItems) }
            for round in 0..<20 {
                try await database.write { try $0.execute("INSERT INTO items (name) VALUES (?)", .text("item \(round)")) }
                let results = try await withThrowingTaskGroup(of: (Int, Int?).self) { group in
                    for n in 0..<32 {
                        group.addTask {
                            let count = try? await database.read { connection -> Int in
                                if n % 5 == 0 { throw BodyFailure() }
                                return Int(try connection.queryOne("SELECT COUNT(*) AS n FROM items")?.int("n") ?? -1)
                            }
                            return (n, count)
                        }
                    }
                    return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
                }
                for n in 0..<32 {
                    #expect(results[n] == (n % 5 == 0 ? nil : round + 1), "read \(n) in round \(round)")
                }
            }
        }
    }
}
