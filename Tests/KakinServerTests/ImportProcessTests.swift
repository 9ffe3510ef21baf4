import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `kakin import` as people run it: the built binaries, local mode, the README's walkthrough as written; and a Kakin
/// killed with SIGKILL halfway through an import.
@Suite(.serialized) struct ImportProcessTests {
    struct LocalKakin {
        var child: ChildProcess
        var base: String
    }

    func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-import-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// `kakin serve` in local mode on a free port, its database in `dir` (a restart reuses both).
    func serve(_ dir: URL, name: String = "serve") async throws -> LocalKakin {
        let out = dir.appendingPathComponent("\(name).out")
        let child = try ChildProcess.spawn(try KakinProcesses.binary.path,
                                           ["serve", "--port", "0", "--database", "sqlite:" + dir.appendingPathComponent("kakin.db").path],
                                           output: out.path, errors: dir.appendingPathComponent("\(name).err").path)
        let marker = "Kakin is running in local mode on http://127.0.0.1:"
        for _ in 0..<3_000 {
            let text = (try? String(contentsOf: out, encoding: .utf8)) ?? ""
            if let range = text.range(of: marker) {
                let digits = text[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits) { return LocalKakin(child: child, base: "http://127.0.0.1:\(port)") }
            }
            guard child.isRunning else { throw ProcessFailure(description: "kakin serve exited: \(text.suffix(800))") }
            try await Task.sleep(for: .milliseconds(20))
        }
        child.signal(SIGKILL)
        throw ProcessFailure(description: "kakin serve did not start")
    }

    /// Runs a shell script in `dir` with the built `kakin` first on the PATH; answers its exit code and output.
    func shell(_ script: String, in dir: URL) async throws -> (status: Int32, out: String, err: String) {
        let file = dir.appendingPathComponent("script-\(UUID().uuidString.prefix(6)).sh")
        try Data(("set -eu\ncd '\(dir.path)'\n" + script).utf8).write(to: file)
        let out = file.path + ".out", err = file.path + ".err"
        let binDir = try KakinProcesses.binary.deletingLastPathComponent().path
        let child = try ChildProcess.spawn("/bin/bash", [file.path], output: out, errors: err,
                                           environment: ["PATH": binDir + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")])
        let status = await child.exit()
        return (status, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "", (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// The ```sh blocks of the README's section `heading`, in order.
    static func readmeBlocks(_ heading: String) throws -> [String] {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let start = text.range(of: "\n## " + heading + "\n") else { throw ProcessFailure(description: "no README section \(heading)") }
        let section = text[start.upperBound...].components(separatedBy: "\n## ")[0]
        return section.components(separatedBy: "```sh\n").dropFirst().map { $0.components(separatedBy: "\n```")[0] }
    }

    static func get(_ base: String, _ path: String) async throws -> JSONValue {
        let (data, _) = try await TestKakin.session.data(from: URL(string: base + path)!)
        return try JSONParser.parse([UInt8](data))
    }

    /// What a customer's status, wallet and ledger say, without what differs between two simulated App Stores and
    /// two Kakins by design (ids, tokens, times, the event count).
    static func comparable(_ base: String, _ customer: String) async throws -> JSONValue {
        let status = try await get(base, "/v1/customers/\(customer)")
        let subscriptions: [JSONValue] = (status["subscriptions"]?.arrayValue ?? []).map {
            ["productId": $0["productId"] ?? .null, "state": $0["state"] ?? .null, "offer": $0["offer"] ?? .null,
             "willAutoRenew": $0["willAutoRenew"] ?? .null]
        }
        let ledger: [JSONValue] = (try await get(base, "/v1/customers/\(customer)/wallet/ledger")["entries"]?.arrayValue ?? []).map {
            ["kind": $0["kind"] ?? .null, "paid": $0["paid"] ?? .null, "free": $0["free"] ?? .null, "balanceAfter": $0["balanceAfter"] ?? .null]
        }
        return ["status": status["status"] ?? .null, "subscriptions": .array(subscriptions), "wallet": status["wallet"] ?? .null,
                "eligibility": status["eligibility"] ?? .null, "ledger": .array(ledger)]
    }

    /// The README's "Moving in" as written (only `B` points at this test's server): 200 customers bought before Kakin
    /// was told, `kakin import appStore customers.csv` applies every history, a second run changes nothing, the old
    /// coin system's balance lands in the unused-balance report. A second local Kakin that was told (the same
    /// purchases with `"notify": true`) shows every customer the same.
    @Test func theReadmesMovingInWalkthroughEndsWhereAToldKakinIs() async throws {
        let blocks = try Self.readmeBlocks("Moving in: import an existing app")
        #expect(blocks.count == 2)
        let dir = try temporaryDirectory(), toldDir = try temporaryDirectory()
        defer {
            try? FileManager.default.removeItem(at: dir)
            try? FileManager.default.removeItem(at: toldDir)
        }
        let kakin = try await serve(dir), told = try await serve(toldDir)
        defer {
            kakin.child.signal(SIGKILL)
            told.child.signal(SIGKILL)
        }
        func pointed(_ block: String, at base: String) -> String {
            block.replacingOccurrences(of: "B=http://127.0.0.1:8080", with: "B=\(base)")
        }
        let before = try await shell(pointed(blocks[0], at: kakin.base), in: dir)
        #expect(before.status == 0, "\(before.err)")
        #expect(before.out.contains("\"status\":\"new\""))
        let toldRun = try await shell(pointed(blocks[0], at: told.base).replacingOccurrences(of: "\\\"notify\\\":false", with: "\\\"notify\\\":true"),
                                      in: toldDir)
        #expect(toldRun.status == 0 && toldRun.out.contains("\"status\":\"active\""), "\(toldRun.err)")

        // The second block continues the first's shell session (its `B`).
        let moving = try await shell("B=\(kakin.base)\n" + blocks[1], in: dir)
        #expect(moving.status == 0, "\(moving.out)\n\(moving.err)")
        #expect(moving.out.contains("done: 200 rows, 200 applied, 0 already present, 0 rejected"), "\(moving.out)")
        #expect(moving.out.contains("done: 200 rows, 0 applied, 200 already present, 0 rejected"), "\(moving.out)")
        #expect(moving.out.contains("done: 1 rows, 1 applied, 0 already present, 0 rejected"), "\(moving.out)")
        #expect(moving.out.contains("\"unusedPaidCoins\":1200") && moving.out.contains("\"source\":\"import\""), "\(moving.out)")
        var differing: [String] = []
        for i in 2...200 {
            let a = try await Self.comparable(kakin.base, "old\(i)"), b = try await Self.comparable(told.base, "old\(i)")
            if a != b { differing.append("old\(i)") }
            if i == 2 { #expect(a["status"] == "active" && a["wallet"]?["total"] == 550) }
        }
        #expect(differing.isEmpty, "\(differing.count) customers differ, first \(differing.first ?? "")")
        // old1 has the imported balance on top of the same purchases.
        #expect(try await Self.get(kakin.base, "/v1/customers/old1/wallet")["total"]?.int64Value == 550 + 1500)
        // The business numbers of the period are the told Kakin's (coins, subscriptions, trials, revenue).
        // The period is days in the reporting zone (Asia/Tokyo, UTC+9), not UTC dates: yesterday and today there, so
        // purchases on either side of Tokyo's midnight (15:00 UTC) are in it for both Kakins.
        let now = try #require(Timestamp.parseRFC3339(try await Self.get(told.base, "/simulator/v1/clock")["now"]?.stringValue ?? ""))
        let tokyoNow = now + 9 * 3_600_000
        let period = "/v1/admin/metrics/overview?from=\(Timestamp.rfc3339(tokyoNow - 86_400_000).prefix(10))&to=\(Timestamp.rfc3339(tokyoNow).prefix(10))"
        func without(_ v: JSONValue, _ keys: [String]) -> JSONValue {
            guard case .object(var o) = v else { return v }
            for k in keys { o[k] = nil }
            return .object(o)
        }
        // Each process rolls its numbers up on its own time: read both until everything asserted below holds (not only
        // a part of it), with a deadline for two processes on a loaded machine.
        var numbers = JSONValue.null, toldNumbers = JSONValue.null
        _ = try await eventually(timeoutSeconds: 60) {
            numbers = try await Self.get(kakin.base, period)
            toldNumbers = try await Self.get(told.base, period)
            return numbers["activeTrials"] == 200 && toldNumbers["activeTrials"] == 200 && toldNumbers["coins"]?["sold"] == 100_000
                && numbers["coins"]?["outstandingPaid"]?.int64Value == (toldNumbers["coins"]?["outstandingPaid"]?.int64Value ?? 0) + 1_200
                && without(numbers, ["from", "to", "coins"]) == without(toldNumbers, ["from", "to", "coins"])
                && without(numbers["coins"] ?? .null, ["outstandingPaid"]) == without(toldNumbers["coins"] ?? .null, ["outstandingPaid"])
        }
        // Not vacuous: both Kakins count the 200 trials (a period missing the purchases' day would compare zeros).
        #expect(numbers["activeTrials"] == 200 && toldNumbers["activeTrials"] == 200 && toldNumbers["coins"]?["sold"] == 100_000,
                "\(numbers) vs told \(toldNumbers)")
        // The imported balance is the one difference: 1,200 more paid coins outstanding (never sold in the period).
        #expect(numbers["coins"]?["outstandingPaid"]?.int64Value == (toldNumbers["coins"]?["outstandingPaid"]?.int64Value ?? 0) + 1_200,
                "\(numbers["coins"] ?? .null) vs told \(toldNumbers["coins"] ?? .null)")
        #expect(without(numbers, ["from", "to", "coins"]) == without(toldNumbers, ["from", "to", "coins"]))
        #expect(without(numbers["coins"] ?? .null, ["outstandingPaid"]) == without(toldNumbers["coins"] ?? .null, ["outstandingPaid"]))
        let check = try await shell("kakin ledger check --database sqlite:kakin.db", in: dir)
        #expect(check.status == 0, "\(check.out)\(check.err)")
    }

    /// SIGKILL halfway through a 10,000-row balances import; restarted, the job resumes at the first row not committed and
    /// ends with every row applied exactly once (`kakin ledger check` passes, one entry per row).
    @Test func killedHalfwayThroughAnImportItResumesAndAppliesEveryRowOnce() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (file, paid, _) = ImportTests.balancesFile(10_000, seed: 9)
        try Data(file.utf8).write(to: dir.appendingPathComponent("balances.csv"))
        var kakin = try await serve(dir)
        defer { kakin.child.signal(SIGKILL) }
        let started = try await ImportTests.upload(kakin.base, "kind=balances", file)
        let id = try #require(started.json["importId"]?.stringValue)
        var doneAtKill: Int64 = 0
        for _ in 0..<10_000 {
            doneAtKill = try await Self.get(kakin.base, "/v1/admin/imports/\(id)")["done"]?.int64Value ?? 0
            if doneAtKill >= 2_000 { break }
            try await Task.sleep(for: .milliseconds(2))
        }
        kakin.child.signal(SIGKILL)
        _ = await kakin.child.exit()
        #expect(doneAtKill >= 2_000 && doneAtKill < 10_000, "killed at \(doneAtKill)")

        kakin = try await serve(dir, name: "restarted")
        let resumed = try await Self.get(kakin.base, "/v1/admin/imports/\(id)")
        #expect(resumed["state"] == "running" && (resumed["done"]?.int64Value ?? 0) >= doneAtKill && (resumed["done"]?.int64Value ?? 0) < 10_000)
        var status = resumed
        for _ in 0..<3_000 where status["state"] != "done" {
            try await Task.sleep(for: .milliseconds(20))
            status = try await Self.get(kakin.base, "/v1/admin/imports/\(id)")
        }
        #expect(ImportTests.counts(status) == [10_000, 10_000, 10_000, 0, 0])
        let report = try await Self.get(kakin.base, "/v1/admin/reports/unused-balance?asOf=2026-09-30")
        #expect(report["totals"]?.arrayValue?.first?["unusedPaidCoins"]?.int64Value == paid)
        kakin.child.signal(SIGTERM)
        _ = await kakin.child.exit()
        let check = try await shell("kakin ledger check --database sqlite:kakin.db", in: dir)
        #expect(check.status == 0, "\(check.out)\(check.err)")
        #expect(check.out.contains("\"entries\":10000") || check.out.contains("\"entries\": 10000"), "\(check.out)")
    }
}
