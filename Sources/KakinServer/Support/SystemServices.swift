import AppStoreSimulator
import Foundation
import KakinCore
import Synchronization

/// The real clock (the simulator's `WallClock`). Local mode uses the simulator's clock instead, so
/// statuses follow simulated time.
public typealias SystemClock = WallClock

/// Random identifiers: UUIDs for app account tokens, and prefixed ids that sort by creation time
/// (`sp_…`, `le_…`) so support can read them in order.
public struct RandomIDGenerator: IDGenerator {
    static let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)
    let clock: any Clock
    /// Prefixed ids must never repeat, not be secret: drawn from a generator seeded once by the system's,
    /// so minting one makes no system call (two `getrandom` calls per grant before).
    private let draws = Draws()

    final class Draws: Sendable {
        private let random: Mutex<SeededRandom>

        init() {
            var system = SystemRandomNumberGenerator()
            random = Mutex(SeededRandom(seed: system.next()))
        }

        func next() -> (UInt64, UInt64) {
            random.withLock { ($0.next(), $0.next()) }
        }
    }

    public init(clock: any Clock = SystemClock()) { self.clock = clock }

    public func uuid() -> String { UUID().uuidString.lowercased() }

    public func id(prefix: String) -> String {
        var out = Array(prefix.utf8)
        var t = UInt64(max(0, clock.nowMs()))
        var stamp: [UInt8] = []
        for _ in 0..<9 {
            stamp.append(Self.alphabet[Int(t % 36)])
            t /= 36
        }
        out.append(contentsOf: stamp.reversed())
        // 12 base-36 characters from two 64-bit draws.
        let (first, second) = draws.next()
        for var word in [first, second] {
            for _ in 0..<6 {
                out.append(Self.alphabet[Int(word % 36)])
                word /= 36
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Structured logs: one JSON object per line on standard error, with dotted metadata keys.
/// Never logs tokens, keys or whole JWS.
public final class Logger: Sendable {
    public enum Level: String, Sendable, Comparable {
        case debug, info, warning, error
        var rank: Int { [.debug: 0, .info: 1, .warning: 2, .error: 3][self]! }
        public static func < (a: Level, b: Level) -> Bool { a.rank < b.rank }
    }

    let minimum: Level
    let lock = Mutex(())

    public init(minimum: Level = .info) { self.minimum = minimum }

    public func log(_ level: Level, _ message: String, _ metadata: [String: JSONValue] = [:]) {
        guard level >= minimum else { return }
        var o = metadata
        o["ts"] = .string(Timestamp.rfc3339(SystemClock().nowMs()))
        o["level"] = .string(level.rawValue)
        o["msg"] = .string(message)
        var line = JSONValue.object(o).serialized()
        line.append(0x0A)
        lock.withLock { _ in
            line.withUnsafeBufferPointer { p in _ = write(STDERR_FILENO, p.baseAddress, p.count) }
        }
    }

    public func info(_ m: String, _ md: [String: JSONValue] = [:]) { log(.info, m, md) }
    public func warning(_ m: String, _ md: [String: JSONValue] = [:]) { log(.warning, m, md) }
    public func error(_ m: String, _ md: [String: JSONValue] = [:]) { log(.error, m, md) }
}
