import KakinCore
import KakinService
import KakinStorage
import Synchronization

/// Errors answered by this process, on their way to the `recent_errors` table: recording one never waits for
/// the database (a bounded buffer, flushed in one write by a background loop and before every lookup), and
/// the table keeps the newest `rowsMax` errors of the last `keepForMs`.
public final class RecentErrorLog: Sendable {
    public static let keepForMs: Int64 = 30 * 86_400_000
    /// Pruning reads an index: at most this often.
    static let pruneEveryMs: Int64 = 60_000

    struct State {
        var buffer: [RecentError] = []
        var dropped: Int64 = 0
        var lastPruneMs: Int64 = .min
    }

    let state = Mutex(State())
    let records: SupportRecords
    let clock: any Clock

    public init(records: SupportRecords, clock: any Clock) {
        self.records = records
        self.clock = clock
    }

    /// Errors dropped because the buffer was full (the database was slower than the errors).
    public var droppedCount: Int64 { state.withLock { $0.dropped } }

    /// A fresh row key: 16 random base-36 characters (request IDs alone are unique per process only).
    public static func newKey() -> String {
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)
        var rng = SystemRandomNumberGenerator()
        var out: [UInt8] = Array("er_".utf8)
        for var word in [rng.next() as UInt64, rng.next() as UInt64] {
            for _ in 0..<8 {
                out.append(alphabet[Int(word % 36)])
                word /= 36
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public func record(_ error: RecentError) {
        state.withLock { s in
            if s.buffer.count < Self.bufferMax {
                s.buffer.append(error)
            } else {
                s.dropped += 1
            }
        }
    }

    /// Writes what is buffered (and prunes now and then). On a failed write the errors are put back once.
    public func flush() async throws(KakinError) {
        let now = clock.nowMs()
        let (batch, prune) = state.withLock { s -> ([RecentError], Bool) in
            defer { s.buffer = [] }
            let prune = s.lastPruneMs == .min || now - s.lastPruneMs >= Self.pruneEveryMs || now < s.lastPruneMs
            if prune { s.lastPruneMs = now }
            return (s.buffer, prune)
        }
        guard !batch.isEmpty || prune else { return }
        do {
            try await records.recordErrors(batch, keepMax: Self.rowsMax, keepForMs: Self.keepForMs, prune: prune)
        } catch {
            state.withLock { s in
                let room = max(0, Self.bufferMax - s.buffer.count)
                s.buffer.insert(contentsOf: batch.prefix(room), at: 0)
                s.dropped += Int64(batch.count - min(room, batch.count))
            }
            throw error
        }
    }
}
