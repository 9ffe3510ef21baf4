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
        var s = s
        s.withUTF8 { utf8 in
            // Runs that need no escape (most strings are one) are appended whole, not byte by byte.
            var run = 0
            for (i, c) in utf8.enumerated() where c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
                run = i + 1
                switch c {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(0x5C); out.append(c)
                case 0x0A: out.append(0x5C); out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(0x5C); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(0x5C); out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(hexDigits[Int(c >> 4)])
                    out.append(hexDigits[Int(c & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Writes a JSON document straight to UTF-8 as its members are given, without building a `JSONValue` first: for
/// documents written on every request (a customer's status, `CustomerStatus.answerJSON`; each event, `Event.payload`). The bytes equal
/// `JSONValue.serialized()` of the same document when every object's members are given in ascending key order, the
/// order `serialized` sorts them to (a test of each writer compares the two).
public struct JSONBytesWriter {
    public private(set) var bytes: [UInt8]
    /// Whether the next member or element follows another (a comma first).
    private var follows = false

    public init(capacity: Int) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func object(_ members: (inout JSONBytesWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        follows = false
        members(&self)
        bytes.append(UInt8(ascii: "}"))
        follows = true
    }

    public mutating func array<Elements: Sequence>(_ elements: Elements, _ element: (inout JSONBytesWriter, Elements.Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for e in elements {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            follows = false
            element(&self, e)
        }
        bytes.append(UInt8(ascii: "]"))
        follows = true
    }

    /// A member's key; its value is written next.
    public mutating func key(_ name: String) {
        if follows { bytes.append(UInt8(ascii: ",")) }
        JSONValue.writeString(name, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
        follows = false
    }

    /// null for nil, as `JSONValue.string(_:)`.
    public mutating func string(_ s: String?) {
        if let s { JSONValue.writeString(s, into: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
        follows = true
    }

    public mutating func int(_ i: Int64?) {
        if let i { bytes.append(contentsOf: String(i).utf8) } else { bytes.append(contentsOf: "null".utf8) }
        follows = true
    }

    public mutating func bool(_ b: Bool) {
        bytes.append(contentsOf: (b ? "true" : "false").utf8)
        follows = true
    }

    /// An RFC 3339 timestamp, null for nil, as `Timestamp.rfc3339(_:)`.
    public mutating func timestamp(_ ms: Int64?) {
        if let ms {
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: Timestamp.rfc3339(ms).utf8)
            bytes.append(UInt8(ascii: "\""))
        } else {
            bytes.append(contentsOf: "null".utf8)
        }
        follows = true
    }

    /// A value given as a `JSONValue`, as `serialized()` writes it.
    public mutating func value(_ v: JSONValue) {
        v.write(into: &bytes, pretty: false, indent: 0)
        follows = true
    }

    /// A value already written as JSON (one part shared by several documents: an append's customer status).
    public mutating func raw(_ json: [UInt8]) {
        bytes.append(contentsOf: json)
        follows = true
    }

    public mutating func member(_ name: String, _ s: String?) { key(name); string(s) }
    public mutating func member(_ name: String, _ i: Int64?) { key(name); int(i) }
    public mutating func member(_ name: String, _ b: Bool) { key(name); bool(b) }
    public mutating func member(_ name: String, timestamp ms: Int64?) { key(name); timestamp(ms) }
}
