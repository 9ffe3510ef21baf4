import KakinCore

/// Every id the simulated App Store hands out, from counters and one seeded generator: the same seed and
/// the same requests give the same ids, so a saved scenario replays byte for byte. Counters start at an
/// offset derived from the seed, so two simulator runs (two seeds) feeding one Kakin database don't collide.
struct SimulatorIDs: Codable, Sendable, Equatable {
    var rngState: UInt64
    var nextTransaction: Int64
    var nextWebOrderLineItem: Int64
    var nextAppTransaction: Int64

    init(seed: UInt64, environment: AppStoreEnvironment) {
        // Apple's sandbox ids look like 2000000320391970, production ones start lower; both are decimal strings.
        let base: Int64 = environment == .production ? 1_000_000_000_000_000 : 2_000_000_000_000_000
        let offset = Int64(seed % 999_983) * 1_000_000_000
        rngState = seed ^ 0x6B61_6B69_6E00_0003
        nextTransaction = base + offset + 1
        nextWebOrderLineItem = base + offset + 500_000_001
        nextAppTransaction = 704_000_000_000_000_000 + offset + 1
    }

    enum CodingKeys: String, CodingKey { case rngState, nextTransaction, nextWebOrderLineItem, nextAppTransaction }

    /// The generator state is written as a string: all 64 bits must survive JSON readers that use doubles.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        guard let state = UInt64(try c.decode(String.self, forKey: .rngState)) else {
            throw DecodingError.dataCorruptedError(forKey: .rngState, in: c, debugDescription: "not a 64-bit number")
        }
        rngState = state
        nextTransaction = try c.decode(Int64.self, forKey: .nextTransaction)
        nextWebOrderLineItem = try c.decode(Int64.self, forKey: .nextWebOrderLineItem)
        nextAppTransaction = try c.decode(Int64.self, forKey: .nextAppTransaction)
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(String(rngState), forKey: .rngState)
        try c.encode(nextTransaction, forKey: .nextTransaction)
        try c.encode(nextWebOrderLineItem, forKey: .nextWebOrderLineItem)
        try c.encode(nextAppTransaction, forKey: .nextAppTransaction)
    }

    mutating func transactionId() -> String {
        defer { nextTransaction += 1 }
        return String(nextTransaction)
    }

    mutating func webOrderLineItemId() -> String {
        defer { nextWebOrderLineItem += 1 }
        return String(nextWebOrderLineItem)
    }

    mutating func appTransactionId() -> String {
        defer { nextAppTransaction += 1 }
        return String(nextAppTransaction)
    }

    /// The next seeded value (`SeededRandom`'s SplitMix64 over the stored state).
    mutating func next() -> UInt64 {
        var generator = SeededRandom(seed: rngState)
        defer { rngState = generator.state }
        return generator.next()
    }

    /// A lowercase version-4 UUID, as Apple writes `notificationUUID`.
    mutating func uuid() -> String {
        let a = next(), b = next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<8 {
            bytes[i] = UInt8(truncatingIfNeeded: a >> (8 * UInt64(i)))
            bytes[8 + i] = UInt8(truncatingIfNeeded: b >> (8 * UInt64(i)))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Array("0123456789abcdef")
        var s = ""
        for (i, byte) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { s.append("-") }
            s.append(hex[Int(byte >> 4)])
            s.append(hex[Int(byte & 0xF)])
        }
        return s
    }

    /// An order id like the one on Apple's emailed receipt (`MK5TTTVWJH`): ten letters and digits.
    mutating func orderId() -> String {
        let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789")
        var v = next()
        var s = ""
        for _ in 0..<10 {
            s.append(alphabet[Int(v % UInt64(alphabet.count))])
            v /= UInt64(alphabet.count)
        }
        return s
    }
}
