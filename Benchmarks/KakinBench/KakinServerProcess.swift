import Foundation
import KakinCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A wrk run, the server CPU per answer and what the database did meanwhile (`KakinServerProcess.customerReads`).
typealias MeasuredRun = (run: Wrk.Run, cpuPerRequest: Double, work: DatabaseWork)

/// `kakin serve --config …` (or local mode): the real release binary as a child process, logging to its own file.
/// It binds an ephemeral port (the config says 0); the port is read from its "kakin listening" log line.
final class KakinServerProcess {
    static let startTimeoutSeconds = 30.0

    let process: Process
    let port: Int
    let log: URL

    private init(process: Process, port: Int, log: URL) {
        self.process = process
        self.port = port
        self.log = log
    }

    /// `environment`: variables added to this process's (the budget's statement profile).
    static func start(kakin: URL, config: URL, log: URL, environment: [String: String] = [:]) throws -> KakinServerProcess {
        try start(kakin: kakin, arguments: ["serve", "--config", config.path], log: log, environment: environment)
    }

    /// `kakin ARGUMENTS…` (a `serve` that logs "kakin listening"), e.g. local mode: `serve --port 0 --database sqlite:…`.
    static func start(kakin: URL, arguments: [String], log: URL, environment: [String: String] = [:]) throws -> KakinServerProcess {
        let process = Process()
        process.executableURL = kakin
        process.arguments = arguments
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        let logHandle = try Subprocess.newFile(log)
        process.standardOutput = logHandle
        process.standardError = logHandle
        process.standardInput = FileHandle.nullDevice
        try process.run()

        let deadline = Date().addingTimeInterval(startTimeoutSeconds)
        while Date() < deadline {
            if let port = listeningPort(in: log) {
                let server = KakinServerProcess(process: process, port: port, log: log)
                try server.waitUntilHealthy(deadline: deadline)
                return server
            }
            guard process.isRunning else {
                throw SubprocessFailure(description: "kakin serve exited (status \(process.terminationStatus)): \(Subprocess.tail(of: log))")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        sendSIGKILL(process)
        throw SubprocessFailure(description: "kakin serve did not start listening within \(Int(startTimeoutSeconds)) s: \(Subprocess.tail(of: log))")
    }

    /// The port in `{"msg": "kakin listening", "http.url": "http://127.0.0.1:PORT", …}`.
    private static func listeningPort(in log: URL) -> Int? {
        guard let text = try? String(contentsOf: log, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.contains("kakin listening") {
            guard let json = try? JSONParser.parse(String(line)), let url = json["http.url"]?.stringValue,
                  let colon = url.lastIndex(of: ":") else { continue }
            return Int(url[url.index(after: colon)...])
        }
        return nil
    }

    private func waitUntilHealthy(deadline: Date) throws {
        let connection = HTTPConnection(port: port, timeoutSeconds: 5)
        while Date() < deadline {
            if (try? connection.request("GET", "/healthz"))?.status == 200 { return }
            Thread.sleep(forTimeInterval: 0.02)
        }
        throw SubprocessFailure(description: "kakin serve on port \(port) never answered /healthz")
    }

    /// User + system CPU time the server has used so far (Linux: /proc/PID/stat), to tell what one request costs
    /// it apart from what wrk and the rest of the machine take.
    var cpuSeconds: Double {
        get throws {
            let stat = try String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)
            // pid (comm) state ppid … : utime and stime are the 12th and 13th fields after the ")".
            let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
            guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else {
                throw SubprocessFailure(description: "unexpected /proc/PID/stat: \(stat)")
            }
            return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
    }

    /// `body`'s result and the server CPU time used while it ran.
    func measuringCPU<T>(_ body: () throws -> T) throws -> (result: T, cpuSeconds: Double) {
        let before = try cpuSeconds
        let result = try body()
        return (result, try cpuSeconds - before)
    }

    /// A wrk run of `options`' length against `path` on this server (or, with `scriptArguments`, of
    /// `Benchmarks/wrk/customer-reads.lua` over the seeded customers), the server CPU time per answer, and what the
    /// database did meanwhile.
    func customerReads(_ path: String, _ scriptArguments: [String]?, _ options: BenchOptions,
                       _ workspace: BenchWorkspace) throws -> MeasuredRun {
        let script = workspace.packageRoot.appendingPathComponent("Benchmarks/wrk/customer-reads.lua")
        let ((run, cpuSeconds), work) = try measuringWork {
            try measuringCPU {
                try Wrk.run(url: "http://127.0.0.1:\(port)" + path, seconds: options.loadSeconds, connections: options.connections,
                            script: scriptArguments == nil ? nil : script, scriptArguments: scriptArguments ?? [], workspace: workspace)
            }
        }
        return (run, cpuSeconds / Double(max(1, run.requests)), work)
    }

    /// SIGKILL: no shutdown code runs, whatever was in flight is cut off. Nothing when it already exited.
    func kill() {
        if process.isRunning { sendSIGKILL(process) }
    }

    /// SIGTERM: the graceful shutdown `kakin serve` does on a deploy. Throws when it had already exited.
    func stop() throws {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            throw SubprocessFailure(description: "kakin serve did not stop cleanly (status \(process.terminationStatus)): \(Subprocess.tail(of: log))")
        }
    }
}

private func sendSIGKILL(_ process: Process) {
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
}
