/// HTTP header fields in the order they were received or added.
///
/// Kept as ordered pairs, not a dictionary, because repeated fields are legal and their order
/// can matter; lookups compare names ASCII-case-insensitively without allocating.
public struct HTTPHeaders: Sendable, Equatable {
    public typealias Field = (name: String, value: String)

    private var fields: [Field]

    public init() {
        fields = []
    }

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    /// The first value for `name`, compared case-insensitively.
    public subscript(name: String) -> String? {
        for field in fields where Self.namesMatch(field.name, name) {
            return field.value
        }
        return nil
    }

    /// Every value for `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.compactMap { Self.namesMatch($0.name, name) ? $0.value : nil }
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { Self.namesMatch($0.name, name) }
    }

    /// Appends a field, keeping any existing fields of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field named `name` with a single one.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        fields.append((name: name, value: value))
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { Self.namesMatch($0.name, name) }
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    mutating func reserveCapacity(_ capacity: Int) {
        fields.reserveCapacity(capacity)
    }

    /// ASCII case-insensitive comparison: header names are tokens, so no Unicode folding is needed.
    static func namesMatch(_ lhs: String, _ rhs: String) -> Bool {
        var lhsBytes = lhs.utf8.makeIterator()
        var rhsBytes = rhs.utf8.makeIterator()
        while true {
            switch (lhsBytes.next(), rhsBytes.next()) {
            case (nil, nil):
                return true
            case let (left?, right?):
                if left != right && asciiLowercased(left) != asciiLowercased(right) { return false }
            default:
                return false
            }
        }
    }

    private static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }
}

extension HTTPHeaders: Sequence {
    public func makeIterator() -> IndexingIterator<[Field]> {
        fields.makeIterator()
    }
}

extension HTTPHeaders: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }
}
