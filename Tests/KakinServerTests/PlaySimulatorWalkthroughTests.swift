import Foundation
import Testing
@testable import KakinServer

#if canImport(Glibc)
    import Glibc
#endif

/// The Play simulator README's curl walkthrough, run exactly as written (bash, curl, jq) against `kakin serve` in
/// local mode — the binary this test run built — with only the port changed; its output must be the README's.
@Suite(.serialized) struct PlaySimulatorWalkthroughTests {
    static let readme = "Sources/GooglePlaySimulator/README.md"

    /// The first ```sh block after `heading`, and the first ```text block after it (`ReadmeWalkthroughs.block`).
    static func blocks(after heading: String) throws -> (script: String, printed: String) {
        (try ReadmeWalkthroughs.block(readme, after: heading, language: "sh"), try ReadmeWalkthroughs.block(readme, after: heading, language: "text"))
    }

    @Test func theReadmeWalkthroughPrintsWhatTheReadmeSays() async throws {
        let (script, printed) = try Self.blocks(after: "## Walkthrough in local mode (curl)")
        let events = LocalModeEvents()
        let dir = try events.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let serveOut = dir.appendingPathComponent("serve.out")
        let serve = try ChildProcess.spawn(try KakinProcesses.binary.path, ["serve", "--port", "0", "--database", "sqlite:" + dir.appendingPathComponent("kakin.db").path],
                                           output: serveOut.path, errors: dir.appendingPathComponent("serve.err").path)
        defer { serve.signal(SIGKILL) }
        let port = try await events.port(in: serveOut, after: "Kakin is running in local mode on http://127.0.0.1:", child: serve)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", "set -euo pipefail\n" + script.replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(port)")]
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        print("The Play simulator walkthrough printed:\n\(out)")
        #expect(process.terminationStatus == 0, "\(err)")
        #expect(out.split(separator: "\n") == printed.split(separator: "\n"))

        // Shut down cleanly: the Play simulator's state is saved beside the database.
        serve.signal(SIGTERM)
        #expect(await serve.exit() == 0)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("kakin.db.play-simulator.json").path))
    }
}
