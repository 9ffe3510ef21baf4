/// Percent-decoding for paths and query components (RFC 3986).
enum PercentDecoding {
    /// Decodes `%HH` escapes; nil when an escape is malformed or the result is not UTF-8,
    /// so the server can answer `badRequest` instead of guessing.
    static func decode<Bytes: Collection<UInt8>>(_ encoded: Bytes) -> String? {
        guard encoded.contains(UInt8(ascii: "%")) else {
            return string(encoded)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(encoded.count)
        var index = encoded.startIndex
        while index != encoded.endIndex {
            let byte = encoded[index]
            encoded.formIndex(after: &index)
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard index != encoded.endIndex, let high = hexValue(encoded[index]) else { return nil }
            encoded.formIndex(after: &index)
            guard index != encoded.endIndex, let low = hexValue(encoded[index]) else { return nil }
            encoded.formIndex(after: &index)
            bytes.append(high << 4 | low)
        }
        return string(bytes)
    }

    /// The UTF-8 text of `bytes`, nil if invalid. ASCII, nearly every path, needs no validation, and
    /// `String(validating:as:)` is an unspecialized generic call costing several times the scan.
    private static func string<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String? {
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return String(validating: bytes, as: UTF8.self) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Returns `encoded` itself (no copy) when there is nothing to decode.
    static func decode(_ encoded: String) -> String? {
        encoded.utf8.contains(UInt8(ascii: "%")) ? decode(encoded.utf8) : encoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
