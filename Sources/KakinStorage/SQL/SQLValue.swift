/// A value bound to a `?` placeholder or read from a result column.
///
/// The five cases are SQLite's storage classes; a PostgreSQL implementation maps its types onto them.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

// MARK: - Building values

extension SQLValue {
    /// `.text`, or `.null` for `nil`.
    public init(_ value: String?) { self = value.map(SQLValue.text) ?? .null }
    /// `.integer`, or `.null` for `nil`.
    public init(_ value: Int?) { self = value.map { .integer(Int64($0)) } ?? .null }
    /// `.integer`, or `.null` for `nil`.
    public init(_ value: Int64?) { self = value.map(SQLValue.integer) ?? .null }
    /// `.real`, or `.null` for `nil`.
    public init(_ value: Double?) { self = value.map(SQLValue.real) ?? .null }
    /// `.integer(1)` / `.integer(0)` (SQLite has no boolean type), or `.null` for `nil`.
    public init(_ value: Bool?) { self = value.map { .integer($0 ? 1 : 0) } ?? .null }
    /// `.blob`, or `.null` for `nil`.
    public init(_ value: [UInt8]?) { self = value.map(SQLValue.blob) ?? .null }
}

extension SQLValue: ExpressibleByStringLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
}

extension SQLValue: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: Int64) { self = .integer(value) }
}

extension SQLValue: ExpressibleByFloatLiteral {
    public init(floatLiteral value: Double) { self = .real(value) }
}

extension SQLValue: ExpressibleByBooleanLiteral {
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
}

// MARK: - Reading values

extension SQLValue {
    public var isNull: Bool { self == .null }

    /// The integer, or a real that holds an exact integer; `nil` otherwise (including NULL).
    public var int: Int64? {
        switch self {
        case .integer(let value): value
        case .real(let value): Int64(exactly: value)
        default: nil
        }
    }

    /// The real, or an integer widened to `Double`; `nil` otherwise.
    public var double: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    /// The text; `nil` for any other case (no implicit formatting of numbers).
    public var string: String? {
        if case .text(let value) = self { value } else { nil }
    }

    /// The blob; `nil` for any other case.
    public var bytes: [UInt8]? {
        if case .blob(let value) = self { value } else { nil }
    }

    /// `true` for a non-zero integer, `false` for zero; `nil` otherwise.
    public var bool: Bool? {
        if case .integer(let value) = self { value != 0 } else { nil }
    }
}
