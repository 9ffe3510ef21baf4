import Foundation
import KakinCore
import Synchronization

/// How this process shares the background work with other Kakin processes on the same database: it
/// claims stored notifications in small batches under its own name, for `leaseMs` (a process that dies
/// holding a claim delays those notifications by at most that much), and takes turns on periodic jobs
/// through named leases. Counts its passes in progress (claiming, then applying), so `drainNotifications`
/// can wait for the worker's batch instead of finding nothing left to claim.
final class NotificationClaims: Sendable {
    /// This process's name in claims and leases: host, process id and a random suffix.
    let owner: String
    let leaseMs: Int64 = 60_000
    let batchMax = 50
    private let passes = Mutex(0)

    init() {
        // gethostname, not ProcessInfo.hostName (which may wait for a DNS lookup).
        var host = [CChar](repeating: 0, count: 256)
        _ = gethostname(&host, host.count - 1)
        let name = String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        owner = "\(name)/\(ProcessInfo.processInfo.processIdentifier)/\(suffix)"
    }

    /// Runs one pass of the worker (or of a drain), counted while it runs.
    func pass<T>(_ body: () async -> T) async -> T {
        passes.withLock { $0 += 1 }
        defer { passes.withLock { $0 -= 1 } }
        return await body()
    }

    /// Passes claiming or applying notifications right now.
    var inProgress: Int { passes.withLock { $0 } }
}
