internal import COpenSSL
import Synchronization

/// Length of an ES256 signature in JWS form: r and s, 32 big-endian bytes each (RFC 7518 §3.4).
public let es256SignatureByteCount = 64

/// Owns an `EVP_PKEY` and frees it in deinit. Immutable after init, and OpenSSL allows concurrent
/// read-only use of a key (each operation builds its own context), hence `@unchecked Sendable`.
final class OwnedPKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }
    deinit { EVP_PKEY_free(pointer) }

    /// The key must be an EC key on P-256: ES256 is defined for that curve only.
    static func requireP256(_ pointer: OpaquePointer, _ operation: String) throws(CryptoError) -> OwnedPKey {
        let key = OwnedPKey(pointer)
        guard EVP_PKEY_get_base_id(pointer) == EVP_PKEY_EC else { throw CryptoError(operation, "not an EC key") }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(pointer, &name, name.count, &length) == 1 else {
            throw CryptoError.openSSL(operation)
        }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard group == "prime256v1" || group == "P-256" else { throw CryptoError(operation, "EC key is not on P-256") }
        return key
    }

    /// SubjectPublicKeyInfo DER of the key's public half.
    func spkiDER() -> [UInt8]? {
        derBytes { i2d_PUBKEY(pointer, $0) }
    }

    /// Parses a DER SubjectPublicKeyInfo.
    static func publicKey(spkiDER: [UInt8], _ operation: String) throws(CryptoError) -> OpaquePointer {
        let parsed: OpaquePointer? = spkiDER.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw CryptoError.openSSL(operation) }
        return parsed
    }

    /// Reads an unencrypted private key PEM (PKCS#8 `BEGIN PRIVATE KEY`, or the traditional forms).
    static func privateKey(pem: String, _ operation: String) throws(CryptoError) -> OpaquePointer {
        let bytes = Array(pem.utf8)
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let parsed else { throw CryptoError.openSSL(operation) }
        return parsed
    }

    /// Unencrypted PKCS#8 PEM of a private key.
    func pemPKCS8() throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("export private key") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PKCS8PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 else {
            throw CryptoError.openSSL("export private key")
        }
        return String(decoding: memoryBIOContents(bio), as: UTF8.self)
    }

    /// Signs `message` with SHA-256 (`EVP_DigestSign`): DER ECDSA for EC keys, PKCS#1 v1.5 for RSA keys.
    func signSHA256(_ message: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.openSSL("sign") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { throw CryptoError.openSSL("sign") }
        let input = message.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var length = 0
        guard EVP_DigestSign(context, nil, &length, input, message.count) == 1 else { throw CryptoError.openSSL("sign") }
        var out = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &out, &length, input, message.count) == 1 else { throw CryptoError.openSSL("sign") }
        return Array(out.prefix(length))
    }
}

/// A P-256 public key that checks ES256 signatures (JWS) and DER ECDSA signatures (legacy offers).
public final class P256PublicKey: @unchecked Sendable {
    let key: OwnedPKey
    /// ES256 checks after which this key's multiples are precomputed (`P256FixedKeyVerifier`).
    private let precomputedAfterVerifications: Int
    private let fixedKey = Mutex<FixedKeyState>(.counting(0))

    private enum FixedKeyState {
        /// ES256 checks so far, by `EVP_PKEY_verify`.
        case counting(Int)
        /// One caller is precomputing; the others go on with `EVP_PKEY_verify`.
        case building
        case ready(P256FixedKeyVerifier)
        /// OpenSSL refused to build it: `EVP_PKEY_verify` for good.
        case unavailable
    }

    /// - Parameter spkiDER: a DER `SubjectPublicKeyInfo` holding a P-256 key.
    public convenience init(spkiDER: [UInt8]) throws(CryptoError) {
        try self.init(spkiDER: spkiDER, precomputedAfterVerifications: Self.fixedKeyVerificationsMin)
    }

    /// - Parameter verifications: ES256 checks after which the key's multiples are precomputed (tests: 0, at once).
    init(spkiDER: [UInt8], precomputedAfterVerifications verifications: Int) throws(CryptoError) {
        precondition(verifications >= 0, "a count of checks")
        key = try OwnedPKey.requireP256(try OwnedPKey.publicKey(spkiDER: spkiDER, "public key"), "public key")
        precomputedAfterVerifications = verifications
    }

    /// The subject public key of a certificate.
    public convenience init(certificate: X509Certificate) throws(CryptoError) {
        guard let borrowed = X509_get0_pubkey(certificate.pointer), let der = derBytes({ i2d_PUBKEY(borrowed, $0) }) else {
            throw CryptoError.openSSL("certificate public key")
        }
        try self.init(spkiDER: der)
    }

    /// DER `SubjectPublicKeyInfo`.
    public var spkiDER: [UInt8] { key.spkiDER() ?? [] }

    /// Checks an ES256 signature: `signature` is raw r‖s (exactly 64 bytes; any other length is
    /// refused), `message` the signed bytes (hashed here with SHA-256).
    public func isValidES256Signature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        signature.withUnsafeBytes { sig in message.withUnsafeBytes { isValidES256Signature(sig, for: $0) } }
    }

    /// Checks a DER-encoded ECDSA-with-SHA-256 signature over `message`.
    public func isValidDERSignature(_ signature: [UInt8], for message: [UInt8]) -> Bool {
        let digest = message.withUnsafeBytes { SHA256Hash.digest($0) }
        return signature.withUnsafeBytes { isValidDERSignature($0, digest: digest) }
    }

    /// The same over raw buffers (the JWS hot path: no copies of the segments). A key past
    /// `fixedKeyVerificationsMin` checks (an App Store leaf certificate's) checks with its multiples precomputed.
    public func isValidES256Signature(_ signature: UnsafeRawBufferPointer, for message: UnsafeRawBufferPointer) -> Bool {
        guard signature.count == es256SignatureByteCount else { return false }
        if let fixed = fixedKeyVerifier() { return fixed.isValidES256Signature(signature, digest: SHA256Hash.digest(message)) }
        // DER of two integers of at most 33 bytes each: 2 + 2 × (2 + 33) = 72 bytes.
        var der = [UInt8](repeating: 0, count: 80)
        let derCount = der.withUnsafeMutableBufferPointer { Self.rawToDER(signature, into: $0) }
        guard derCount > 0 else { return false }
        let digest = SHA256Hash.digest(message)
        return der.withUnsafeBytes { isValidDERSignature(UnsafeRawBufferPointer(rebasing: $0[0..<derCount]), digest: digest) }
    }

    func isValidDERSignature(_ signature: UnsafeRawBufferPointer, digest: [UInt8]) -> Bool {
        guard let context = contexts.take(for: key) else {
            ERR_clear_error()
            return false
        }
        let result = EVP_PKEY_verify(
            context.pointer, signature.baseAddress?.assumingMemoryBound(to: UInt8.self), signature.count, digest, digest.count)
        if result >= 0 {
            contexts.give(back: context)
        } else {
            EVP_PKEY_CTX_free(context.pointer)
        }
        if result != 1 { ERR_clear_error() }
        return result == 1
    }

    /// The precomputed verifier once this key has made `precomputedAfterVerifications` checks (built by the caller that
    /// makes the count, once); nil before, and while it is built.
    private func fixedKeyVerifier() -> P256FixedKeyVerifier? {
        let (ready, builds) = fixedKey.withLock { state -> (P256FixedKeyVerifier?, Bool) in
            switch state {
            case .ready(let verifier): return (verifier, false)
            case .counting(let count) where count >= precomputedAfterVerifications:
                state = .building
                return (nil, true)
            case .counting(let count):
                state = .counting(count + 1)
                return (nil, false)
            case .building, .unavailable: return (nil, false)
            }
        }
        guard builds else { return ready }
        let verifier = P256FixedKeyVerifier(key)
        fixedKey.withLock { $0 = verifier.map(FixedKeyState.ready) ?? .unavailable }
        return verifier
    }

    /// Verification contexts ready for this key: creating and initialising one costs about a tenth of
    /// a verification in OpenSSL 3, so they are reused. Each is used by one thread at a time.
    private let contexts = VerifyContextPool()

    /// Converts raw r‖s into a DER `ECDSA-Sig-Value` with BN_bin2bn / ECDSA_SIG_set0 / i2d_ECDSA_SIG.
    /// Returns the number of bytes written, or 0.
    static func rawToDER(_ raw: UnsafeRawBufferPointer, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        let half = es256SignatureByteCount / 2
        guard raw.count == es256SignatureByteCount, let sig = ECDSA_SIG_new() else { return 0 }
        defer { ECDSA_SIG_free(sig) }
        let bytes = raw.bindMemory(to: UInt8.self)
        guard let r = BN_bin2bn(bytes.baseAddress, Int32(half), nil) else { return 0 }
        guard let s = BN_bin2bn(bytes.baseAddress! + half, Int32(half), nil) else {
            BN_free(r)
            return 0
        }
        guard ECDSA_SIG_set0(sig, r, s) == 1 else {  // set0 takes ownership only on success
            BN_free(r)
            BN_free(s)
            return 0
        }
        let length = i2d_ECDSA_SIG(sig, nil)
        guard length > 0, Int(length) <= out.count else { return 0 }
        var cursor: UnsafeMutablePointer<UInt8>? = out.baseAddress  // i2d advances this copy
        return Int(i2d_ECDSA_SIG(sig, &cursor))
    }
}

/// ES256 checks by a key that makes many (an App Store leaf certificate's key signs every JWS for months): SEC 1 §4.1.4
/// spelled out over OpenSSL's P-256 arithmetic, R = u₁·G + u₂·Q, with Q's multiples precomputed as OpenSSL keeps G's,
/// so both products are fixed-base combs instead of one double-scalar multiplication with a variable point (35 against
/// 69 µs on the bench machine), for a one-off ~26 ms and ~150 KB per key. s⁻¹ mod n by `UInt256.inverse` (OpenSSL's public
/// `BN_mod_inverse` was ~40 % of the check) and R read in Jacobian coordinates (no inversion mod p) take ~20 µs more off
/// (`kakin-bench verify`: 71 → 50 µs of CPU per JWS, parsing included, on a loaded machine).
/// Only public values go through it: nothing needs constant time. Immutable after init, read concurrently.
final class P256FixedKeyVerifier: @unchecked Sendable {
    /// P-256; G's multiples are OpenSSL's built-in table.
    private let curve: OpaquePointer
    /// P-256 with the key's point Q as its generator, Q's multiples precomputed.
    private let keyCurve: OpaquePointer
    /// P-256's group order n, for s⁻¹ mod n (`UInt256.inverse`).
    private let order: UInt256

    init?(_ key: OwnedPKey) {
        var point = [UInt8](repeating: 0, count: 65)  // uncompressed: 04 ‖ x ‖ y
        var length = 0
        guard EVP_PKEY_get_octet_string_param(key.pointer, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &length) == 1,
              let curve = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1)
        else {
            ERR_clear_error()
            return nil
        }
        guard let keyCurve = EC_GROUP_dup(curve) else {
            EC_GROUP_free(curve)
            ERR_clear_error()
            return nil
        }
        let q = EC_POINT_new(curve)
        let context = BN_CTX_new()
        defer {
            EC_POINT_free(q)
            BN_CTX_free(context)
        }
        // oct2point refuses a point off the curve; the key's order is P-256's n and its cofactor 1.
        guard let q, let context, EC_POINT_oct2point(curve, q, point, length, context) == 1, EC_POINT_is_at_infinity(curve, q) == 0,
              EC_GROUP_set_generator(keyCurve, q, EC_GROUP_get0_order(curve), EC_GROUP_get0_cofactor(curve)) == 1,
              kakin_EC_GROUP_precompute_mult(keyCurve, context) == 1
        else {
            EC_GROUP_free(curve)
            EC_GROUP_free(keyCurve)
            ERR_clear_error()
            return nil
        }
        var orderBytes = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(EC_GROUP_get0_order(curve), &orderBytes, 32) == 32 else {
            EC_GROUP_free(curve)
            EC_GROUP_free(keyCurve)
            ERR_clear_error()
            return nil
        }
        self.curve = curve
        self.keyCurve = keyCurve
        order = orderBytes.withUnsafeBytes { UInt256(bigEndian: $0) }
    }

    deinit {
        EC_GROUP_free(curve)
        EC_GROUP_free(keyCurve)
    }

    /// Whether raw r‖s (64 bytes) signs `digest` (SHA-256, 32 bytes).
    func isValidES256Signature(_ signature: UnsafeRawBufferPointer, digest: [UInt8]) -> Bool {
        precondition(signature.count == es256SignatureByteCount && digest.count == es256SignatureByteCount / 2, "ES256 sizes")
        let valid = check(signature.assumingMemoryBound(to: UInt8.self).baseAddress!, digest)
        if !valid { ERR_clear_error() }
        return valid
    }

    private func check(_ rs: UnsafePointer<UInt8>, _ digest: [UInt8]) -> Bool {
        guard let context = BN_CTX_new() else { return false }
        defer { BN_CTX_free(context) }
        BN_CTX_start(context)
        defer { BN_CTX_end(context) }
        let half = Int32(es256SignatureByteCount / 2)
        guard let r = BN_CTX_get(context), let s = BN_CTX_get(context), let e = BN_CTX_get(context), let w = BN_CTX_get(context),
              let u1 = BN_CTX_get(context), let u2 = BN_CTX_get(context), let x = BN_CTX_get(context), let z = BN_CTX_get(context),
              let candidate = BN_CTX_get(context),
              let n = EC_GROUP_get0_order(curve), let p = EC_GROUP_get0_field(curve),
              BN_bin2bn(rs, half, r) != nil, BN_bin2bn(rs + Int(half), half, s) != nil, BN_bin2bn(digest, half, e) != nil
        else { return false }
        // Step 1: r and s in [1, n − 1].
        guard BN_is_zero(r) == 0, BN_is_zero(s) == 0, BN_cmp(r, n) < 0, BN_cmp(s, n) < 0 else { return false }
        // Steps 3–4: e is SHA-256's 256 bits (n's length: nothing to cut); w = s⁻¹, u₁ = e·w, u₂ = r·w (mod n). w is
        // UInt256's binary inverse, taken only when w·s ≡ 1 proves it (else BN_mod_inverse's): n is prime, so that w is s⁻¹.
        let inverse = UInt256.inverse(UInt256(bigEndian: UnsafeRawBufferPointer(start: rs + Int(half), count: Int(half))), modulo: order)
        guard BN_bin2bn(inverse.bigEndianBytes, half, w) != nil, BN_mod_mul(x, w, s, n, context) == 1,
              BN_is_one(x) == 1 || BN_mod_inverse(w, s, n, context) != nil,
              BN_mod_mul(u1, e, w, n, context) == 1, BN_mod_mul(u2, r, w, n, context) == 1
        else { return false }
        // Steps 5–7: R = u₁·G + u₂·Q, not the point at infinity, and its x mod n is r. R is read in Jacobian coordinates
        // (X, Z: x = X/Z² mod p), sparing the inversion mod p of affine ones: as x < p < 2n, x mod n = r exactly when
        // X ≡ r·Z², or X ≡ (r + n)·Z² where r + n < p.
        let sum = EC_POINT_new(curve)
        let keyTerm = EC_POINT_new(keyCurve)
        defer {
            EC_POINT_free(sum)
            EC_POINT_free(keyTerm)
        }
        guard let sum, let keyTerm, EC_POINT_mul(curve, sum, u1, nil, nil, context) == 1,
              EC_POINT_mul(keyCurve, keyTerm, u2, nil, nil, context) == 1, EC_POINT_add(curve, sum, sum, keyTerm, context) == 1,
              EC_POINT_is_at_infinity(curve, sum) == 0, kakin_EC_POINT_get_Jprojective_coordinates(curve, sum, x, z, context) == 1,
              BN_mod_sqr(z, z, p, context) == 1, BN_mod_mul(candidate, r, z, p, context) == 1
        else { return false }
        if BN_cmp(candidate, x) == 0 { return true }
        guard BN_add(candidate, r, n) == 1, BN_cmp(candidate, p) < 0, BN_mod_mul(candidate, candidate, z, p, context) == 1
        else { return false }
        return BN_cmp(candidate, x) == 0
    }
}

/// A small stack of `EVP_PKEY_CTX`s initialised for verification with one key.
final class VerifyContextPool: Sendable {
    struct Context: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private let idle = Mutex<[Context]>([])

    deinit {
        idle.withLock { contexts in
            for context in contexts { EVP_PKEY_CTX_free(context.pointer) }
            contexts.removeAll()
        }
    }

    func take(for key: OwnedPKey) -> Context? {
        if let context = idle.withLock({ $0.popLast() }) { return context }
        guard let pointer = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else { return nil }
        guard EVP_PKEY_verify_init(pointer) == 1 else {
            EVP_PKEY_CTX_free(pointer)
            return nil
        }
        return Context(pointer: pointer)
    }

    func give(back context: Context) {
        let kept = idle.withLock { contexts -> Bool in
            guard contexts.count < Self.contextsMax else { return false }
            contexts.append(context)
            return true
        }
        if !kept { EVP_PKEY_CTX_free(context.pointer) }
    }
}

/// A P-256 private key: App Store `.p8` keys, the simulator's signing CA, test keys.
public final class P256PrivateKey: @unchecked Sendable {
    let key: OwnedPKey
    /// The matching public key.
    public let publicKey: P256PublicKey

    /// A new random key.
    public init() throws(CryptoError) {
        guard let generated = kakin_EVP_EC_gen_P256() else { throw CryptoError.openSSL("generate P-256 key") }
        key = OwnedPKey(generated)
        publicKey = try Self.publicHalf(of: key)
    }

    /// Loads an unencrypted PKCS#8 PEM key (`-----BEGIN PRIVATE KEY-----`), as in App Store Connect's
    /// `.p8` files.
    public init(pemPKCS8 pem: String) throws(CryptoError) {
        key = try OwnedPKey.requireP256(try OwnedPKey.privateKey(pem: pem, "load PKCS#8 private key"), "load PKCS#8 private key")
        publicKey = try Self.publicHalf(of: key)
    }

    private static func publicHalf(of key: OwnedPKey) throws(CryptoError) -> P256PublicKey {
        guard let der = key.spkiDER() else { throw CryptoError.openSSL("public key of private key") }
        return try P256PublicKey(spkiDER: der)
    }

    /// Unencrypted PKCS#8 PEM, the `.p8` format.
    public func pemPKCS8() throws(CryptoError) -> String { try key.pemPKCS8() }

    /// ECDSA P-256 with SHA-256, DER-encoded (legacy promotional-offer signatures).
    public func signDER(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try message.withUnsafeBytes { buffer in Result { () throws(CryptoError) in try signDER(buffer) } }.get()
    }

    /// ES256: ECDSA P-256 with SHA-256 as raw r‖s (64 bytes), the JWS form.
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try signDER(message)
        let sig: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig else { throw CryptoError.openSSL("ES256 signature") }
        defer { ECDSA_SIG_free(sig) }
        var r: OpaquePointer? = nil
        var s: OpaquePointer? = nil
        ECDSA_SIG_get0(sig, &r, &s)  // borrowed
        let half = es256SignatureByteCount / 2
        var raw = [UInt8](repeating: 0, count: es256SignatureByteCount)
        let ok = raw.withUnsafeMutableBufferPointer { out in
            BN_bn2binpad(r, out.baseAddress, Int32(half)) == half
                && BN_bn2binpad(s, out.baseAddress! + half, Int32(half)) == half
        }
        guard ok else { throw CryptoError.openSSL("ES256 signature") }
        return raw
    }

    func signDER(_ message: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] { try key.signSHA256(message) }
}
