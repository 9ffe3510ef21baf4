import Foundation

/// wrk (HTTP load generator) runs and what they printed.
enum Wrk {
    /// How much longer than their load the writing scripts (grants.lua, notifications.lua) run wrk, so
    /// the answers to the last requests arrive before it stops.
    static let drainSeconds = 2

    struct Run {
        /// wrk's own "Requests/sec" (every answered request over the whole duration).
        var requestsPerSecond: Double
        /// Requests answered.
        var requests: Int
        var latencyP50Ms: Double
        var latencyP99Ms: Double
        var non2xx: Int
        /// connect + read + write + timeout errors.
        var socketErrors: Int
        /// `key=value` pairs a script's done() printed on a line starting with "kakin-bench".
        var scriptCounts: [String: Int]

        /// One of the script's counts; a script that printed none failed.
        func count(_ key: String) throws -> Int {
            guard let n = scriptCounts[key] else { throw SubprocessFailure(description: "the wrk script printed no \(key) count") }
            return n
        }
    }

    /// Runs wrk with `--latency` against `url` with one thread per core (at most one per connection).
    /// - Parameters:
    ///   - script: a Lua script in `Benchmarks/wrk/`, or nil for plain GETs of `url`.
    ///   - scriptArguments: what the script's init(args) receives.
    static func run(url: String, seconds: Int, connections: Int, script: URL?, scriptArguments: [String] = [],
                    workspace: BenchWorkspace, threads: Int? = nil, errorLog: String = "wrk.stderr") throws -> Run {
        let threads = threads ?? threadCount(connections: connections)
        var arguments = ["wrk", "-t", "\(threads)", "-c", "\(connections)", "-d", "\(seconds)s", "--timeout", "10s", "--latency"]
        if let script { arguments += ["-s", script.path] }
        arguments.append(url)
        if !scriptArguments.isEmpty { arguments += ["--"] + scriptArguments }
        let output = try Subprocess.run(arguments, errorLog: workspace.file(errorLog)).output
        return try parse(output)
    }

    /// One wrk per URL (one per Kakin process) at the same time, the connections and the cores' threads
    /// split between them, as a load balancer would spread the clients.
    /// - Parameter scriptArguments: each instance's script arguments, by its index.
    static func runTogether(urls: [String], seconds: Int, connections: Int, script: URL?, scriptArguments: (Int) -> [String],
                            workspace: BenchWorkspace) throws -> [Run] {
        let count = urls.count
        let threads = max(1, ProcessInfo.processInfo.activeProcessorCount / count)
        let results = Collected<(Int, Result<Run, any Error>)>()
        let arguments = (0..<count).map(scriptArguments)
        startThreads(count) { index in
            let run = Result {
                try Wrk.run(url: urls[index], seconds: seconds, connections: max(1, connections / count), script: script,
                            scriptArguments: arguments[index], workspace: workspace, threads: min(threads, max(1, connections / count)),
                            errorLog: "wrk-\(index).stderr")
            }
            results.append(contentsOf: [(index, run)])
        }.wait()
        return try results.all.sorted { $0.0 < $1.0 }.map { try $0.1.get() }
    }

    static func threadCount(connections: Int) -> Int { max(1, min(connections, ProcessInfo.processInfo.activeProcessorCount)) }

    static func parse(_ output: String) throws -> Run {
        var run = Run(requestsPerSecond: 0, requests: 0, latencyP50Ms: 0, latencyP99Ms: 0, non2xx: 0, socketErrors: 0, scriptCounts: [:])
        var sawRate = false
        for line in output.split(separator: "\n") {
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            guard let first = words.first else { continue }
            switch first {
            case "50%": run.latencyP50Ms = milliseconds(words.last!) ?? 0
            case "99%": run.latencyP99Ms = milliseconds(words.last!) ?? 0
            case "Requests/sec:":
                run.requestsPerSecond = Double(words.last!) ?? 0
                sawRate = true
            case "Non-2xx": run.non2xx = Int(words.last!) ?? 0
            case _ where words.count > 2 && words[1] == "requests" && words[2] == "in":  // 123456 requests in 10.00s, 12.34MB read
                run.requests = Int(first) ?? 0
            case "Socket":  // Socket errors: connect 0, read 0, write 0, timeout 0
                run.socketErrors = words.compactMap { Int($0.trimmingCharacters(in: [","])) }.reduce(0, +)
            case "kakin-bench":
                for pair in words.dropFirst() {
                    let parts = pair.split(separator: "=")
                    if parts.count == 2, let n = Int(parts[1]) { run.scriptCounts[String(parts[0])] = n }
                }
            default: continue
            }
        }
        guard sawRate else { throw SubprocessFailure(description: "wrk printed no Requests/sec: \(output)") }
        return run
    }

    /// "612.00us", "1.01ms", "2.00s" in milliseconds.
    static func milliseconds(_ text: Substring) -> Double? {
        for (suffix, scale) in [("us", 0.001), ("ms", 1.0), ("s", 1000.0)] where text.hasSuffix(suffix) {
            return Double(text.dropLast(suffix.count)).map { $0 * scale }
        }
        return nil
    }
}
