import Foundation
import KakinCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The README's "Offerings and experiments", run exactly as written: its shell block, by bash, against `kakin serve` in
/// local mode (the binaries this test run built, `kakin` on the PATH), with `B` set as the README's first block sets it.
@Suite(.serialized) struct LocalModeOfferings {
    /// The JSON objects in a line (curl prints answers without a line break, so several may share one).
    static func objects(in line: String) -> [JSONValue] {
        var out: [JSONValue] = []
        var depth = 0, inString = false, escaped = false
        var start: String.Index?
        for i in line.indices {
            let c = line[i]
            if inString {
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { inString = false }
                continue
            }
            switch c {
            case "\"": inString = depth > 0
            case "{":
                if depth == 0 { start = i }
                depth += 1
            case "}" where depth > 0:
                depth -= 1
                if depth == 0, let s = start, let v = try? JSONParser.parse(String(line[s...i])) { out.append(v) }
            default: break
            }
        }
        return out
    }

    @Test func theReadmesWalkthroughSplitsByTheWeightsAnswersTheSameAndCountsThePurchases() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-readme-offerings-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let binary = try KakinProcesses.binary
        let serveOut = dir.appendingPathComponent("serve.out")
        let serve = try ChildProcess.spawn(binary.path, ["serve", "--port", "0", "--database", "sqlite:" + dir.appendingPathComponent("kakin.db").path],
                                           output: serveOut.path, errors: dir.appendingPathComponent("serve.err").path)
        defer { serve.signal(SIGKILL) }
        let port = try await LocalModeEvents().port(in: serveOut, after: "Kakin is running in local mode on http://127.0.0.1:", child: serve)

        let script = dir.appendingPathComponent("readme.sh")
        let block = try ReadmeWalkthroughs.block("README.md", after: "## Offerings and experiments", language: "sh")
        try ("cd '\(dir.path)'\n" + block).write(to: script, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("readme.out"), err = dir.appendingPathComponent("readme.err")
        let bash = try ChildProcess.spawn("/bin/bash", ["-e", script.path], output: out.path, errors: err.path, environment: [
            "B": "http://127.0.0.1:\(port)",
            "PATH": binary.deletingLastPathComponent().path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"),
        ])
        #expect(await bash.exit() == 0, "\((try? String(contentsOf: err, encoding: .utf8)) ?? "")")
        let lines = try String(contentsOf: out, encoding: .utf8).split(separator: "\n").map(String.init)

        // The four objects were stored (version 1 each); the broken change was refused.
        let json = lines.flatMap(Self.objects)
        #expect(json.prefix(4).map { $0["version"] } == [1, 1, 1, 1])
        #expect(json.dropFirst(4).first?["error"]?["code"] == "offering_not_defined")

        // The split: within 3 standard deviations of 500 each (n = 1,000, p = ½: σ ≈ 15.8).
        var counts: [String: Int] = [:]
        for line in lines {
            for v in ["a", "b"] where line.hasSuffix(" \"variant\":\"\(v)\"") {   // uniq -c: "    503 \"variant\":\"a\""
                counts[v] = line.dropLast(14).split(separator: " ").last.flatMap { Int($0) }
            }
        }
        #expect(counts["a", default: 0] + counts["b", default: 0] == 1_000)
        #expect(abs(Double(counts["a", default: 0]) - 500) <= 3 * (1_000 * 0.25).squareRoot(), "\(counts)")
        #expect(lines.contains("same answers"))

        // What the customers were shown and bought, from the file the walkthrough wrote.
        let shown = try String(contentsOf: dir.appendingPathComponent("offerings.jsonl"), encoding: .utf8).split(separator: "\n")
            .map { try JSONParser.parse(String($0)) }
        #expect(shown.count == 1_000)
        let appLine = try #require(lines.first { $0.hasPrefix("onboarding: offering ") })
        #expect(appLine.contains(shown[0]["offering"]?["id"]?.stringValue ?? "?") && appLine.contains("variant \(shown[0]["experiment"]?["variant"]?.stringValue ?? "?")"))
        var buyers: [String: Int] = [:]
        for answer in shown.prefix(100) { buyers[answer["experiment"]?["variant"]?.stringValue ?? "", default: 0] += 1 }

        // The results match: variant a's buyers started a free trial and converted; b's bought coins.
        let results = try #require(json.first { $0["experiment"] == "onboarding-test" })
        let variants = results["variants"]?.arrayValue ?? []
        let a = try #require(variants.first { $0["id"] == "a" }), b = try #require(variants.first { $0["id"] == "b" })
        #expect(a["enrolled"]?.int64Value == Int64(counts["a", default: -1]) && b["enrolled"]?.int64Value == Int64(counts["b", default: -1]))
        #expect(a["trialsStarted"]?.int64Value == Int64(buyers["a", default: 0]) && a["trialConversions"]?.int64Value == Int64(buyers["a", default: 0]))
        #expect(a["paidConversions"]?.int64Value == Int64(buyers["a", default: 0]) && b["paidConversions"]?.int64Value == Int64(buyers["b", default: 0]))
        #expect(b["trialsStarted"] == 0 && a["refunds"] == 0 && b["refunds"] == 0)
        // Revenue per enrolled customer: a's renewals at ¥980, b's coins at ¥600.
        func revenue(_ v: JSONValue) -> Double { (v["revenuePerCustomer"]?.arrayValue ?? []).first { $0["currency"] == "JPY" }?["amount"]?.doubleValue ?? -1 }
        #expect(abs(revenue(a) - 980 * Double(buyers["a", default: 0]) / Double(counts["a", default: 1])) < 0.01)
        #expect(abs(revenue(b) - 600 * Double(buyers["b", default: 0]) / Double(counts["b", default: 1])) < 0.01)
        #expect(a["probabilityToBeatControl"] == .null && b["probabilityToBeatControl"]?.doubleValue != nil)

        // The numbers of variant b's customers: their coin purchases.
        let numbers = try #require(json.last)
        #expect(numbers["revenue"]?.arrayValue?.first?["gross"]?.int64Value == 600 * Int64(buyers["b", default: 0]), "\(numbers)")

        serve.signal(SIGTERM)
        #expect(await serve.exit() == 0)
    }
}
