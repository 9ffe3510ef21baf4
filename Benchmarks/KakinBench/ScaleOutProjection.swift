import Foundation
import KakinPostgreSQL

#if canImport(Glibc)
    import Glibc
#endif

/// The PostgreSQL server's own CPU time, read from `/proc` when it runs on this machine: its postmaster (found through
/// `data_directory`'s `postmaster.pid`) and every process it started, including the ones that ended (the postmaster's
/// children's time, `cutime` + `cstime`). Other clusters on the machine (other runs' tests) are not counted.
struct PostgresServerCPU {
    let postmasterPid: Int32

    /// nil when the server is not on this machine or its files cannot be read (a remote or managed server).
    static func locate(url: String) throws -> PostgresServerCPU? {
        let directory: String? = try blocking {
            let database = try PostgresDatabase(url: url, options: .init(writerConnections: 1, readerConnections: 1))
            do {
                let directory = try await database.read { try $0.queryOne("SELECT current_setting('data_directory') AS d", [])?.string("d") }
                await database.close()
                return directory
            } catch {
                await database.close()
                throw error
            }
        }
        guard let directory, let text = try? String(contentsOfFile: directory + "/postmaster.pid", encoding: .utf8),
              let first = text.split(separator: "\n").first, let pid = Int32(first), (try? Self.times(pid)) != nil else { return nil }
        return PostgresServerCPU(postmasterPid: pid)
    }

    /// User + system seconds of the postmaster, its children alive now, and its children that ended.
    var cpuSeconds: Double {
        get throws {
            let own = try Self.times(postmasterPid)
            var ticks = own.user + own.system + own.childrenUser + own.childrenSystem
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard let pid = Int32(entry), pid != postmasterPid, let t = try? Self.times(pid), t.parent == postmasterPid else { continue }
                ticks += t.user + t.system
            }
            return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
        }
    }

    /// Fields of `/proc/PID/stat` after the command's ")" (proc(5) numbers them from 1 with the pid; the first after ")" is
    /// field 3, the state): ppid is field 4, utime…cstime fields 14 to 17. (Field 5 is the process group: every backend
    /// has its own, so reading it as the parent counted no live backend and left only the reaped ones' `cutime`.)
    private static func times(_ pid: Int32) throws -> (parent: Int32, user: Double, system: Double, childrenUser: Double, childrenSystem: Double) {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        guard let close = stat.lastIndex(of: ")") else { throw SubprocessFailure(description: "unexpected /proc/\(pid)/stat") }
        let f = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Substring { f[number - 3] }
        guard f.count > 17 - 3, let parent = Int32(field(4)), let u = Double(field(14)), let s = Double(field(15)), let cu = Double(field(16)),
              let cs = Double(field(17)) else { throw SubprocessFailure(description: "unexpected /proc/\(pid)/stat") }
        return (parent, u, s, cu, cs)
    }
}

/// What N Kakin boxes in front of one PostgreSQL box would carry, from one path's CPU per request on each tier in this
/// run, and which tier saturates first. Each box has this machine's cores; each tier is taken as CPU-bound (its
/// requests spread over its cores), plus the database's WAL flushes: the commits the rate needs at this run's writes
/// per commit, against this run's durable single-row commits per second.
struct ScaleOutProjection {
    var path: String
    var kakinCPUPerRequest: Double
    var postgresCPUPerRequest: Double
    var writesPerCommit: Double?
    var singleRowCommitsPerSecond: Double?
    var coresPerBox = ProcessInfo.processInfo.activeProcessorCount

    static let boxCounts = [1, 2, 4, 8, 16]

    func lines() -> [String] {
        guard kakinCPUPerRequest > 0, postgresCPUPerRequest > 0 else {
            // Less than one clock tick over the whole run: too little to divide by.
            return [String(format: "%@: Kakin %.0f µs and PostgreSQL %.0f µs of CPU per request (this run): too little CPU was read for a projection",
                           path, kakinCPUPerRequest * 1e6, postgresCPUPerRequest * 1e6)]
        }
        let cores = Double(coresPerBox)
        let perKakinBox = cores / kakinCPUPerRequest
        let postgresBox = cores / postgresCPUPerRequest
        let flushes = writesPerCommit.flatMap { w in singleRowCommitsPerSecond.map { $0 * w } }
        var out = [String(format: "%@: Kakin %.0f µs and PostgreSQL %.0f µs of CPU per request (this run), boxes of %d cores: one Kakin box carries %@/s, "
                          + "the PostgreSQL box %@/s", path, kakinCPUPerRequest * 1e6, postgresCPUPerRequest * 1e6, coresPerBox,
                          BenchResult.grouped(Int(perKakinBox)), BenchResult.grouped(Int(postgresBox)))]
        if let flushes, let w = writesPerCommit, let c = singleRowCommitsPerSecond {
            out.append(String(format: "  its WAL at %.1f writes per commit and %@ flushes/s (single-row commits here): %@/s", w,
                              BenchResult.grouped(Int(c)), BenchResult.grouped(Int(flushes))))
        }
        for n in Self.boxCounts {
            let tiers = [("Kakin", Double(n) * perKakinBox), ("PostgreSQL CPU", postgresBox)] + (flushes.map { [("PostgreSQL WAL flushes", $0)] } ?? [])
            let limit = tiers.min { $0.1 < $1.1 }!
            out.append(String(format: "  %2d Kakin box%@ + 1 PostgreSQL box: %@/s, %@ saturates first (PostgreSQL CPU %.0f %% busy)", n, n == 1 ? "  " : "es",
                              BenchResult.grouped(Int(limit.1)), limit.0, min(100, limit.1 / postgresBox * 100)))
        }
        return out
    }
}
