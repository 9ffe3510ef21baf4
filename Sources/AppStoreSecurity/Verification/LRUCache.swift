#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A small bounded least-recently-used map. Not synchronised: the owner keeps it behind a `Mutex`.
/// Eviction scans for the oldest entry, which is cheap at the sizes used here (tens of entries) and
/// happens only when a new entry is added to a full cache.
struct LRUCache<Key: Hashable, Value> {
    let entriesMax: Int
    private var entries: [Key: Entry] = [:]
    private var tick: UInt64 = 0

    private struct Entry {
        var value: Value
        var lastUse: UInt64
    }

    init(entriesMax: Int) {
        precondition(entriesMax >= 0)
        self.entriesMax = entriesMax
        entries.reserveCapacity(entriesMax + 1)
    }

    var count: Int { entries.count }

    mutating func value(for key: Key) -> Value? {
        guard let index = entries.index(forKey: key) else { return nil }
        tick &+= 1
        entries.values[index].lastUse = tick
        return entries.values[index].value
    }

    mutating func insert(_ value: Value, for key: Key) {
        guard entriesMax > 0 else { return }
        tick &+= 1
        entries[key] = Entry(value: value, lastUse: tick)
        if entries.count > entriesMax, let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
            entries.removeValue(forKey: oldest.key)
        }
    }
}

/// Bytes as a dictionary key, hashed once at creation (outside any lock) and compared with memcmp.
struct ByteKey: Hashable, Sendable {
    let bytes: [UInt8]
    private let hash: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        var hasher = Hasher()
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
        hash = hasher.finalize()
    }

    init(_ buffer: UnsafeRawBufferPointer) { self.init(Array(buffer)) }

    func hash(into hasher: inout Hasher) { hasher.combine(hash) }

    static func == (a: ByteKey, b: ByteKey) -> Bool {
        a.hash == b.hash && b.bytes.withUnsafeBytes { a.equals($0) }
    }

    /// Whether these are the key's bytes (no hash needed).
    func equals(_ other: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count == other.count else { return false }
        return bytes.withUnsafeBytes { x in x.count == 0 || memcmp(x.baseAddress!, other.baseAddress!, x.count) == 0 }
    }
}
