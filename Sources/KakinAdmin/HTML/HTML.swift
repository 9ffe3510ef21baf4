/// A fragment of HTML. Literal text written in the source is markup; every interpolated `String` is escaped,
/// so a customer ID, a reason typed by support or a field of Apple's payload can never become markup.
/// Only another `HTML` value (itself built this way) is inserted as is.
///
///     let row: HTML = "<td>\(customerId)</td>"          // customerId is escaped
///     let page: HTML = "<main>\(row)</main>"            // row is markup already
public struct HTML: Sendable, Hashable, ExpressibleByStringInterpolation {
    public private(set) var rendered: String

    public static let empty = HTML(rendered: "")

    init(rendered: String) { self.rendered = rendered }

    public init(stringLiteral value: String) { rendered = value }

    public init(stringInterpolation: Interpolation) { rendered = stringInterpolation.out }

    public static func + (a: HTML, b: HTML) -> HTML { HTML(rendered: a.rendered + b.rendered) }

    public var bytes: [UInt8] { Array(rendered.utf8) }

    public struct Interpolation: StringInterpolationProtocol {
        var out = ""

        public init(literalCapacity: Int, interpolationCount: Int) { out.reserveCapacity(literalCapacity + interpolationCount * 16) }

        public mutating func appendLiteral(_ literal: String) { out += literal }

        public mutating func appendInterpolation(_ text: String) { out += HTML.escape(text) }

        /// Nothing for nil.
        public mutating func appendInterpolation(_ text: String?) { if let text { out += HTML.escape(text) } }

        public mutating func appendInterpolation(_ html: HTML) { out += html.rendered }

        public mutating func appendInterpolation(_ html: [HTML]) { for h in html { out += h.rendered } }

        public mutating func appendInterpolation<I: BinaryInteger>(_ n: I) { out += String(n) }
    }

    /// Escapes the five characters that matter in text and in quoted attribute values.
    public static func escape(_ s: String) -> String {
        guard s.utf8.contains(where: { $0 == 0x26 || $0 == 0x3C || $0 == 0x3E || $0 == 0x22 || $0 == 0x27 }) else { return s }
        var out = ""
        out.reserveCapacity(s.utf8.count + 16)
        for c in s.unicodeScalars {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&#39;"
            default: out.unicodeScalars.append(c)
            }
        }
        return out
    }
}

/// Percent-encoding for the paths and query strings the pages link to.
public enum URLText {
    /// Encodes everything but RFC 3986's unreserved characters, so a value stays one path segment or one
    /// query value whatever it holds.
    public static func encode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                out += "%"
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(b & 0xF)]))
            }
        }
        return out
    }

    /// Decodes `application/x-www-form-urlencoded` text (`+` is a space); nil when malformed or not UTF-8.
    public static func decodeForm(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = Array(s.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if b == UInt8(ascii: "%") {
                guard it.count >= 2, let hi = hexValue(it.popFirst()!), let lo = hexValue(it.popFirst()!) else { return nil }
                bytes.append(hi << 4 | lo)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
