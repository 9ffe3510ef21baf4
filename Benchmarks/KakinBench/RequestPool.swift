import Dispatch
import Foundation
import KakinCore

/// Pre-signed requests for `Benchmarks/wrk/requests.lua`: lines `<path> <JSON body>`, spread over one
/// file per wrk thread (`PREFIX-0.lines`, `PREFIX-1.lines`, …), every request different (a new signed
/// transaction or notification each). Signing happens here, before the load, never during it.
struct RequestPool {
    let prefix: URL
    let count: Int
    let files: Int

    /// Writes `count` requests, `request(n)` being the n-th; signed on all cores.
    static func write(_ workspace: BenchWorkspace, name: String, count: Int, files: Int,
                      request: @escaping @Sendable (Int) throws -> (path: String, body: JSONValue)) throws -> RequestPool {
        let prefix = workspace.file(name)
        let failures = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: files) { file in
            do {
                var text = ""
                for n in stride(from: file, to: count, by: files) {
                    let (path, body) = try request(n)
                    precondition(!path.contains(" ") && !path.contains("\n"), "a pool line is <path> <body>")
                    text += path + " " + body.jsonString + "\n"
                }
                try text.write(to: URL(fileURLWithPath: "\(prefix.path)-\(file).lines"), atomically: false, encoding: .utf8)
            } catch {
                failures.append(contentsOf: ["\(error)"])
            }
        }
        if let failure = failures.all.first { throw SubprocessFailure(description: "writing the requests \(name): \(failure)") }
        return RequestPool(prefix: prefix, count: count, files: files)
    }

    /// `requests.lua`'s arguments: load seconds, this pool, the status a request should answer.
    func scriptArguments(loadSeconds: Int, expectedStatus: Int) -> [String] {
        ["\(loadSeconds)", prefix.path, "\(expectedStatus)"]
    }

    static func script(_ workspace: BenchWorkspace) -> URL {
        workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/requests.lua")
    }

    /// The files are large (a notification is ~9 KB): removed once sent.
    func remove() {
        for file in 0..<files { try? FileManager.default.removeItem(atPath: "\(prefix.path)-\(file).lines") }
    }
}

/// What `requests.lua` counted in one run.
struct PoolRun {
    var run: Wrk.Run
    /// Answers with the expected status.
    var ok: Int
    var other: Int
    /// How long the load lasted: `--seconds`, or less when a thread used its file up.
    var loadSeconds: Double

    init(_ run: Wrk.Run) throws {
        self.run = run
        ok = try run.count("ok")
        other = try run.count("other")
        loadSeconds = Double(max(1, try run.count("loadms"))) / 1000
    }

    /// Expected answers per second of load.
    var perSecond: Double { Double(ok) / loadSeconds }
}

extension KakinServerProcess {
    /// wrk sending `pool` at this server for `--seconds` (plus the time for the last answers).
    func send(_ pool: RequestPool, expectedStatus: Int, _ options: BenchOptions, _ workspace: BenchWorkspace) throws -> PoolRun {
        try PoolRun(Wrk.run(url: "http://127.0.0.1:\(port)", seconds: options.loadSeconds + Wrk.drainSeconds,
                            connections: options.connections, script: RequestPool.script(workspace),
                            scriptArguments: pool.scriptArguments(loadSeconds: options.loadSeconds, expectedStatus: expectedStatus),
                            workspace: workspace))
    }

    /// Customers bench-0 … bench-(count-1), created by reading them (`GET /v1/customers/{id}`, as an app does
    /// before its first purchase); their `appAccountToken`s, by number.
    func seedCustomers(_ count: Int) throws -> [String] {
        let tokens = Collected<(Int, String)>()
        let failures = Collected<String>()
        let port = port
        let workers = 4
        startThreads(workers) { worker in
            let connection = HTTPConnection(port: port)
            do {
                for n in stride(from: worker, to: count, by: workers) {
                    let answer = try connection.request("GET", "/v1/customers/bench-\(n)")
                    guard answer.status == 200, let token = answer.json["appAccountToken"]?.stringValue else {
                        throw SubprocessFailure(description: "reading customer bench-\(n): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
                    }
                    tokens.append(contentsOf: [(n, token)])
                }
            } catch {
                failures.append(contentsOf: ["\(error)"])
            }
        }.wait()
        if let failure = failures.all.first { throw SubprocessFailure(description: "seeding customers: \(failure)") }
        return tokens.all.sorted { $0.0 < $1.0 }.map(\.1)
    }

    /// The server's `/metrics` (Prometheus text): every unlabelled counter and labelled sample, by its full name
    /// (`kakin_notifications_applied_total`, `kakin_notification_inbox{state="received"}`).
    func metrics() throws -> [String: Double] {
        let text = String(decoding: try HTTPConnection(port: port).request("GET", "/metrics").body, as: UTF8.self)
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            values[String(line[..<space])] = value
        }
        return values
    }

    /// One counter from `/metrics`; throws when this build has none of that name.
    func counter(_ name: String) throws -> Int {
        guard let value = try metrics()[name] else { throw SubprocessFailure(description: "no \(name) in /metrics") }
        return Int(value)
    }
}
