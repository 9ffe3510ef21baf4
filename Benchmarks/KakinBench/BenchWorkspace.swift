import Foundation
import KakinCore

/// A run's temporary directory: the test CA's root, one config and SQLite file per server, logs.
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

    /// Writes `NAME.json`: loopback, an ephemeral port, `sqlite:NAME.db` here, the CA's root as the only
    /// trusted root, one Sandbox app selling `products` (the coin packs), no auth (loopback only).
    func writeConfig(_ name: String, products: JSONValue = BenchAppStore.productsJSON) throws -> (config: URL, database: URL) {
        let config: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string("sqlite:\(name).db"),
            "trustedRoots": [.string(rootCertificate.lastPathComponent)],
            "apps": [["bundleId": .string(BenchAppStore.bundleId), "environments": ["Sandbox"], "products": products]],
        ]
        let url = file("\(name).json")
        try Data(config.serialized(pretty: true)).write(to: url)
        return (url, file("\(name).db"))
    }

    /// `kakin ledger check` on a database no server is using; its report (`ok`, `customers`, `entries`).
    func ledgerCheck(database: URL) throws -> JSONValue {
        let finished = try Subprocess.run([kakin.path, "ledger", "check", "--database", "sqlite:\(database.path)"],
                                          errorLog: file("ledger-check.stderr"), allowedExitStatuses: [0, 1])
        return try JSONParser.parse(finished.output)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
