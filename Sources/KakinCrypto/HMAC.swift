internal import COpenSSL

/// HMAC-SHA256 (customer tokens signed HS256 by the app's auth server) and constant-time comparison.
public enum HMACSHA256 {
    public static func authenticationCode(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                _ = HMAC(EVP_sha256(), k.baseAddress, Int32(k.count), m.baseAddress?.assumingMemoryBound(to: UInt8.self),
                         m.count, &out, &length)
            }
        }
        return Array(out.prefix(Int(length)))
    }

    /// Compares two byte strings in time independent of where they differ.
    public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }
}
