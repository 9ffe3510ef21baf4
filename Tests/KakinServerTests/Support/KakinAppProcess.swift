import Foundation

/// Runs the built `kakin` binary as its own process (the way a tester scripts `kakin app`), so that
/// `--fail-at` really ends a process and each invocation is a separate launch of the same device.
struct KakinProcess {
    struct Result: CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\nstdout:\n\(stdout)stderr:\n\(stderr)" }
    }

    struct NotBuilt: Error, CustomStringConvertible {
        var path: String
        var description: String { "\(path) is missing: build the package first (swift build --build-tests)" }
    }

    /// `kakin` sits beside the test bundle in the build directory.
    static var executable: URL {
        let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        return me.deletingLastPathComponent().appendingPathComponent("kakin")
    }

    /// Runs `kakin arguments…` and waits for it without blocking a thread of the cooperative pool.
    /// - Parameter environment: added to (or replacing) the test process's own variables.
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        let exe = executable
        guard FileManager.default.isExecutableFile(atPath: exe.path) else { throw NotBuilt(path: exe.path) }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-proc-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let outURL = dir.appendingPathComponent("out")
        let errURL = dir.appendingPathComponent("err")
        _ = FileManager.default.createFile(atPath: outURL.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errURL.path, contents: nil)
        let out = try FileHandle(forWritingTo: outURL)
        let err = try FileHandle(forWritingTo: errURL)
        let process = Process()
        process.executableURL = exe
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = out
        process.standardError = err
        let status: Int32 = try await withCheckedThrowingContinuation { c in
            process.terminationHandler = { p in c.resume(returning: p.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                c.resume(throwing: error)
            }
        }
        try out.close()
        try err.close()
        return Result(status: status, stdout: try String(contentsOf: outURL, encoding: .utf8), stderr: try String(contentsOf: errURL, encoding: .utf8))
    }
}
