import Foundation
import KakinCore
import Synchronization

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
