import KakinCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The three segments of a compact JWS, as byte ranges of the caller's buffer (no copies).
public struct CompactJWSSegments {
    public let header: UnsafeRawBufferPointer
    public let payload: UnsafeRawBufferPointer
    public let signature: UnsafeRawBufferPointer
    /// `header.payload`: the bytes the signature covers.
    public let signingInput: UnsafeRawBufferPointer

    /// Splits on exactly two dots. Segments may be empty here (an `alg: none` token has an empty
    /// signature); their contents are judged later.
    public init?(_ jws: UnsafeRawBufferPointer) {
        guard let firstDot = Self.dot(in: jws, from: 0),
            let secondDot = Self.dot(in: jws, from: firstDot + 1), Self.dot(in: jws, from: secondDot + 1) == nil
        else { return nil }
        header = UnsafeRawBufferPointer(rebasing: jws[0..<firstDot])
        payload = UnsafeRawBufferPointer(rebasing: jws[(firstDot + 1)..<secondDot])
        signature = UnsafeRawBufferPointer(rebasing: jws[(secondDot + 1)...])
        signingInput = UnsafeRawBufferPointer(rebasing: jws[0..<secondDot])
    }

    private static func dot(in bytes: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < bytes.count, let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: ".")), bytes.count - start)
        else { return nil }
        return UnsafeRawPointer(found) - UnsafeRawPointer(bytes.baseAddress!)
    }
}

/// Base64url decoding for JWS segments, over raw bytes (the hot path of every verification).
/// Accepts what `KakinCore.Base64.decode` accepts: either alphabet, padded or not.
public enum SegmentBase64 {
    private static let table: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "+"))] = 62
        t[Int(UInt8(ascii: "/"))] = 63
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        return t
    }()

    public static func decode(_ input: UnsafeRawBufferPointer) -> [UInt8]? {
        var end = input.count
        var padding = 0
        while end > 0, input[end - 1] == UInt8(ascii: "="), padding < 2 {
            end -= 1
            padding += 1
        }
        if end % 4 == 1 { return nil }
        if padding > 0, (end + padding) % 4 != 0 { return nil }
        let outCount = end / 4 * 3 + (end % 4 == 0 ? 0 : end % 4 - 1)
        return table.withUnsafeBufferPointer { t -> [UInt8]? in
            var valid = true
            let out = [UInt8](unsafeUninitializedCapacity: outCount) { buffer, initialized in
                var o = 0
                var i = 0
                while i + 4 <= end {
                    let a = t[Int(input[i])]
                    let b = t[Int(input[i + 1])]
                    let c = t[Int(input[i + 2])]
                    let d = t[Int(input[i + 3])]
                    if (a | b | c | d) & 0xC0 != 0 {
                        valid = false
                        break
                    }
                    let v = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    buffer[o] = UInt8(truncatingIfNeeded: v >> 16)
                    buffer[o + 1] = UInt8(truncatingIfNeeded: v >> 8)
                    buffer[o + 2] = UInt8(truncatingIfNeeded: v)
                    o += 3
                    i += 4
                }
                if valid, i < end {
                    var v: UInt32 = 0
                    let rest = end - i
                    for k in 0..<rest {
                        let x = t[Int(input[i + k])]
                        if x & 0xC0 != 0 {
                            valid = false
                            break
                        }
                        v |= UInt32(x) << (18 - 6 * UInt32(k))
                    }
                    if valid {
                        buffer[o] = UInt8(truncatingIfNeeded: v >> 16)
                        o += 1
                        if rest == 3 {
                            buffer[o] = UInt8(truncatingIfNeeded: v >> 8)
                            o += 1
                        }
                    }
                }
                initialized = valid ? o : 0
            }
            return valid ? out : nil
        }
    }
}
