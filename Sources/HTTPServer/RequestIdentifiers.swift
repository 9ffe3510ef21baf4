import Synchronization

/// Hands out request IDs: "req_" + a per-process random prefix + a base-36 counter.
///
/// The counter makes IDs unique within the process; the prefix keeps IDs from different runs of
/// the server apart in logs. Up to 78 billion requests the ID fits in 15 bytes, which Swift stores
/// inline, so minting one allocates nothing.
enum RequestIdentifiers {
    private static let counter = Atomic<UInt64>(0)
    private static let processPrefix: String = {
        var generator = SystemRandomNumberGenerator()
        let value = generator.next(upperBound: UInt64(36 * 36 * 36 * 36))
        let digits = String(value, radix: 36)
        return "req_" + String(repeating: "0", count: 4 - digits.count) + digits
    }()

    /// A fresh serial number; also the request's key in the server's pending registry.
    static func nextSerial() -> UInt64 {
        counter.add(1, ordering: .relaxed).newValue
    }

    static func identifier(forSerial serial: UInt64) -> String {
        processPrefix + String(serial, radix: 36)
    }
}
