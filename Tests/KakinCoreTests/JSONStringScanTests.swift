import KakinCore
import Testing

/// The parser scans strings eight bytes at a time; it must accept and refuse exactly what a byte-by-byte
/// reading of RFC 8259 does, wherever the quote, escape, control character or non-ASCII byte falls.
@Suite struct JSONStringScanTests {
    /// The string a byte-by-byte reader gets from the bytes between the quotes, or nil for invalid input.
    static func reference(_ content: [UInt8]) -> String? {
        var bytes: [UInt8] = []
        var i = 0
        while i < content.count {
            let c = content[i]
            if c == UInt8(ascii: "\"") || c < 0x20 { return nil }
            if c == UInt8(ascii: "\\") {
                guard i + 1 < content.count else { return nil }
                switch content[i + 1] {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                default: return nil
                }
                i += 2
                continue
            }
            bytes.append(c)
            i += 1
        }
        return String(validating: bytes, as: UTF8.self)
    }

    @Test func stringsReadEightBytesAtATimeMatchAByteByByteReading() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0022)
        let plain = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        let rare: [[UInt8]] = [[0x5C, 0x22], [0x5C, 0x5C], [0x5C, 0x6E], [0x22], [0x09], [0x1F], [0x00], Array("é".utf8), Array("€".utf8),
                               Array("😀".utf8), [0xC3], [0xFF], [0x7F], [0x20], [0x21], [0x23], [0x5B], [0x5D]]
        var checked = 0
        for _ in 0..<20_000 {
            var content: [UInt8] = []
            for _ in 0..<Int.random(in: 0...40, using: &rng) {
                if Int.random(in: 0..<12, using: &rng) == 0 {
                    content += rare.randomElement(using: &rng)!
                } else {
                    content.append(plain.randomElement(using: &rng)!)
                }
            }
            let document = [UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")]
            let parsed = (try? JSONParser.parse(document))?.stringValue
            let expected = Self.reference(content)
            guard parsed == expected else {
                Issue.record("\(content): parsed \(String(describing: parsed)), expected \(String(describing: expected))")
                return
            }
            checked += expected == nil ? 0 : 1
        }
        #expect(checked > 5_000)
    }
}
