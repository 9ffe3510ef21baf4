import Foundation
import KakinCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The READMEs' walkthroughs, run exactly as written: each ```sh block is taken from the README at test time and run by
/// bash with curl and jq, against the `kakin` this test run built, in a network namespace of its own (`unshare -n`), so
/// the README's fixed ports (8080, 8090) are free whatever else runs on the machine. The harness around a block only
/// puts `kakin` on the PATH, starts `kakin serve` where the README says to, lets curl wait for a server still starting
/// (`.curlrc`: retry while the connection is refused) and reads what the assertions need after the block.
@Suite(.serialized) struct ReadmeWalkthroughs {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let scriptSecondsMax = 300

    /// The first fenced block of `language` after `heading` in `readme` (a path from the package root).
    static func block(_ readme: String, after heading: String, language: String) throws -> String {
        let text = try String(contentsOf: root.appendingPathComponent(readme), encoding: .utf8)
        guard let start = text.range(of: "\n" + heading + "\n"),
              let open = text.range(of: "```\(language)\n", range: start.upperBound..<text.endIndex),
              let close = text.range(of: "\n```\n", range: open.upperBound..<text.endIndex) else {
            throw ProcessFailure(description: "no ```\(language) block after \(heading) in \(readme)")
        }
        return String(text[open.upperBound..<close.lowerBound]) + "\n"
    }

    struct Run {
        var status: Int32
        var output: String
        var directory: URL

        /// The walkthrough's own output (before the harness's `--- after` marker) and what the harness read after it.
        var walkthrough: String { output.components(separatedBy: "--- after\n")[0] }
        var after: [String] { output.components(separatedBy: "--- after\n").dropFirst().first?.split(separator: "\n").map(String.init) ?? [] }
    }

    /// Runs `prologue`, the README's block, then `epilogue` (after a `--- after` line) in a fresh directory and network
    /// namespace; every job the script started is stopped at its end.
    static func run(_ block: String, prologue: String = "", epilogue: String = "") async throws -> Run {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let bin = try KakinProcesses.binary.deletingLastPathComponent().path
        try "retry = 60\nretry-connrefused\nretry-delay = 1\n".write(to: dir.appendingPathComponent(".curlrc"), atomically: true, encoding: .utf8)
        let script = """
            ip link set lo up || exit 97
            export PATH="\(bin):$PATH" CURL_HOME="\(dir.path)"
            cd "\(dir.path)"
            \(prologue)
            \(block)
            echo '--- after'
            \(epilogue)
            kill $(jobs -p) 2>/dev/null
            wait
            """
        try script.write(to: dir.appendingPathComponent("walkthrough.sh"), atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("walkthrough.out")
        let child = try ChildProcess.spawn("/usr/bin/timeout", ["\(scriptSecondsMax)", "/usr/bin/unshare", "-n", "/bin/bash",
                                                                 dir.appendingPathComponent("walkthrough.sh").path],
                                           output: out.path, errors: dir.appendingPathComponent("walkthrough.err").path)
        let status = await child.exit()
        let errors = (try? String(contentsOf: dir.appendingPathComponent("walkthrough.err"), encoding: .utf8)) ?? ""
        if status == 97 || errors.contains("unshare failed") {
            throw ProcessFailure(description: "the walkthroughs run in a network namespace of their own: unshare -n needs root or CAP_SYS_ADMIN (\(errors.suffix(300)))")
        }
        return Run(status: status, output: (try? String(contentsOf: out, encoding: .utf8)) ?? "", directory: dir)
    }

    /// What changes from run to run (ids, keys, signatures, times, request ids, numbers), replaced by placeholders so a
    /// run's output compares with the README's "What it printed".
    static func shape(_ text: String) -> [String] {
        var s = text
        let rules: [(String, String)] = [
            ("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
            ("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?Z", "<time>"),
            ("req_[a-z0-9]+", "<request>"),
            ("[A-Za-z0-9+/]{40,}={0,2}", "<signature>"),
            ("\\b[A-Z0-9]{10}\\b", "<key>"),
            ("[0-9]+", "<n>"),
        ]
        for (pattern, placeholder) in rules {
            s = s.replacingOccurrences(of: pattern, with: placeholder, options: .regularExpression)
        }
        return s.split(separator: "\n").map(String.init)
    }

    /// The simulator README's "Walkthrough (curl)", with `kakin simulator serve` on its own as it says: step 5 cancels
    /// (no offer is taken) and the subscription lapses, EXPIRED/VOLUNTARY at the end of the paid month.
    @Test func theSimulatorWalkthroughCancelsAndTheSubscriptionLapses() async throws {
        let block = try Self.block("Sources/AppStoreSimulator/README.md", after: "## Walkthrough (curl)", language: "sh")
        let run = try await Self.run(block, epilogue: "curl -s $B/simulator/v1/subscriptions/$OT | jq -c '{state, autoRenewStatus, expiresDate}'")
        defer { try? FileManager.default.removeItem(at: run.directory) }
        #expect(run.status == 0, "\(run.output.suffix(2000))")
        // Step 5: the cancel answer, then the lapse's notifications.
        let walkthrough = run.walkthrough
        #expect(walkthrough.contains("\"autoRenewDisabled\"\n[\n  \"EXPIRED/VOLUNTARY\"\n]"), "\(walkthrough.suffix(3000))")
        #expect(walkthrough.contains("\"notificationType\": \"DID_RENEW\"") && walkthrough.contains("\"signedDate\": \"2026-01-08T00:00:00Z\""))
        #expect(run.after == [#"{"state":"expired","autoRenewStatus":false,"expiresDate":"2026-02-08T00:00:00Z"}"#], "\(run.after)")
    }

    /// The simulator README's "Offers end to end in local mode": `kakin serve` in an empty directory, u1 cancels and
    /// lapses (inactive, expired), then Kakin signs promo.6m.free for the lapsed customer and the simulator redeems it;
    /// every line prints what the README says it printed (ids, keys, signatures and times aside).
    @Test func theOfferWalkthroughSignsAndRedeemsTheLapsedCustomersOffer() async throws {
        let readme = "Sources/AppStoreSimulator/README.md"
        let heading = "## Offers end to end in local mode (curl)"
        let block = try Self.block(readme, after: heading, language: "sh")
        let printed = try Self.block(readme, after: heading, language: "text")
        let run = try await Self.run(block, prologue: "kakin serve > serve.out 2> serve.err &",
                                     epilogue: "curl -s $B/v1/customers/u1 | jq -c '{status, subscription: .subscriptions[0] | {state, offer}}'")
        defer { try? FileManager.default.removeItem(at: run.directory) }
        #expect(run.status == 0, "\(run.output.suffix(2000))")
        let lines = run.walkthrough.split(separator: "\n").map(String.init)
        #expect(Self.shape(run.walkthrough) == Self.shape(printed), "printed:\n\(run.walkthrough)")
        // The cancelled customer lapsed: inactive, expired.
        #expect(lines.contains { $0.hasPrefix(#"{"status":"inactive","subscription":{"state":"expired","#) }, "\(lines)")
        #expect(lines.contains("autoRenewDisabled"))
        // promo.6m.free signed for them (the legacy fields StoreKit takes) and redeemed: subscribed again with that offer.
        #expect(lines.contains(#"{"outcome":"resubscribed","notifications":["SUBSCRIBED/RESUBSCRIBE"]}"#), "\(lines)")
        #expect(lines.contains { $0.hasPrefix(#"{"status":"active","subscription":{"state":"subscribed","#)
                                 && $0.hasSuffix(#""offer":{"id":"promo.6m.free","type":"promotional"}}}"#) }, "\(lines)")
        #expect(run.after.first?.contains(#""offer":{"id":"promo.6m.free","type":"promotional"}"#) == true, "\(run.after)")
    }

    /// The main README's "Google Play beside the App Store": coins on Play and on the App Store, a Play subscription with
    /// the free week, its renewal, grace, hold and recovery, an upgrade (a linked token) and Google's refunds, in local
    /// mode; every line prints what the README says it printed (ids, tokens and times aside), and the status, events,
    /// wallet, ledger and desk agree at each step.
    @Test func thePlayWalkthroughAgreesAtEveryStep() async throws {
        let heading = "## Google Play beside the App Store (curl)"
        let block = try Self.block("README.md", after: heading, language: "sh")
        let printed = try Self.block("README.md", after: heading, language: "text")
        let run = try await Self.run(block, prologue: "kakin serve > serve.out 2> serve.err &")
        defer { try? FileManager.default.removeItem(at: run.directory) }
        #expect(run.status == 0, "\(run.output.suffix(2000))")
        #expect(Self.shape(run.walkthrough) == Self.shape(printed), "printed:\n\(run.walkthrough)")
        let lines = run.walkthrough.split(separator: "\n").map(String.init)
        // Step 1: one wallet for both stores; the desk says the same.
        #expect(lines.contains(#"{"error":"already_processed","grant":{"coins":{"free":50,"paid":500}}}"#), "\(lines)")
        #expect(lines.contains("sees it new 1,100 coins · paid 1,000 · free 100"), "\(lines)")
        // Step 4: grace served, hold not, recovered; the desk follows.
        #expect(lines.contains { $0.hasPrefix(#"{"status":"active","wallet":1100,"premium":[{"source":"googlePlay","state":"inGracePeriod","#) })
        #expect(lines.contains { $0.hasPrefix(#"{"status":"inactive","wallet":1100,"premium":[{"source":"googlePlay","state":"inBillingRetryPeriod","#) })
        #expect(lines.contains("sees it inactive 1,100 coins · paid 1,000 · free 100"))
        // Step 5: the upgrade's token entitles the one item; step 6: revoked, and the coins clawed back.
        #expect(lines.contains { $0.hasPrefix(#"{"status":"active","wallet":1100,"premium":[{"source":"googlePlay","state":"subscribed","#)
                                 && $0.hasSuffix(#""newestToken":true}]}"#) })
        #expect(lines.contains { $0.hasPrefix(#"{"status":"inactive","wallet":550,"premium":[{"source":"googlePlay","state":"revoked","#) })
        #expect(lines.last == "sees it inactive 550 coins · paid 500 · free 50", "\(lines.suffix(3))")
    }

    /// The main README's "Local mode in two minutes", then the clock moved 10 more days (45 in all) and `kakin export`
    /// without `--until`: every transaction, ledger entry, event and customer of the database is in it. A purchase at
    /// the simulated now, one more day, and `kakin export --since` the first run's `until` adds exactly the new rows.
    @Test func theLocalModeFlowThenAnExportAfterTheClockMovedHasEveryRow() async throws {
        let block = try Self.block("README.md", after: "## Local mode in two minutes", language: "sh")
        let count = """
            for t in transactions ledger_entries outbox_events customers; do printf '%s ' "$(sqlite3 kakin.db "SELECT count(*) FROM $t")"; done; echo
            """
        let epilogue = """
            curl -s $B/v1/customers/u1 | jq -c '{status, paid: .wallet.paid, subscription: .subscriptions[0].state, premium: .eligibility.introductoryOffer.premium}'
            curl -s -X POST $B/simulator/v1/clock -d '{"advanceSeconds": 864000}' > /dev/null
            \(count)
            kakin export --to out > first.json && jq -c '[.files.transactions.rows, .files.ledger.rows, .files.events.rows, .files.customers.rows]' first.json
            curl -s -X POST $B/simulator/v1/purchases -d "{\\"productId\\":\\"coins.100\\",\\"appAccountToken\\":\\"$T\\"}" > /dev/null
            curl -s -X POST $B/simulator/v1/clock -d '{"advanceSeconds": 86400}' > /dev/null
            \(count)
            kakin export --to out --since "$(jq -r .until first.json)" | jq -c '[.files.transactions.rows, .files.ledger.rows, .files.events.rows, .files.customers.rows]'
            """
        let run = try await Self.run(block, prologue: "kakin serve > serve.out 2> serve.err &", epilogue: epilogue)
        defer { try? FileManager.default.removeItem(at: run.directory) }
        #expect(run.status == 0, "\(run.output.suffix(2000))")
        let after = run.after
        try #require(after.count == 5, "\(run.output.suffix(3000))")
        // What the README says: 500 paid coins (+50 free), 120 spent (the free ones first); step 4: active, the renewal in,
        // premium no longer eligible for the free week.
        #expect(after[0] == #"{"status":"active","paid":430,"subscription":"subscribed","premium":false}"#, "\(after[0])")
        func numbers(_ line: String) -> [Int] { line.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) } }
        let database = numbers(after[1]), exported = numbers(after[2])
        #expect(database.count == 4 && exported == database, "the database holds \(database), the export wrote \(exported)")
        #expect(database.allSatisfy { $0 > 0 })
        let grown = numbers(after[3]), added = numbers(after[4])
        #expect(added == zip(grown, database).map { $0 - $1 }, "the database grew from \(database) to \(grown), the second run added \(added)")
        #expect(added[0] == 1 && added[1] == 1, "one purchase: one transaction, one ledger entry")
        print("README flow + 45 days: database \(database), export \(exported); after a purchase: +\(added)")
    }
}
