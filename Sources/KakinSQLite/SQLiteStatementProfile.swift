internal import CSQLite
import Foundation
import Synchronization

/// Benchmarks only: the CPU each SQL statement costs, per statement text, for the budget (`kakin-bench budget`).
///
/// Switched on by `KAKIN_SQLITE_STATEMENT_PROFILE=FILE` in the environment of the process. Each connection then
/// installs SQLite's trace callbacks (`sqlite3_trace_v2`): at a statement's start (`SQLITE_TRACE_STMT`) and at its
/// end (`SQLITE_TRACE_PROFILE`: done, or reset after its last row was read) it reads its thread's CPU clock and the
/// monotonic clock, and it notes the thread its first statement ran on. SQLite's own profile time is wall clock with a millisecond tick on Linux, too coarse for
/// statements of microseconds. Rows read in between are counted with their statement. When the connection
/// closes its totals join the process's and `FILE` is rewritten: one line per statement text, "runs, CPU ns, wall
/// ns, connection (writer, reader, checkpointer), text", after a line with the cost of reading the CPU clock (included once in
/// every run's figures) and one per connection's thread ("thread", its id, the connection), whose CPU a benchmark reads in `/proc`.
///
/// Off (the default), nothing is installed: the statement path is the same as without this file.
final class SQLiteStatementProfile {
    /// `KAKIN_SQLITE_STATEMENT_PROFILE`, read once.
    static let environmentFile: String? = ProcessInfo.processInfo.environment["KAKIN_SQLITE_STATEMENT_PROFILE"]

    /// What every connection of the process measured, by connection role and statement text; rewritten to `file` at each close.
    private static let process = Mutex((statements: [SQLiteStatementKey: SQLiteStatementTotals](), threads: [pid_t: String]()))

    private final class Running {
        let text: UnsafePointer<CChar>
        let sql: String
        var totals = SQLiteStatementTotals()
        var startCPUNs: Int64 = -1
        var startWallNs: Int64 = 0

        init(text: UnsafePointer<CChar>) {
            self.text = text
            sql = String(cString: text).split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
        }
    }

    private let file: String
    private let db: OpaquePointer
    private let connection: String
    /// The thread of the first statement (or of the close, without one): the connection's own, as profiles start after
    /// a connection's settings and the engine's threads close their connections. -1 for a connection lent to short reads,
    /// which runs on its borrowers' threads: none is its own.
    private var thread: pid_t
    /// By prepared statement; a statement finalized and another prepared at its address is told apart by its text.
    private var statements: [OpaquePointer: Running] = [:]
    private var finished: [Running] = []

    /// Installs the trace callbacks on `db`; the connection keeps the profile alive until it closes.
    init(file: String, db: OpaquePointer, connection: String, hasThread: Bool) {
        thread = hasThread ? 0 : -1
        self.file = file
        self.db = db
        self.connection = connection
        sqlite3_trace_v2(db, UInt32(SQLITE_TRACE_STMT | SQLITE_TRACE_PROFILE), { event, context, statement, text in
            guard let context, let statement else { return 0 }
            let profile = Unmanaged<SQLiteStatementProfile>.fromOpaque(context).takeUnretainedValue()
            if event == UInt32(SQLITE_TRACE_STMT) {
                profile.started(OpaquePointer(statement), text: text?.assumingMemoryBound(to: CChar.self))
            } else {
                profile.ended(OpaquePointer(statement))
            }
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private func started(_ statement: OpaquePointer, text: UnsafePointer<CChar>?) {
        // A trigger's program announces itself with an SQL comment while its statement runs: not a new start.
        guard let text, !(text[0] == 0x2D && text[1] == 0x2D) else { return }
        if thread == 0 { thread = Self.threadID() }
        let running: Running
        if let known = statements[statement], known.text == text {
            running = known
        } else {
            if let replaced = statements[statement] { finished.append(replaced) }
            running = Running(text: text)
            statements[statement] = running
        }
        running.startWallNs = Self.now(CLOCK_MONOTONIC)
        running.startCPUNs = Self.now(CLOCK_THREAD_CPUTIME_ID)
    }

    private func ended(_ statement: OpaquePointer) {
        let cpu = Self.now(CLOCK_THREAD_CPUTIME_ID), wall = Self.now(CLOCK_MONOTONIC)
        guard let running = statements[statement], running.startCPUNs >= 0 else { return }
        running.totals.runs += 1
        running.totals.cpuNs += cpu - running.startCPUNs
        running.totals.wallNs += wall - running.startWallNs
        running.startCPUNs = -1
    }

    /// Adds this connection's totals to the process's and rewrites the file. Called once, before the connection finalizes its statements.
    func close() {
        sqlite3_trace_v2(db, 0, nil, nil)  // finalizing statements would call back
        if thread == 0 { thread = Self.threadID() }  // the checkpointer runs no statements, and closes on its thread
        let mine = finished + statements.values
        let clockNs = Self.clockReadingNs()
        Self.process.withLock { all in
            for running in mine where running.totals.runs > 0 {
                all.statements[SQLiteStatementKey(connection: connection, sql: running.sql), default: SQLiteStatementTotals()].add(running.totals)
            }
            if thread > 0 { all.threads[thread] = connection }
            let lines = ["clock reading ns\t\(clockNs)"] + all.threads.sorted { $0.key < $1.key }.map { "thread\t\($0.key)\t\($0.value)" }
                + all.statements.sorted { $0.value.cpuNs > $1.value.cpuNs }.map {
                    "\($0.value.runs)\t\($0.value.cpuNs)\t\($0.value.wallNs)\t\($0.key.connection)\t\($0.key.sql)"
                }
            // Under the lock: a connection closing meanwhile must not write an older total over this one.
            try? (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        }
    }

    /// The calling thread's id (Linux: `/proc/thread-self` links to `PID/task/TID`; Glibc's `gettid` is not imported).
    private static func threadID() -> pid_t {
        var link = [CChar](repeating: 0, count: 64)
        let count = readlink("/proc/thread-self", &link, link.count - 1)
        guard count > 0 else { return -1 }
        return pid_t(String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self).split(separator: "/").last ?? "") ?? -1
    }

    private static func now(_ clock: clockid_t) -> Int64 {
        var time = timespec()
        clock_gettime(clock, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// The thread CPU clock read twice with nothing in between (a system call each): the median of 1,001.
    private static func clockReadingNs() -> Int64 {
        let samples = (0...1_000).map { _ in -now(CLOCK_THREAD_CPUTIME_ID) + now(CLOCK_THREAD_CPUTIME_ID) }.sorted()
        return samples[samples.count / 2]
    }
}

extension SQLiteHandle.Role {
    /// The connection's name in a profile's file.
    var name: String {
        switch self {
        case .writer: "writer"
        case .reader: "reader"
        case .checkpointer: "checkpointer"
        }
    }
}

/// A statement text and the role of the connections that ran it (writer, reader, checkpointer).
public struct SQLiteStatementKey: Hashable, Sendable {
    public var connection: String
    public var sql: String

    public init(connection: String, sql: String) {
        self.connection = connection
        self.sql = sql
    }
}

/// One statement text's runs and their cost in `SQLiteStatementProfile`'s file.
public struct SQLiteStatementTotals: Sendable, Equatable {
    public var runs: Int64 = 0
    public var cpuNs: Int64 = 0
    public var wallNs: Int64 = 0

    public init(runs: Int64 = 0, cpuNs: Int64 = 0, wallNs: Int64 = 0) {
        self.runs = runs
        self.cpuNs = cpuNs
        self.wallNs = wallNs
    }

    public mutating func add(_ other: SQLiteStatementTotals) {
        runs += other.runs
        cpuNs += other.cpuNs
        wallNs += other.wallNs
    }

    /// A profile file: the clock reading's cost, the connections' threads (id → writer, reader…) and the totals by
    /// statement text (empty when it is missing or unreadable).
    public static func read(file: String)
        -> (clockReadingNs: Int64, threads: [Int: String], statements: [SQLiteStatementKey: SQLiteStatementTotals]) {
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { return (0, [:], [:]) }
        var clockNs: Int64 = 0
        var threads: [Int: String] = [:]
        var statements: [SQLiteStatementKey: SQLiteStatementTotals] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: "\t", maxSplits: 4, omittingEmptySubsequences: false)
            if fields.count == 2, fields[0] == "clock reading ns" { clockNs = Int64(fields[1]) ?? 0; continue }
            if fields.count == 3, fields[0] == "thread", let id = Int(fields[1]) { threads[id] = String(fields[2]); continue }
            guard fields.count == 5, let runs = Int64(fields[0]), let cpu = Int64(fields[1]), let wall = Int64(fields[2]) else { continue }
            statements[SQLiteStatementKey(connection: String(fields[3]), sql: String(fields[4]))] = SQLiteStatementTotals(runs: runs, cpuNs: cpu, wallNs: wall)
        }
        return (clockNs, threads, statements)
    }
}
