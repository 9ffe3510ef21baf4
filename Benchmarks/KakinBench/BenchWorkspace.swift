import Foundation
import KakinCore

/// A run's temporary directory: the test CA's root, the signed data, logs.
/// Removed after a clean run, kept (and named) after a failure for a look at the logs.
final class BenchWorkspace {
    let directory: URL
    let packageRoot: URL
    let kakin: URL
    let appStore: BenchAppStore
    let rootCertificate: URL

    init(kakin: URL?) throws {
        packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        self.kakin = kakin ?? packageRoot.appendingPathComponent(".build/release/kakin")
        guard FileManager.default.isExecutableFile(atPath: self.kakin.path) else {
            throw SubprocessFailure(description: "no kakin binary at \(self.kakin.path): build it with `swift build -c release` (scripts/bench does)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-bench-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        appStore = try BenchAppStore(nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        rootCertificate = directory.appendingPathComponent("ca.der")
        try Data(appStore.ca.rootDER).write(to: rootCertificate)
    }

    func file(_ name: String) -> URL { directory.appendingPathComponent(name) }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
