/// A JSON document as a value. Apple payloads are kept in this form beside their typed view, so an
/// unknown field or enum value from Apple is never lost (the raw JWS payload is stored too).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// Integers that fit Int64 stay exact (Apple's millisecond dates, prices in milliunits).
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])
}

extension JSONValue {
    public subscript(key: String) -> JSONValue? {
        if case .object(let o) = self { return o[key] }
        return nil
    }

    public var objectValue: [String: JSONValue]? {
        if case .object(let o) = self { return o }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let a) = self { return a }
        return nil
    }

    /// Strings only (Apple's ids are strings; numbers are not silently converted here).
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var boolValue: Bool? {
        switch self {
        case .bool(let b): return b
        case .int(let i): return i != 0 ? (i == 1 ? true : nil) : false
        default: return nil
        }
    }

    /// An integer, accepting a double with a fractional part by truncation (Xcode signs dates such as
    /// `1697679936049.7297` ms).
    public var int64Value: Int64? {
        switch self {
        case .int(let i): return i
        case .double(let d) where d.isFinite && abs(d) < 9.2e18: return Int64(d.rounded(.towardZero))
        default: return nil
        }
    }

    public var intValue: Int? { int64Value.map { Int(truncatingIfNeeded: $0) } }

    public var doubleValue: Double? {
        switch self {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: return nil
        }
    }

    /// An id that Apple sends as a string but that older or hand-made data may carry as a number.
    public var idString: String? {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        default: return nil
        }
    }

    public var isNull: Bool { if case .null = self { return true } else { return false } }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .double(value) }
}

extension JSONValue {
    /// Optional-friendly constructors for building responses.
    public static func string(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
    public static func int(_ i: Int?) -> JSONValue { i.map { .int(Int64($0)) } ?? .null }
    public static func int(_ i: Int64?) -> JSONValue { i.map(JSONValue.int) ?? .null }
    public static func bool(_ b: Bool?) -> JSONValue { b.map(JSONValue.bool) ?? .null }
}
