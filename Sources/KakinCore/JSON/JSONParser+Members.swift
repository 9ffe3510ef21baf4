/// The keys a typed payload reads (`TransactionPayload.Key`, …), each case named as its JSON key: the slots
/// `JSONParser.members` fills are indexed by `rawValue`, 0 up.
protocol PayloadKey: RawRepresentable<Int>, CaseIterable {
    /// Declared `PayloadKeyNames(allCases.map { "\($0)" })`: the case names are the keys.
    static var names: PayloadKeyNames { get }
}

/// The JSON key of each case of a `PayloadKey`, by `rawValue`, and their UTF-8 as a scan compares keys with them.
struct PayloadKeyNames: Sendable {
    let strings: [String]
    let utf8: [[UInt8]]

    init(_ strings: [String]) {
        precondition(strings.count <= UInt64.bitWidth && Set(strings).count == strings.count, "at most 64 keys, each once")
        self.strings = strings
        utf8 = strings.map { Array($0.utf8) }
    }

    var count: Int { strings.count }
    subscript(index: Int) -> String { strings[index] }

    /// The index of the key whose UTF-8 is `key`.
    func index(of key: UnsafeBufferPointer<UInt8>) -> Int? {
        for (n, name) in utf8.enumerated() where name.count == key.count {
            if name.withUnsafeBufferPointer({ $0.elementsEqual(key) }) { return n }
        }
        return nil
    }
}

extension JSONParser {
    /// The members of the JSON object in `buf` whose keys are `Key`'s, by `Key.rawValue`, without building the object:
    /// a stored payload's fields read straight into typed slots (`StoredStatusFields`). Accepts exactly the documents
    /// `parse` accepts that are objects (nil for the rest): every other member's value is parsed and dropped, a key
    /// twice is refused, keys compare as the parser's dictionary compares them (escapes decoded, `String` equality).
    static func members<Key: PayloadKey>(_ buf: UnsafeBufferPointer<UInt8>, _: Key.Type, depthMax: Int = depthMaxDefault) -> [JSONValue?]? {
        var p = Cursor(buf: buf, depthMax: depthMax)
        p.skipSpace()
        // Anything but an object is either refused by `parse` or not a payload: nil both ways.
        guard p.i < buf.count, buf[p.i] == UInt8(ascii: "{"), depthMax >= 1 else { return nil }
        p.i += 1
        var slots = [JSONValue?](repeating: nil, count: Key.names.count)
        var seen: UInt64 = 0
        var others: [String] = []
        do throws(JSONParseError) {
            p.skipSpace()
            if p.i < buf.count, buf[p.i] == UInt8(ascii: "}") {
                p.i += 1
            } else {
                while true {
                    p.skipSpace()
                    guard p.i < buf.count, buf[p.i] == UInt8(ascii: "\"") else { return nil }
                    let key = try p.memberKey(Key.names)
                    p.skipSpace()
                    guard p.i < buf.count, buf[p.i] == UInt8(ascii: ":") else { return nil }
                    p.i += 1
                    p.skipSpace()
                    let value = try p.parseValue(depth: 1)
                    switch key {
                    case .known(let slot):
                        if seen & (1 << slot) != 0 { return nil }
                        seen |= 1 << slot
                        slots[slot] = value
                    case .other(let name):
                        if others.contains(name) { return nil }
                        others.append(name)
                    }
                    p.skipSpace()
                    guard p.i < buf.count else { return nil }
                    if buf[p.i] == UInt8(ascii: ",") { p.i += 1; continue }
                    if buf[p.i] == UInt8(ascii: "}") { p.i += 1; break }
                    return nil
                }
            }
        } catch {
            return nil
        }
        p.skipSpace()
        return p.i == buf.count ? slots : nil
    }
}

extension JSONParser.Cursor {
    enum MemberKey {
        /// The index of the key in the names looked for.
        case known(Int)
        case other(String)
    }

    /// Reads the key whose opening quote is at `i`. A plain ASCII key (no escape: every key Kakin and Apple write) is
    /// compared in place; any other goes through `parseString`, so that it compares as a parsed key would.
    mutating func memberKey(_ names: PayloadKeyNames) throws(JSONParseError) -> MemberKey {
        let start = i + 1
        var end = start
        while end < buf.count, buf[end] >= 0x20, buf[end] < 0x80, buf[end] != UInt8(ascii: "\""), buf[end] != UInt8(ascii: "\\") {
            end += 1
        }
        if end < buf.count, buf[end] == UInt8(ascii: "\"") {
            let key = UnsafeBufferPointer(rebasing: buf[start..<end])
            i = end + 1
            return names.index(of: key).map(MemberKey.known) ?? .other(String(decoding: key, as: UTF8.self))
        }
        let key = try parseString()
        return names.strings.firstIndex(of: key).map(MemberKey.known) ?? .other(key)
    }
}
