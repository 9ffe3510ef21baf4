@testable import KakinCrypto
import Testing

/// The precomputed ES256 check (`P256FixedKeyVerifier`) answers exactly as `EVP_PKEY_verify` does.
@Suite struct P256FixedKeyTests {
    /// P-256's group order n, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]

    /// a − b or a + b over 32 big-endian bytes, modulo 2²⁵⁶.
    static func add(_ a: ArraySlice<UInt8>, _ b: [UInt8], subtracting: Bool = false) -> [UInt8] {
        let a = Array(a)
        var out = [UInt8](repeating: 0, count: 32)
        var carry = 0
        for i in (0..<32).reversed() {
            let v = subtracting ? Int(a[i]) - Int(b[i]) - carry : Int(a[i]) + Int(b[i]) + carry
            out[i] = UInt8(truncatingIfNeeded: v)
            carry = subtracting ? (v < 0 ? 1 : 0) : (v > 255 ? 1 : 0)
        }
        return out
    }

    /// Both checks' answers for one signature: the precomputed one's and `EVP_PKEY_verify`'s (a key below its count).
    static func answers(_ key: P256PrivateKey, _ signature: [UInt8], _ message: [UInt8]) throws -> (fixed: Bool, evp: Bool) {
        let fixed = try #require(P256FixedKeyVerifier(key.publicKey.key))
        let digest = message.withUnsafeBytes { SHA256Hash.digest($0) }
        let evp = try P256PublicKey(spkiDER: key.publicKey.spkiDER, precomputedAfterVerifications: .max)
        return (signature.withUnsafeBytes { fixed.isValidES256Signature($0, digest: digest) }, evp.isValidES256Signature(signature, for: message))
    }

    @Test func aPrecomputedKeyAcceptsAndRefusesWhatOpenSSLDoes() throws {
        let key = try P256PrivateKey()
        let message = Array("header.payload".utf8)
        let signature = try key.signES256(message)
        let r = signature[0..<32], s = signature[32..<64]
        let zero = [UInt8](repeating: 0, count: 32)
        let cases: [(String, [UInt8], [UInt8], Bool)] = [
            ("valid", signature, message, true),
            ("n − s, the signature's other valid s", Array(r) + Self.add(Self.order[...], Array(s), subtracting: true), message, true),
            ("another message", signature, Array("header.payloaD".utf8), false),
            ("a bit flipped in r", [signature[0] ^ 1] + signature.dropFirst(), message, false),
            ("a bit flipped in s", signature.dropLast() + [signature[63] ^ 0x80], message, false),
            ("another key's signature", try P256PrivateKey().signES256(message), message, false),
            ("r = 0", zero + s, message, false),
            ("s = 0", Array(r) + zero, message, false),
            ("r = n", Self.order + s, message, false),
            ("s = n", Array(r) + Self.order, message, false),
            ("r + n", Self.add(r, Self.order) + s, message, false),
            ("s + n", Array(r) + Self.add(s, Self.order), message, false),
            ("all ones", [UInt8](repeating: 0xFF, count: 64), message, false),
        ]
        for (name, signature, message, expected) in cases {
            let answers = try Self.answers(key, signature, message)
            #expect(answers.fixed == expected, "precomputed: \(name)")
            #expect(answers.evp == expected, "EVP_PKEY_verify: \(name)")
        }
    }

    /// R's x at least n, so r = x − n: the check's second comparison (X ≡ (r + n)·Z²), which no honest signature reaches
    /// in practice (probability ~2⁻¹²⁸). The key was solved for from a chosen R; pyca/cryptography and openssl accept the
    /// signature (`Vectors/x_at_least_n.py`).
    @Test func aSignatureWhoseRHasXAtLeastNIsValid() throws {
        let spki = Self.bytes(
            "3059301306072a8648ce3d020106082a8648ce3d030107034200049eb21903628b66d318cc4dce560102b86555e3d6dd6d538ad03b4087ca0c0c67"
                + "3e7320cf3f46bc8fd7d47041cbaca80c6dd7ec926a3dad10a2d904e2d931ef46")
        let message = Array("kakin: R's x is at least n".utf8)
        let r = [UInt8](repeating: 0, count: 31) + [3], s = [UInt8](repeating: 0, count: 28) + [0x01, 0x23, 0x45, 0x67]
        let key = try P256PublicKey(spkiDER: spki, precomputedAfterVerifications: 0)
        let fixed = try #require(P256FixedKeyVerifier(key.key))
        let evp = try P256PublicKey(spkiDER: spki, precomputedAfterVerifications: .max)
        let cases: [(String, [UInt8], [UInt8], Bool)] = [
            ("valid", r + s, message, true),
            ("another message", r + s, message + [0], false),
            ("r + n, R's x itself", Self.add(r[...], Self.order) + s, message, false),
            ("r + 1", [UInt8](repeating: 0, count: 31) + [4] + s, message, false),
            ("n − s", r + Self.add(Self.order[...], s, subtracting: true), message, true),
        ]
        for (name, signature, message, expected) in cases {
            let digest = message.withUnsafeBytes { SHA256Hash.digest($0) }
            #expect(signature.withUnsafeBytes { fixed.isValidES256Signature($0, digest: digest) } == expected, "precomputed: \(name)")
            #expect(key.isValidES256Signature(signature, for: message) == expected, "past its count: \(name)")
            #expect(evp.isValidES256Signature(signature, for: message) == expected, "EVP_PKEY_verify: \(name)")
        }
    }

    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    @Test func aKeyPastItsCountChecksWithItsMultiplesPrecomputed() throws {
        let key = try P256PrivateKey()
        let publicKey = try P256PublicKey(spkiDER: key.publicKey.spkiDER, precomputedAfterVerifications: 2)
        let other = try P256PrivateKey()
        for i in 0..<40 {
            let message = Array("message \(i)".utf8)
            let signature = try key.signES256(message)
            #expect(publicKey.isValidES256Signature(signature, for: message), "check \(i)")
            #expect(!publicKey.isValidES256Signature(signature, for: message + [0]), "check \(i), changed message")
            #expect(!publicKey.isValidES256Signature(try other.signES256(message), for: message), "check \(i), another key")
            #expect(!publicKey.isValidES256Signature(Array(signature.prefix(63)), for: message), "check \(i), 63 bytes")
        }
    }

    @Test func concurrentChecksWithOnePrecomputedKeyAgree() async throws {
        let key = try P256PrivateKey()
        let publicKey = try P256PublicKey(spkiDER: key.publicKey.spkiDER, precomputedAfterVerifications: 0)
        let message = Array("header.payload".utf8)
        let good = try key.signES256(message)
        let bad = try P256PrivateKey().signES256(message)
        let answers = await withTaskGroup(of: [Bool].self) { group in
            for _ in 0..<4 {
                group.addTask { (0..<50).map { i in publicKey.isValidES256Signature(i.isMultiple(of: 2) ? good : bad, for: message) } }
            }
            var all: [[Bool]] = []
            for await list in group { all.append(list) }
            return all
        }
        for list in answers {
            for (i, valid) in list.enumerated() { #expect(valid == i.isMultiple(of: 2)) }
        }
    }
}
