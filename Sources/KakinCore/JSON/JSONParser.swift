/// A strict RFC 8259 parser with a nesting limit. Written by hand because every request body and every
/// JWS payload passes through it: it must be fast, bounded, and never crash on hostile input.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var offset: Int
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

public enum JSONParser {
    public static let depthMaxDefault = 64

    public static func parse(_ bytes: [UInt8], depthMax: Int = depthMaxDefault) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buf throws(JSONParseError) in try parse(buf, depthMax: depthMax) }
    }

    /// Parses the string's own UTF-8 in place (no copy into an array first: a status read parses a few of these).
    public static func parse(_ text: String, depthMax: Int = depthMaxDefault) throws(JSONParseError) -> JSONValue {
        var text = text
        // `withUTF8` rethrows untyped errors: the typed one travels in a Result.
        return try text.withUTF8 { buf in Result { () throws(JSONParseError) in try parse(buf, depthMax: depthMax) } }.get()
    }

    static func parse(_ buf: UnsafeBufferPointer<UInt8>, depthMax: Int) throws(JSONParseError) -> JSONValue {
        var p = Cursor(buf: buf, depthMax: depthMax)
        p.skipSpace()
        let value = try p.parseValue(depth: 0)
        p.skipSpace()
        if p.i != buf.count { throw p.fail("unexpected data after the document") }
        return value
    }

    /// The UTF-8 text of `bytes`, nil if invalid. ASCII, nearly every JSON string, needs no validation, and
    /// `String(validating:as:)` is an unspecialized generic call costing several times the scan.
    static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        for byte in bytes where byte >= 0x80 { return String(validating: bytes, as: UTF8.self) }
        return String(decoding: bytes, as: UTF8.self)
    }

    struct Cursor {
        let buf: UnsafeBufferPointer<UInt8>
        let depthMax: Int
        var i = 0

        init(buf: UnsafeBufferPointer<UInt8>, depthMax: Int) {
            self.buf = buf
            self.depthMax = depthMax
        }

        func fail(_ reason: String) -> JSONParseError { JSONParseError(offset: i, reason: reason) }

        mutating func skipSpace() {
            while i < buf.count {
                switch buf[i] {
                case 0x20, 0x0A, 0x0D, 0x09: i += 1
                default: return
                }
            }
        }

        mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
            guard i < buf.count else { throw fail("unexpected end") }
            switch buf[i] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
            case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(JSONParseError) {
            let n = word.utf8CodeUnitCount
            guard i + n <= buf.count else { throw fail("unexpected end") }
            let w = word.utf8Start
            for k in 0..<n where buf[i + k] != w[k] { throw fail("invalid literal") }
            i += n
        }

        mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
            if depth > depthMax { throw fail("nesting deeper than \(depthMax)") }
            i += 1
            // Members are gathered first and the dictionary built at its final size: growing it member by
            // member rehashes everything several times for a 30-field Apple payload.
            var members: [(key: String, value: JSONValue, offset: Int)] = []
            skipSpace()
            if i < buf.count, buf[i] == UInt8(ascii: "}") { i += 1; return .object([:]) }
            while true {
                skipSpace()
                guard i < buf.count, buf[i] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
                let key = try parseString()
                skipSpace()
                guard i < buf.count, buf[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                i += 1
                skipSpace()
                let value = try parseValue(depth: depth)
                members.append((key, value, i))
                skipSpace()
                guard i < buf.count else { throw fail("unexpected end") }
                if buf[i] == UInt8(ascii: ",") { i += 1; continue }
                if buf[i] == UInt8(ascii: "}") {
                    i += 1
                    var object = [String: JSONValue](minimumCapacity: members.count)
                    for member in members where object.updateValue(member.value, forKey: member.key) != nil {
                        throw JSONParseError(offset: member.offset, reason: "duplicate key")
                    }
                    return .object(object)
                }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
            if depth > depthMax { throw fail("nesting deeper than \(depthMax)") }
            i += 1
            var array: [JSONValue] = []
            skipSpace()
            if i < buf.count, buf[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
            while true {
                skipSpace()
                array.append(try parseValue(depth: depth))
                skipSpace()
                guard i < buf.count else { throw fail("unexpected end") }
                if buf[i] == UInt8(ascii: ",") { i += 1; continue }
                if buf[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func parseNumber() throws(JSONParseError) -> JSONValue {
            let start = i
            var isInteger = true
            if buf[i] == UInt8(ascii: "-") { i += 1 }
            guard i < buf.count else { throw fail("unexpected end") }
            if buf[i] == UInt8(ascii: "0") {
                i += 1
            } else if buf[i] >= UInt8(ascii: "1") && buf[i] <= UInt8(ascii: "9") {
                while i < buf.count, buf[i] >= UInt8(ascii: "0"), buf[i] <= UInt8(ascii: "9") { i += 1 }
            } else {
                throw fail("invalid number")
            }
            if i < buf.count, buf[i] == UInt8(ascii: ".") {
                isInteger = false
                i += 1
                let digits = i
                while i < buf.count, buf[i] >= UInt8(ascii: "0"), buf[i] <= UInt8(ascii: "9") { i += 1 }
                if i == digits { throw fail("invalid number") }
            }
            if i < buf.count, buf[i] == UInt8(ascii: "e") || buf[i] == UInt8(ascii: "E") {
                isInteger = false
                i += 1
                if i < buf.count, buf[i] == UInt8(ascii: "+") || buf[i] == UInt8(ascii: "-") { i += 1 }
                let digits = i
                while i < buf.count, buf[i] >= UInt8(ascii: "0"), buf[i] <= UInt8(ascii: "9") { i += 1 }
                if i == digits { throw fail("invalid number") }
            }
            if isInteger, i - start <= 20 {
                var value: Int64 = 0
                var k = start
                let negative = buf[k] == UInt8(ascii: "-")
                if negative { k += 1 }
                var overflow = false
                while k < i {
                    let (m, o1) = value.multipliedReportingOverflow(by: 10)
                    let (s, o2) = m.addingReportingOverflow(Int64(buf[k] - UInt8(ascii: "0")))
                    if o1 || o2 { overflow = true; break }
                    value = s
                    k += 1
                }
                if !overflow { return .int(negative ? -value : value) }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: buf[start..<i]), as: UTF8.self)
            guard let d = Double(text), d.isFinite else { throw JSONParseError(offset: start, reason: "number out of range") }
            return .double(d)
        }

        mutating func parseString() throws(JSONParseError) -> String {
            i += 1
            let start = i
            // Fast path: no escapes. Eight bytes at a time while none of them is a quote, a backslash, a
            // control character or non-ASCII (strings in Apple's payloads are long base64 and short ASCII).
            var isASCII = true
            while i < buf.count {
                if i + 8 <= buf.count, !Self.mayNeedAttention(UnsafeRawPointer(buf.baseAddress! + i).loadUnaligned(as: UInt64.self)) {
                    i += 8
                    continue
                }
                let c = buf[i]
                if c == UInt8(ascii: "\"") {
                    let slice = UnsafeBufferPointer(rebasing: buf[start..<i])
                    i += 1
                    guard let s = isASCII ? String(decoding: slice, as: UTF8.self) : JSONParser.string(slice) else {
                        throw fail("invalid UTF-8")
                    }
                    return s
                }
                if c == UInt8(ascii: "\\") { break }
                if c < 0x20 { throw fail("control character in string") }
                if c >= 0x80 { isASCII = false }
                i += 1
            }
            var bytes = Array(UnsafeBufferPointer(rebasing: buf[start..<i]))
            while i < buf.count {
                let c = buf[i]
                if c == UInt8(ascii: "\"") {
                    i += 1
                    guard let s = bytes.withUnsafeBufferPointer(JSONParser.string) else { throw fail("invalid UTF-8") }
                    return s
                }
                if c < 0x20 { throw fail("control character in string") }
                if c != UInt8(ascii: "\\") { bytes.append(c); i += 1; continue }
                i += 1
                guard i < buf.count else { break }
                let e = buf[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "/"): bytes.append(0x2F)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard i + 1 < buf.count, buf[i] == UInt8(ascii: "\\"), buf[i + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate")
                        }
                        i += 2
                        let low = try hex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar < 0xE000 {
                        throw fail("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid escape") }
                    bytes.append(contentsOf: Array(String(Character(u)).utf8))
                default: throw fail("invalid escape")
                }
            }
            throw fail("unterminated string")
        }

        /// Whether any of the eight bytes is a quote, a backslash, below 0x20 or above 0x7F. May say yes when
        /// none is (a borrow in the below-0x20 test); never says no when one is.
        static func mayNeedAttention(_ word: UInt64) -> Bool {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            func hasZeroByte(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
            let below20 = (word &- ones &* 0x20) & ~word & highs != 0
            return word & highs != 0 || below20 || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
        }

        mutating func hex4() throws(JSONParseError) -> UInt32 {
            guard i + 4 <= buf.count else { throw fail("unexpected end") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = buf[i]
                let d: UInt32
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
                default: throw fail("invalid \\u escape")
                }
                v = v << 4 | d
                i += 1
            }
            return v
        }
    }
}
