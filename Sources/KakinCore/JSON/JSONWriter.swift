/// Serialises `JSONValue` to UTF-8 with sorted keys, so equal values give byte-equal output
/// (stored idempotent replies are compared and replayed byte for byte).
extension JSONValue {
    public func serialized(pretty: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out, pretty: pretty, indent: 0)
        return out
    }

    public var jsonString: String { String(decoding: serialized(), as: UTF8.self) }

    /// `serialized()` appended to `out`, for a writer that puts values into a document of its own (an event's JSON).
    public func serialize(appendingTo out: inout [UInt8]) {
        write(into: &out, pretty: false, indent: 0)
    }

    public func prettyString() -> String { String(decoding: serialized(pretty: true), as: UTF8.self) }

    func write(into out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): out.append(contentsOf: String(i).utf8)
        case .double(let d):
            if !d.isFinite {
                out.append(contentsOf: "null".utf8)
            } else if d == d.rounded(), abs(d) < 1e15 {
                out.append(contentsOf: String(Int64(d)).utf8)
            } else {
                out.append(contentsOf: "\(d)".utf8)
            }
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let a):
            out.append(UInt8(ascii: "["))
            for (n, v) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                v.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty, !a.isEmpty { JSONValue.newline(&out, indent) }
            out.append(UInt8(ascii: "]"))
        case .object(let o):
            out.append(UInt8(ascii: "{"))
            // Sorted pairs, not sorted keys: no second hash lookup per key.
            for (n, member) in o.sorted(by: { $0.key < $1.key }).enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                JSONValue.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                if pretty { out.append(UInt8(ascii: " ")) }
                member.value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty, !o.isEmpty { JSONValue.newline(&out, indent) }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        for _ in 0..<indent { out.append(0x20); out.append(0x20) }
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): out.append(0x5C); out.append(c)
            case UInt8(ascii: "\\"): out.append(0x5C); out.append(c)
            case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hexDigits[Int(c >> 4)])
                out.append(hexDigits[Int(c & 0xF)])
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
