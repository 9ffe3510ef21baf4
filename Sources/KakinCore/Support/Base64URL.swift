/// Base64 and base64url without Foundation's Data detours (hot path of every JWS).
public enum Base64 {
    static let standardAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let urlAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static let decodeTable: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in standardAlphabet.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        return t
    }()

    /// Decodes standard or url-safe base64, padded or not. Returns nil on any invalid character.
    public static func decode<S: Collection>(_ input: S) -> [UInt8]? where S.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(input.count * 3 / 4)
        var acc: UInt32 = 0
        var bits = 0
        var padding = 0
        for c in input {
            if c == UInt8(ascii: "=") { padding += 1; continue }
            if padding > 0 { return nil }
            let v = decodeTable[Int(c)]
            if v == 0xFF { return nil }
            acc = acc << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            }
        }
        if padding > 2 || bits >= 6 { return nil }
        return out
    }

    /// `decode(_:)` for contiguous bytes, four characters at a time into a buffer allocated once (stored JWS
    /// payloads are decoded on every status read).
    public static func decode(_ input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        var end = input.count
        var padding = 0
        while end > 0, input[end - 1] == UInt8(ascii: "=") {
            end -= 1
            padding += 1
        }
        guard padding <= 2, end % 4 != 1 else { return nil }
        let outCount = end / 4 * 3 + (end % 4 == 0 ? 0 : end % 4 - 1)
        return decodeTable.withUnsafeBufferPointer { table -> [UInt8]? in
            var valid = true
            let out = [UInt8](unsafeUninitializedCapacity: outCount) { buffer, initialized in
                var i = 0
                var o = 0
                while i + 4 <= end {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])], c = table[Int(input[i + 2])], d = table[Int(input[i + 3])]
                    guard (a | b | c | d) & 0xC0 == 0 else {
                        valid = false
                        break
                    }
                    buffer[o] = a << 2 | b >> 4
                    buffer[o + 1] = b << 4 | c >> 2
                    buffer[o + 2] = c << 6 | d
                    i += 4
                    o += 3
                }
                if valid, end - i >= 2 {
                    let a = table[Int(input[i])], b = table[Int(input[i + 1])]
                    let c = end - i == 3 ? table[Int(input[i + 2])] : 0
                    if (a | b | c) & 0xC0 != 0 {
                        valid = false
                    } else {
                        buffer[o] = a << 2 | b >> 4
                        o += 1
                        if end - i == 3 {
                            buffer[o] = b << 4 | c >> 2
                            o += 1
                        }
                    }
                }
                initialized = valid ? o : 0
            }
            return valid ? out : nil
        }
    }

    public static func decode(_ s: String) -> [UInt8]? { decode(Array(s.utf8)) }

    public static func encode(_ bytes: some Collection<UInt8>, url: Bool = false, padded: Bool = true) -> String {
        let alphabet = url ? urlAlphabet : standardAlphabet
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var it = bytes.makeIterator()
        while let b0 = it.next() {
            let b1 = it.next()
            let b2 = it.next()
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | (b1 ?? 0) >> 4)])
            if let b1 {
                out.append(alphabet[Int((b1 & 0x0F) << 2 | (b2 ?? 0) >> 6)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
            if let b2 {
                out.append(alphabet[Int(b2 & 0x3F)])
            } else if padded {
                out.append(UInt8(ascii: "="))
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func urlEncode(_ bytes: some Collection<UInt8>) -> String { encode(bytes, url: true, padded: false) }
}
