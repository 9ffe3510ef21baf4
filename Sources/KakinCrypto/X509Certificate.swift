internal import COpenSSL

/// A parsed X.509 certificate. Owns its `X509` and frees it in deinit; never mutated after init.
public final class X509Certificate: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The certificate's DER encoding, as given.
    public let der: [UInt8]
    /// Validity window in milliseconds since the UNIX epoch (certificates have whole seconds).
    /// OpenSSL's rule, followed everywhere here: valid at t when `notBeforeMs <= t < notAfterMs`.
    public let notBeforeMs: Int64
    public let notAfterMs: Int64

    /// Parses one DER certificate. Trailing bytes after it are refused.
    public init(der: [UInt8]) throws(CryptoError) {
        var consumed = 0
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let x = d2i_X509(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return x
        }
        guard let parsed else { throw CryptoError.openSSL("parse certificate") }
        guard consumed == der.count else {
            X509_free(parsed)
            throw CryptoError("parse certificate", "trailing bytes after the certificate")
        }
        guard let notBefore = Self.epochMs(X509_get0_notBefore(parsed)),
            let notAfter = Self.epochMs(X509_get0_notAfter(parsed))
        else {
            X509_free(parsed)
            throw CryptoError.openSSL("certificate validity")
        }
        pointer = parsed
        self.der = der
        notBeforeMs = notBefore
        notAfterMs = notAfter
    }

    /// Takes ownership of a certificate built by this module.
    convenience init(taking pointer: OpaquePointer) throws(CryptoError) {
        guard let der = derBytes({ i2d_X509(pointer, $0) }) else {
            X509_free(pointer)
            throw CryptoError.openSSL("encode certificate")
        }
        X509_free(pointer)
        try self.init(der: der)
    }

    deinit { X509_free(pointer) }

    /// SHA-256 of the DER encoding.
    public var sha256Fingerprint: [UInt8] { SHA256Hash.digest(der) }

    /// Whether the certificate carries an extension with this dotted OID (critical or not).
    public func hasExtension(oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else {
            ERR_clear_error()
            return false
        }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(pointer, object, -1) >= 0
    }

    /// The subject name in RFC 2253 form (`CN=…,O=…`), for logs and `kakin verify` output.
    public var subject: String { Self.nameString(X509_get_subject_name(pointer)) }
    public var issuer: String { Self.nameString(X509_get_issuer_name(pointer)) }

    /// The P-256 subject public key (throws for any other key type).
    public func publicKey() throws(CryptoError) -> P256PublicKey { try P256PublicKey(certificate: self) }

    static func nameString(_ name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        guard X509_NAME_print_ex(bio, name, 0, kakin_XN_FLAG_RFC2253()) >= 0 else { return "" }
        return String(decoding: memoryBIOContents(bio), as: UTF8.self)
    }

    /// An `ASN1_TIME` as milliseconds since the epoch (via its distance from the epoch, so no libc
    /// time conversion is involved).
    static func epochMs(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time, let epoch = ASN1_TIME_set(nil, 0) else { return nil }
        defer { ASN1_TIME_free(epoch) }
        var days: Int32 = 0
        var seconds: Int32 = 0
        guard ASN1_TIME_diff(&days, &seconds, epoch, time) == 1 else { return nil }
        return (Int64(days) * 86_400 + Int64(seconds)) * 1000
    }
}
