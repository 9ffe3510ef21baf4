import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService
import KakinTestPostgres
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several `kakin serve` processes (the binary this test run built) on one PostgreSQL schema, as a team
/// runs them behind a load balancer: a config file each with an ephemeral loopback port, the tests' CA
/// as the only trusted root, one Sandbox app selling coins, no auth (loopback).
final class KakinProcesses: @unchecked Sendable {
    // @unchecked: `servers` changes only in `start`/`restart`, called by the one test that owns this value.
    struct Server {
        var child: ChildProcess
        var port: Int
        var log: URL
    }

    let directory: URL
    let config: URL
    let appStore: TestAppStore
    let schema: TestPostgres.Schema
    private(set) var servers: [Server] = []

    static let startTimeoutSeconds = 60.0

    /// The built `kakin` beside the test bundle (`swift build --build-tests` builds every product).
    static var binary: URL {
        get throws {
            let candidates = [
                URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("kakin"),
                Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("kakin"),
                URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                    .deletingLastPathComponent().appendingPathComponent(".build/debug/kakin"),
            ]
            guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
                throw ProcessFailure(description: "no kakin binary next to the tests (run `swift build --build-tests`)")
            }
            return found
        }
    }

    private init(directory: URL, config: URL, appStore: TestAppStore, schema: TestPostgres.Schema) {
        self.directory = directory
        self.config = config
        self.appStore = appStore
        self.schema = schema
    }

    /// Starts `count` processes at the same moment (so their migrations race too) and waits until each answers.
    /// - Parameters:
    ///   - apps: more `apps[]` entries after the App Store app (a Google Play app), with the `files` they name.
    static func start(_ count: Int, on schema: TestPostgres.Schema, apps: [JSONValue] = [], files: [String: [UInt8]] = [:]) async throws -> KakinProcesses {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-procs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let appStore = try TestAppStore(nowMs: Int64(Date().timeIntervalSince1970 * 1000))
        try Data(appStore.rootDER).write(to: directory.appendingPathComponent("ca.der"))
        for (name, bytes) in files { try Data(bytes).write(to: directory.appendingPathComponent(name)) }
        let configJSON: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string(schema.url),
            "trustedRoots": ["ca.der"],
            "apps": .array([["bundleId": .string(TestAppStore.bundleId), "environments": ["Sandbox"], "products": [
                ["productId": "coins.100", "type": "consumable", "coins": 100, "price": 120, "currency": "JPY"],
            ]]] + apps),
        ]
        let config = directory.appendingPathComponent("kakin.json")
        try Data(configJSON.serialized(pretty: true)).write(to: config)
        let processes = KakinProcesses(directory: directory, config: config, appStore: appStore, schema: schema)
        let launched = try (0..<count).map { try processes.launch(index: $0) }
        for server in launched { processes.servers.append(try await processes.waitUntilListening(server)) }
        return processes
    }

    private func launch(index: Int) throws -> Server {
        let log = directory.appendingPathComponent("serve-\(index)-\(UUID().uuidString.prefix(4)).log")
        let child = try ChildProcess.spawn(try Self.binary.path, ["serve", "--config", config.path], output: log.path + ".out", errors: log.path)
        return Server(child: child, port: 0, log: log)
    }

    private func waitUntilListening(_ server: Server) async throws -> Server {
        var ready = server
        ready.port = try await Self.waitUntilListening(child: server.child, log: server.log)
        return ready
    }

    /// Waits until a `kakin serve` logs that it listens; answers its port (killed if it does not start in time).
    static func waitUntilListening(child: ChildProcess, log: URL) async throws -> Int {
        let deadline = Date().addingTimeInterval(startTimeoutSeconds)
        while Date() < deadline {
            let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
            for line in text.split(separator: "\n") where line.contains("kakin listening") {
                if let url = (try? JSONParser.parse(String(line)))?["http.url"]?.stringValue, let colon = url.lastIndex(of: ":"),
                   let port = Int(url[url.index(after: colon)...]) {
                    return port
                }
            }
            guard child.isRunning else {
                throw ProcessFailure(description: "kakin serve exited (\(await child.exit())): \(text.suffix(800))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        child.signal(SIGKILL)
        throw ProcessFailure(description: "kakin serve did not start within \(Int(startTimeoutSeconds)) s")
    }

    /// SIGKILL: no shutdown code runs; whatever the process had in flight is cut off.
    func kill(_ index: Int) async {
        servers[index].child.signal(SIGKILL)
        _ = await servers[index].child.exit()
    }

    /// SIGTERM to every process still running, then removes the files.
    func stop() async {
        for server in servers { server.child.signal(SIGTERM) }
        for server in servers { _ = await server.child.exit() }
        try? FileManager.default.removeItem(at: directory)
    }

    /// One request to process `index`.
    func request(_ index: Int, _ method: String, _ path: String, json: JSONValue? = nil, headers: [String: String] = [:]) async throws -> TestKakin.Response {
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(servers[index].port)" + path)!)
        req.httpMethod = method
        if let json {
            req.httpBody = Data(json.serialized())
            req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        for (k, v) in headers { req.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await TestKakin.session.data(for: req)
        let http = response as! HTTPURLResponse
        var hs: [String: String] = [:]
        for (k, v) in http.allHeaderFields { hs[String(describing: k).lowercased()] = String(describing: v) }
        return TestKakin.Response(status: http.statusCode, headers: hs, body: [UInt8](data))
    }

    /// `kakin ledger check --config …` on the shared database: its exit status and report.
    func ledgerCheck() async throws -> (status: Int32, report: JSONValue) {
        try await Self.run(["ledger", "check", "--config", config.path], in: directory)
    }

    /// Runs the kakin binary with `arguments` to its end: its exit status and standard output as JSON.
    static func run(_ arguments: [String], in directory: URL) async throws -> (status: Int32, report: JSONValue) {
        let output = directory.appendingPathComponent("run-\(UUID().uuidString.prefix(8)).json")
        let child = try ChildProcess.spawn(try binary.path, arguments, output: output.path)
        let status = await child.exit()
        let bytes = [UInt8]((try? Data(contentsOf: output)) ?? Data())
        try? FileManager.default.removeItem(at: output)
        return (status, (try? JSONParser.parse(bytes)) ?? .null)
    }

    /// Runs `body` with `count` processes on a fresh schema (more `apps` as in `start`), and always stops them.
    static func with(_ count: Int, apps: [JSONValue] = [], files: [String: [UInt8]] = [:], _ body: (KakinProcesses) async throws -> Void) async throws {
        try await TestPostgres.withSchema { schema in
            let processes = try await start(count, on: schema, apps: apps, files: files)
            do {
                try await body(processes)
            } catch {
                await processes.stop()
                throw error
            }
            await processes.stop()
        }
    }
}

struct ProcessFailure: Error, CustomStringConvertible {
    var description: String
}
