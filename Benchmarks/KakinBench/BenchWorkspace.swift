import Foundation
import KakinCore
import KakinPostgreSQL

/// A run's temporary directory: the test CA's root, one config and SQLite file per server, logs.
/// Removed after a clean run, kept (and named) after a failure for a look at the logs.
final class BenchWorkspace: Sendable {
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
        (try writeConfig(name, database: "sqlite:\(name).db", products: products), file("\(name).db"))
    }

    /// The same config with any `database` (a PostgreSQL URL from `postgresSchema`).
    func writeConfig(_ name: String, database: String, products: JSONValue = BenchAppStore.productsJSON) throws -> URL {
        let config: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string(database),
            "trustedRoots": [.string(rootCertificate.lastPathComponent)],
            "apps": [["bundleId": .string(BenchAppStore.bundleId), "environments": ["Sandbox"], "products": products]],
        ]
        let url = file("\(name).json")
        try Data(config.serialized(pretty: true)).write(to: url)
        return url
    }

    /// An empty schema `kakin_bench_NAME` on the PostgreSQL server at `cluster` (dropped first if a run
    /// left it); the URL whose connections use it.
    func postgresSchema(_ name: String, cluster: String) throws -> String {
        let schema = "kakin_bench_\(name.replacingOccurrences(of: "-", with: "_"))"
        try blocking {
            let database = try PostgresDatabase(url: cluster, options: .init(writerConnections: 1, readerConnections: 1))
            do {
                try await database.write { db in
                    try db.execute("DROP SCHEMA IF EXISTS \(schema) CASCADE", [])
                    try db.execute("CREATE SCHEMA \(schema)", [])
                }
            } catch {
                await database.close()
                throw error
            }
            await database.close()
        }
        return cluster + (cluster.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(schema)"
    }

    /// `kakin ledger check` on a database no server is using; its report (`ok`, `customers`, `entries`).
    func ledgerCheck(database: URL) throws -> JSONValue {
        try ledgerCheck(databaseArgument: "sqlite:\(database.path)")
    }

    /// The same for a `--database` argument (`sqlite:PATH` or a PostgreSQL URL).
    func ledgerCheck(databaseArgument: String) throws -> JSONValue {
        let finished = try Subprocess.run([kakin.path, "ledger", "check", "--database", databaseArgument],
                                          errorLog: file("ledger-check.stderr"), allowedExitStatuses: [0, 1])
        return try JSONParser.parse(finished.output)
    }

    func remove() {
        try? FileManager.default.removeItem(at: directory)
    }
}
