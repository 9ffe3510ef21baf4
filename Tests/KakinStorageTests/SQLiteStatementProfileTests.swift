import Foundation
@testable import KakinSQLite
import KakinStorage
import Testing

/// `KAKIN_SQLITE_STATEMENT_PROFILE` (benchmarks only): what `kakin-bench budget` reads the statements' unit costs from.
@Suite struct SQLiteStatementProfileTests {
    @Test func aProfiledConnectionReportsEachStatementsRunsAndCPUWhenItCloses() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path + "/statements.tsv"
        let handle = try SQLiteHandle(path: directory.databasePath, role: .writer(durable: false), options: .init(), profileFile: file)
        try handle.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)", [])
        for n in 0..<50 { try handle.execute("INSERT INTO items (name) VALUES (?)", [.text("item \(n)")]) }
        // Stopped after its first row: the statement ends when it is reset.
        #expect(try handle.queryOne("SELECT name FROM items\n  ORDER BY id", [])?.string("name") == "item 0")
        #expect(!FileManager.default.fileExists(atPath: file), "written when the connection closes")
        handle.close()

        let profile = SQLiteStatementTotals.read(file: file)
        let insert = try #require(profile.statements[SQLiteStatementKey(connection: "writer", sql: "INSERT INTO items (name) VALUES (?)")])
        #expect(insert.runs == 50)
        #expect(insert.cpuNs > 0 && insert.wallNs >= insert.cpuNs / 2)
        #expect(profile.statements[SQLiteStatementKey(connection: "writer", sql: "SELECT name FROM items ORDER BY id")]?.runs == 1, "one line per statement, its text on one line")
        #expect(profile.clockReadingNs > 0)
        #expect(Array(profile.threads.values) == ["writer"], "the thread the statements ran on")
    }

    @Test func anUnprofiledConnectionWritesNothing() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let handle = try SQLiteHandle(path: directory.databasePath, role: .writer(durable: false), options: .init(), profileFile: nil)
        try handle.execute("CREATE TABLE items (id INTEGER PRIMARY KEY)", [])
        handle.close()
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).allSatisfy { $0.hasPrefix("kakin.sqlite") })
    }
}
