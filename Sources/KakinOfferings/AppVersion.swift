/// An app's version as targeting compares it: dot-separated numbers (`1.2.3`), compared number by number, a missing
/// number counting 0 (`1.2` = `1.2.0`). Build suffixes (`1.2.3-beta`, `1.2.3 (45)`) are not versions here.
public struct AppVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let components: [Int]

    /// Nil unless 1…`appVersionComponentsMax` numbers of 1–9 digits separated by single dots.
    public init?(_ text: String) {
        guard !text.isEmpty, text.utf8.count <= OfferingLimits.appVersionLengthMax else { return nil }
        var parts: [Int] = []
        for piece in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard (1...9).contains(piece.utf8.count), piece.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                  let n = Int(piece) else { return nil }
            parts.append(n)
        }
        guard parts.count <= OfferingLimits.appVersionComponentsMax else { return nil }
        components = parts
    }

    public var description: String { components.map(String.init).joined(separator: ".") }

    public static func < (a: AppVersion, b: AppVersion) -> Bool {
        for i in 0..<max(a.components.count, b.components.count) {
            let x = i < a.components.count ? a.components[i] : 0, y = i < b.components.count ? b.components[i] : 0
            if x != y { return x < y }
        }
        return false
    }

    public static func == (a: AppVersion, b: AppVersion) -> Bool { !(a < b) && !(b < a) }

    public func hash(into h: inout Hasher) {
        var trimmed = components
        while trimmed.last == 0 { trimmed.removeLast() }
        h.combine(trimmed)
    }
}
