import KakinCore
import Synchronization

/// The world's one source of randomness: SplitMix64 (Steele, Lea, Flood 2014), seeded once. Every choice the
/// simulation makes (who acts, what they do, which fault strikes) comes from here in a fixed order, so a seed
/// replays bit for bit. Never `SystemRandomNumberGenerator`.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 0 ..< n (n > 0).
    public mutating func below(_ n: Int) -> Int {
        precondition(n > 0, "below needs a positive bound")
        return Int(next() % UInt64(n))
    }

    /// True with probability `p` (0...1), in millionths.
    public mutating func chance(_ p: Double) -> Bool {
        Double(next() % 1_000_000) < p * 1_000_000
    }

    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }
}

/// Kakin's `IDGenerator` on a seeded generator of its own (ids never disturb the world's choices). Calls come one
/// at a time from the world's single sequence of steps, so the same seed gives the same ids.
public final class SeededIDGenerator: IDGenerator, Sendable {
    // Only one step runs at a time; the lock guards against the store's writer thread calling from its own thread.
    let rng: Mutex<SplitMix64>

    public init(seed: UInt64) { rng = Mutex(SplitMix64(seed: seed ^ 0x6B61_6B69_6E49_4453)) }

    public func uuid() -> String {
        let (a, b) = rng.withLock { r in (r.next(), r.next()) }
        let hex = Self.hex(a) + Self.hex(b)
        let c = Array(hex)
        // Version 4 / variant 1 bits, as a random UUID has them.
        var chars = c
        chars[12] = "4"
        chars[16] = ["8", "9", "a", "b"][Int(a % 4)]
        let s = String(chars)
        let i = s.startIndex
        func part(_ from: Int, _ to: Int) -> Substring { s[s.index(i, offsetBy: from)..<s.index(i, offsetBy: to)] }
        return "\(part(0, 8))-\(part(8, 12))-\(part(12, 16))-\(part(16, 20))-\(part(20, 32))"
    }

    public func id(prefix: String) -> String {
        let (a, b) = rng.withLock { r in (r.next(), r.next()) }
        return prefix + Self.hex(a) + Self.hex(b).prefix(8)
    }

    static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}

/// 64-bit FNV-1a, twice with different bases: the printed 128-bit digest of the trace.
public struct TraceDigest: Sendable {
    var a: UInt64 = 0xcbf2_9ce4_8422_2325
    var b: UInt64 = 0x8422_2325_cbf2_9ce4
    public private(set) var lines = 0

    public init() {}

    public mutating func add(_ line: String) {
        for byte in line.utf8 {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 &+ 1
        }
        a = (a ^ 0x0A) &* 0x0000_0100_0000_01B3
        b = (b ^ 0x0A) &* 0x0000_0100_0000_01B3 &+ 1
        lines += 1
    }

    public var hex: String { SeededIDGenerator.hex(a) + SeededIDGenerator.hex(b) }
}
