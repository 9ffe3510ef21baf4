import Foundation

struct SubprocessFailure: Error, CustomStringConvertible {
    var description: String
}

/// Child processes run to completion (openssl, wrk, python, `kakin verify`, `kakin ledger check`).
enum Subprocess {
    struct Finished {
        /// Standard output, unless it was sent to a file.
        var output: String
        var exitStatus: Int32
        /// Wall-clock time from start to exit.
        var seconds: Double
        /// User + system CPU time the program used (all its threads); right only when no other child
        /// of this process ends meanwhile, as the benchmarks arrange.
        var cpuSeconds: Double
    }

    enum Output {
        /// Returned as `Finished.output`.
        case captured
        case file(URL)
        /// /dev/null.
        case discarded
    }

    /// Runs `arguments` (the program is looked up in PATH unless it is a path) and waits for it.
    /// - Parameters:
    ///   - input: a file for standard input (default: none).
    ///   - output: where standard output goes.
    ///   - errorLog: where standard error goes; its tail is quoted when the program fails.
    ///   - allowedExitStatuses: exit statuses that are not a failure.
    static func run(_ arguments: [String], input: URL? = nil, output: Output = .captured, errorLog: URL,
                    allowedExitStatuses: Set<Int32> = [0]) throws -> Finished {
        let process = Process()
        if arguments[0].contains("/") {
            process.executableURL = URL(fileURLWithPath: arguments[0])
            process.arguments = Array(arguments.dropFirst())
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = arguments
        }
        if let input { process.standardInput = try FileHandle(forReadingFrom: input) } else { process.standardInput = FileHandle.nullDevice }
        process.standardError = try newFile(errorLog)
        let pipe = Pipe()
        switch output {
        case .captured:
            process.standardOutput = pipe
        case .file(let file):
            process.standardOutput = try newFile(file)
        case .discarded:
            process.standardOutput = FileHandle.nullDevice
        }
        let cpuBefore = childrenCPUSeconds()
        let clock = ContinuousClock()
        let start = clock.now
        try process.run()
        var captured = Data()
        if case .captured = output { captured = pipe.fileHandleForReading.readDataToEndOfFile() }
        process.waitUntilExit()
        let seconds = start.duration(to: clock.now) / .seconds(1)
        guard process.terminationReason == .exit, allowedExitStatuses.contains(process.terminationStatus) else {
            throw SubprocessFailure(description: "\(arguments.prefix(3).joined(separator: " ")) … failed (status \(process.terminationStatus)): \(tail(of: errorLog))")
        }
        return Finished(output: String(decoding: captured, as: UTF8.self), exitStatus: process.terminationStatus, seconds: seconds,
                        cpuSeconds: childrenCPUSeconds() - cpuBefore)
    }

    /// An empty file at `url` (truncating one that exists), open for writing.
    static func newFile(_ url: URL) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: url.path, contents: nil) else {
            throw SubprocessFailure(description: "cannot create \(url.path)")
        }
        return try FileHandle(forWritingTo: url)
    }

    /// CPU time used by this process's children that have ended and been waited for.
    static func childrenCPUSeconds() -> Double {
        var usage = rusage()
        #if canImport(Glibc)
            getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        #else
            getrusage(RUSAGE_CHILDREN, &usage)
        #endif
        func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The last lines of a log file, for error messages.
    static func tail(of file: URL, lines: Int = 5) -> String {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(lines).joined(separator: " | ")
    }
}
