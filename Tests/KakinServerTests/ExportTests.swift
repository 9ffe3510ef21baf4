import Foundation
import HTTPServer
import KakinCore
import KakinStorage
@testable import KakinServer
import Testing

/// `kakin export` on a growing database: a first export, more purchases, renewals, spends and customers, then an
/// export `--since` the first one's `until`. Every row of every table is in exactly one of the two exports (counted
/// against a full export of the whole window), and no temporary file is left behind.
@Suite struct ExportTests {
    static func lines(_ dir: URL, _ file: String) throws -> [JSONValue] {
        let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
        return try text.split(separator: "\n").map { try JSONParser.parse(Array($0.utf8)) }
    }

    static func key(_ table: ExportTable, _ row: JSONValue) -> String {
        switch table {
        case .transactions: return (row["transactionId"]?.stringValue ?? "") + "@" + (row["updatedAt"]?.stringValue ?? "")
        case .ledger: return row["entryId"]?.stringValue ?? ""
        case .events: return row["eventId"]?.stringValue ?? ""
        case .customers: return row["customerId"]?.stringValue ?? ""
        }
    }

    /// Without `--until` the window ends 5 s of real time ago on the clock the rows were stamped with: the wall clock, or
    /// the simulated clock local mode records (standing still: its now; running at a rate: 5 s × rate ago).
    @Test func theDefaultWindowEndsOnTheClockTheRowsWereStampedWith() {
        let wall: Int64 = 1_800_000_000_000
        #expect(Exporter.defaultUntilMs(stampClock: nil, wallNowMs: wall) == wall - 5_000)
        let ahead = Timestamp.parseRFC3339("2027-03-01T00:00:00Z")!
        #expect(Exporter.defaultUntilMs(stampClock: StampClock(simulatedMs: ahead, wallMs: wall - 60_000, rate: 0), wallNowMs: wall) == ahead)
        #expect(Exporter.defaultUntilMs(stampClock: StampClock(simulatedMs: ahead, wallMs: wall - 60_000, rate: 720), wallNowMs: wall)
                == ahead + 55_000 * 720)
        // Recorded just now (a clock move): never before the reading.
        #expect(Exporter.defaultUntilMs(stampClock: StampClock(simulatedMs: ahead, wallMs: wall, rate: 720), wallNowMs: wall) == ahead)
    }

    /// Local mode records the simulated clock at start and after every move; an export without `--until` after a move of
    /// 45 days has every row of every table, and one `--since` it after more activity and a move has exactly the new rows.
    @Test func inLocalModeTheDefaultWindowHasEveryRowWrittenBeforeTheLastClockMove() async throws {
        try await SimulatedKakin.with { k in
            // The clock moved as `kakin serve` moves it: through local mode's mount of the simulator.
            func advance(days: Int64) async {
                let request = HTTPRequest(method: "POST", path: "/simulator/v1/clock", rawPath: "/simulator/v1/clock", queryItems: [],
                                          headers: HTTPHeaders(), body: JSONValue.object(["advanceSeconds": .int(days * 86_400)]).serialized(),
                                          requestId: "test", remoteAddress: nil)
                #expect(await k.local.simulatorCall(request).status == 200)
            }
            for c in ["u1", "u2"] { try await k.buy(c, "coins.100") }
            try await k.buy("u1", "premium.monthly")
            await advance(days: 45)
            let clock = try #require(try await k.app.store.stampClock())
            #expect(clock.simulatedMs == k.nowMs && clock.rate == 0)
            let dir = k.directory.appendingPathComponent("export")
            let until1 = Exporter.defaultUntilMs(stampClock: clock, wallNowMs: Int64(Date().timeIntervalSince1970 * 1000))
            let first = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: 0, untilMs: until1, format: .jsonl)
            for table in ExportTable.allCases {
                let rows = try await k.app.store.exportPage(table, sinceMs: 0, untilMs: .max, afterKey: nil, limit: KakinStore.exportPageRowsMax)
                #expect(first["files"]?[table.rawValue]?["rows"]?.int64Value == Int64(rows.count), "\(table)")
            }
            // Written at the simulated now: in the run after the next clock move, not lost and not twice.
            try await k.buy("u3", "coins.500")
            await advance(days: 1)
            let until2 = Exporter.defaultUntilMs(stampClock: try await k.app.store.stampClock(), wallNowMs: Int64(Date().timeIntervalSince1970 * 1000))
            let second = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: until1, untilMs: until2, format: .jsonl)
            #expect(second["files"]?["customers"]?["rows"] == 1)
            #expect(second["files"]?["ledger"]?["rows"] == 1)
            #expect(second["files"]?["transactions"]?["rows"] == 1)
        }
    }

    @Test func anIncrementalExportLosesAndDuplicatesNoRow() async throws {
        try await SimulatedKakin.with { k in
            let dir = k.directory.appendingPathComponent("export")
            for c in ["u1", "u2", "u3"] { try await k.buy(c, "coins.100") }
            try await k.buy("u1", "premium.monthly")
            _ = await k.kakin("POST", "/v1/customers/u2/wallet/spend", ["amount": 30, "item": "x"], headers: [("Idempotency-Key", "a")])
            try await k.advance(days: 1)
            let first = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: 0, untilMs: k.nowMs, format: .jsonl)
            let until1 = try #require(first["until"]?.stringValue.flatMap(Timestamp.parseRFC3339))

            // The database grows: new customers, purchases, a trial that converts and renews, spends.
            try await k.advance(days: 1)
            for c in ["u4", "u5"] { try await k.buy(c, "coins.500") }
            try await k.buy("u3", "premium.plus.monthly")
            _ = await k.kakin("POST", "/v1/customers/u4/wallet/spend", ["amount": 10, "item": "y"], headers: [("Idempotency-Key", "b")])
            try await k.advance(days: 40)
            let second = try await Exporter.export(store: k.app.store, directory: dir.path, sinceMs: until1, untilMs: k.nowMs, format: .jsonl)
            let whole = try await Exporter.export(store: k.app.store, directory: k.directory.appendingPathComponent("whole").path, sinceMs: 0,
                                                  untilMs: k.nowMs, format: .jsonl)

            for table in ExportTable.allCases {
                let a = try Self.lines(dir, first["files"]![table.rawValue]!["file"]!.stringValue!)
                let b = try Self.lines(dir, second["files"]![table.rawValue]!["file"]!.stringValue!)
                let all = try Self.lines(k.directory.appendingPathComponent("whole"), whole["files"]![table.rawValue]!["file"]!.stringValue!)
                let keys = (a + b).map { Self.key(table, $0) }
                #expect(Set(keys).count == keys.count, "\(table): a row exported twice")
                #expect(Set(keys) == Set(all.map { Self.key(table, $0) }), "\(table): \(keys.count) exported in two runs, \(all.count) in one")
                #expect(!a.isEmpty && !b.isEmpty, "\(table) grew: \(a.count) then \(b.count)")
                #expect(a.allSatisfy { $0.objectValue?.keys.sorted() == table.columns.sorted() })
                print("export \(table.rawValue): first \(a.count), since \(b.count), whole \(all.count)")
            }
            // Whole or nothing: only finished files and manifests are there.
            let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
            #expect(!names.contains { $0.hasPrefix(".") }, "\(names)")
            #expect(names.filter { $0.hasPrefix("export-") }.count == 2)

            // CSV: a header of the documented columns, one line per row.
            let csv = try await Exporter.export(store: k.app.store, directory: k.directory.appendingPathComponent("csv").path, sinceMs: 0,
                                                untilMs: k.nowMs, format: .csv)
            let text = try String(contentsOf: k.directory.appendingPathComponent("csv").appendingPathComponent(csv["files"]!["ledger"]!["file"]!.stringValue!),
                                  encoding: .utf8)
            #expect(text.split(separator: "\n").first.map(String.init) == ExportTable.ledger.columns.joined(separator: ","))
            #expect(Int64(text.split(separator: "\n").count - 1) == csv["files"]!["ledger"]!["rows"]!.int64Value)
        }
    }
}
