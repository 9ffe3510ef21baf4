/// The keys a typed payload reads (`TransactionPayload.Key`, …), each case named as its JSON key: the slots
/// `JSONParser.members` fills are indexed by `rawValue`, 0 up.
protocol PayloadKey: RawRepresentable<Int>, CaseIterable {
    /// The JSON key of each case, by `rawValue` (declared `allCases.map { "\($0)" }`: the case names are the keys).
    static var names: [String] { get }
}

extension JSONParser {
    /// The members of the JSON object in `buf` whose keys are `Key`'s, by `Key.rawValue`, without building the object:
    /// a stored payload's fields read straight into typed slots (`StoredStatusFields`). Accepts exactly the documents
    /// `parse` accepts that are objects (nil for the rest): every other member's value is parsed and dropped, a key
    /// twice is refused, keys compare as the parser's dictionary compares them (escapes decoded, `String` equality).
    static func members<Key: PayloadKey>(_ buf: UnsafeBufferPointer<UInt8>, _: Key.Type, depthMax: Int = depthMaxDefault) -> [JSONValue?]? {
        precondition(Key.allCases.count == Key.names.count && Key.allCases.count <= UInt64.bitWidth, "one name per key, at most 64")
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
    mutating func memberKey(_ names: [String]) throws(JSONParseError) -> MemberKey {
        let start = i + 1
        var end = start
        while end < buf.count, buf[end] >= 0x20, buf[end] < 0x80, buf[end] != UInt8(ascii: "\""), buf[end] != UInt8(ascii: "\\") {
            end += 1
        }
        if end < buf.count, buf[end] == UInt8(ascii: "\"") {
            let key = UnsafeBufferPointer(rebasing: buf[start..<end])
            i = end + 1
            for (n, name) in names.enumerated() where name.utf8.count == key.count {
                if name.utf8.elementsEqual(key) { return .known(n) }
            }
            return .other(String(decoding: key, as: UTF8.self))
        }
        let key = try parseString()
        return names.firstIndex(of: key).map(MemberKey.known) ?? .other(key)
    }
}
