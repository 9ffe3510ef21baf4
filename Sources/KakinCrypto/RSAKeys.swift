internal import COpenSSL
import KakinCore

/// RSA key sizes accepted: Google's service-account and push-token keys are 2048 bits.
public enum RSAKeySize {
    public static let bitsMin = 2048
}

extension OwnedPKey {
    /// The key must be an RSA key of `RSAKeySize.bitsMin`…`bitsMax` bits: RS256 is defined for RSA only.
    static func requireRSA(_ pointer: OpaquePointer, _ operation: String) throws(CryptoError) -> OwnedPKey {
        let key = OwnedPKey(pointer)
        guard EVP_PKEY_get_base_id(pointer) == EVP_PKEY_RSA else { throw CryptoError(operation, "not an RSA key") }
        let bits = Int(EVP_PKEY_get_bits(pointer))
        guard (RSAKeySize.bitsMin...RSAKeySize.bitsMax).contains(bits) else {
            throw CryptoError(operation, "RSA key of \(bits) bits (\(RSAKeySize.bitsMin) to \(RSAKeySize.bitsMax) accepted)")
        }
        return key
    }

    /// A big-number parameter of the key (`n`, `e`) as unsigned big-endian bytes.
    func bigNumber(_ name: String) -> [UInt8]? {
        var bn: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pointer, name, &bn) == 1, let bn else {
            ERR_clear_error()
            return nil
        }
        defer { BN_free(bn) }
        let count = (BN_num_bits(bn) + 7) / 8
        var out = [UInt8](repeating: 0, count: Int(count))
        guard BN_bn2binpad(bn, &out, count) == count else { return nil }
        return out
    }
}

/// An RSA public key that checks RS256 signatures (RSASSA-PKCS1-v1_5 with SHA-256, RFC 7518 §3.3): Google's
/// push tokens, service-account assertions.
public final class RSAPublicKey: @unchecked Sendable {
    let key: OwnedPKey

    /// - Parameter spkiDER: a DER `SubjectPublicKeyInfo` holding an RSA key.
    public init(spkiDER: [UInt8]) throws(CryptoError) {
        key = try OwnedPKey.requireRSA(try OwnedPKey.publicKey(spkiDER: spkiDER, "public key"), "public key")
    }

    /// A key from its modulus and public exponent (unsigned big-endian), as a JWK carries them: written as a
    /// SubjectPublicKeyInfo (rsaEncryption) and parsed like any other.
    public convenience init(modulus: [UInt8], exponent: [UInt8]) throws(CryptoError) {
        guard !modulus.isEmpty, !exponent.isEmpty, exponent.count <= 8, modulus.count <= RSAKeySize.bitsMax / 8 + 1 else {
            throw CryptoError("RSA public key", "empty or oversized n or e")
        }
        func length(_ n: Int) -> [UInt8] {
            n < 0x80 ? [UInt8(n)] : n < 0x100 ? [0x81, UInt8(n)] : [0x82, UInt8(n >> 8), UInt8(n & 0xFF)]
        }
        func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] { [tag] + length(content.count) + content }
        func integer(_ bytes: [UInt8]) -> [UInt8] {
            let trimmed = Array(bytes.drop { $0 == 0 })
            return tlv(0x02, (trimmed.first ?? 0x80) >= 0x80 ? [0] + trimmed : trimmed)
        }
        let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
        let spki = tlv(0x30, tlv(0x30, rsaEncryption) + tlv(0x03, [0] + tlv(0x30, integer(modulus) + integer(exponent))))
        try self.init(spkiDER: spki)
    }

    init(key: OwnedPKey) { self.key = key }

    /// DER `SubjectPublicKeyInfo`.
    public var spkiDER: [UInt8] { key.spkiDER() ?? [] }
    /// The modulus `n`, unsigned big-endian.
    public var modulus: [UInt8] { key.bigNumber("n") ?? [] }
    /// The public exponent `e`, unsigned big-endian.
    public var exponent: [UInt8] { key.bigNumber("e") ?? [] }

    /// The key as a JWK (RFC 7517), as Google's certs endpoint lists it: `kty`, `alg` RS256, `use` sig, `kid`, `n`, `e`.
    public func jwk(keyId: String) -> JSONValue {
        ["kty": "RSA", "alg": "RS256", "use": "sig", "kid": .string(keyId),
         "n": .string(Base64.urlEncode(modulus)), "e": .string(Base64.urlEncode(exponent))]
    }

    /// Checks an RS256 signature over `message`. A signature of any length but the modulus's is refused.
    public func isValidRS256Signature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        signature.withUnsafeBytes { sig in message.withUnsafeBytes { isValidRS256Signature(sig, for: $0) } }
    }

    /// The same over raw buffers (a JWS's signing input without a copy).
    public func isValidRS256Signature(_ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == Int(EVP_PKEY_get_size(key.pointer)), let context = EVP_MD_CTX_new() else { return false }
        defer {
            EVP_MD_CTX_free(context)
            ERR_clear_error()
        }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key.pointer) == 1 else { return false }
        return EVP_DigestVerify(context, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count,
                                message.baseAddress?.assumingMemoryBound(to: UInt8.self), message.count) == 1
    }
}

/// An RSA private key: a Google service account's key (`private_key` in its JSON), the Play simulator's keys.
public final class RSAPrivateKey: @unchecked Sendable {
    let key: OwnedPKey
    /// The matching public key.
    public let publicKey: RSAPublicKey

    /// A new random key of `bits` bits (2048, like Google's service-account keys).
    public init(bits: Int = 2048) throws(CryptoError) {
        guard (RSAKeySize.bitsMin...RSAKeySize.bitsMax).contains(bits), let generated = kakin_EVP_RSA_gen(UInt32(bits)) else {
            throw CryptoError.openSSL("generate RSA key")
        }
        key = OwnedPKey(generated)
        publicKey = try Self.publicHalf(of: key)
    }

    /// Loads an unencrypted PEM key: PKCS#8 (`-----BEGIN PRIVATE KEY-----`, as in a service account's JSON) or
    /// PKCS#1 (`-----BEGIN RSA PRIVATE KEY-----`).
    public init(pem: String) throws(CryptoError) {
        key = try OwnedPKey.requireRSA(try OwnedPKey.privateKey(pem: pem, "load RSA private key"), "load RSA private key")
        publicKey = try Self.publicHalf(of: key)
    }

    private static func publicHalf(of key: OwnedPKey) throws(CryptoError) -> RSAPublicKey {
        guard let der = key.spkiDER() else { throw CryptoError.openSSL("public key of private key") }
        return try RSAPublicKey(spkiDER: der)
    }

    /// Unencrypted PKCS#8 PEM, the form Google puts in a service account's JSON.
    public func pemPKCS8() throws(CryptoError) -> String { try key.pemPKCS8() }

    /// RS256: RSASSA-PKCS1-v1_5 with SHA-256 over `message`.
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try message.withUnsafeBytes { buffer in Result { () throws(CryptoError) in try key.signSHA256(buffer) } }.get()
    }
}
