internal import COpenSSL

/// A PKCS#7 SignedData whose content is attached data (an App Store receipt's envelope), parsed by OpenSSL.
public final class PKCS7SignedData: @unchecked Sendable {
    private let pointer: UnsafeMutablePointer<PKCS7>
    /// The signed content.
    public let content: [UInt8]

    /// Why a structure was refused; the reason is for people (no key material, no content).
    public struct ParseError: Error, Sendable, Equatable {
        public var reason: String
    }

    /// Parses DER (or BER with indefinite lengths); trailing bytes are refused.
    public init(der: [UInt8]) throws(ParseError) {
        var consumed = 0
        let parsed: UnsafeMutablePointer<PKCS7>? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let p7 = d2i_PKCS7(nil, &cursor, buffer.count)
            if let cursor, let base = buffer.baseAddress { consumed = cursor - base }
            return p7
        }
        guard let parsed else {
            ERR_clear_error()
            throw ParseError(reason: "not a PKCS#7 structure (or truncated)")
        }
        guard consumed == der.count else {
            PKCS7_free(parsed)
            throw ParseError(reason: "bytes after the PKCS#7 structure")
        }
        var data: UnsafePointer<UInt8>? = nil
        var length: Int32 = 0
        guard kakin_PKCS7_signed_data_content(parsed, &data, &length) == 1, let data, length >= 0 else {
            PKCS7_free(parsed)
            throw ParseError(reason: "not PKCS#7 signed data with an attached payload")
        }
        pointer = parsed
        content = Array(UnsafeBufferPointer(start: data, count: Int(length)))
    }

    deinit { PKCS7_free(pointer) }

    /// `PKCS7_verify` with the structure's own certificates as the untrusted chain and `trustedRoots` as
    /// anchors, at `atMs` (whole seconds), accepting any key usage.
    public func verify(trustedRoots: [X509Certificate], atMs: Int64) throws(CryptoError) {
        guard !trustedRoots.isEmpty, let store = X509_STORE_new() else { throw CryptoError("verify", "no trusted root") }
        defer { X509_STORE_free(store) }
        for root in trustedRoots { X509_STORE_add_cert(store, root.pointer) }
        guard let param = X509_STORE_get0_param(store) else { throw CryptoError("verify", "no verification parameters") }
        X509_VERIFY_PARAM_set_time(param, time_t(atMs / 1000))
        X509_VERIFY_PARAM_set_purpose(param, X509_PURPOSE_ANY)
        guard PKCS7_verify(pointer, nil, store, nil, nil, PKCS7_BINARY) == 1 else { throw CryptoError.openSSL("verify") }
    }

    /// How a signed structure is encoded.
    public enum Encoding: Sendable {
        /// DER with definite lengths.
        case der
        /// BER with indefinite lengths and the content in a constructed OCTET STRING (streamed).
        case streamedBER
    }

    /// Signs `content` with `key` (whose certificate is `certificate`), carrying `certificate` and `chain`.
    public static func sign(_ content: [UInt8], key: P256PrivateKey, certificate: X509Certificate, chain: [X509Certificate],
                            encoding: Encoding) throws(CryptoError) -> [UInt8] {
        let flags = PKCS7_BINARY | (encoding == .streamedBER ? PKCS7_STREAM : 0)
        guard let stack = kakin_sk_X509_new_null() else { throw CryptoError.openSSL("signature certificates") }
        defer { kakin_sk_X509_free(stack) }
        for c in chain { _ = kakin_sk_X509_push(stack, c.pointer) }
        return try content.withUnsafeBytes { buffer in
            Result { () throws(CryptoError) -> [UInt8] in try sign(buffer, certificate, key, stack, flags, encoding) }
        }.get()
    }

    private static func sign(_ payload: UnsafeRawBufferPointer, _ certificate: X509Certificate, _ key: P256PrivateKey,
                             _ chain: OpaquePointer, _ flags: Int32, _ encoding: Encoding) throws(CryptoError) -> [UInt8] {
        guard let input = BIO_new_mem_buf(payload.baseAddress, Int32(payload.count)) else { throw CryptoError.openSSL("signed content") }
        defer { BIO_free(input) }
        guard let p7 = PKCS7_sign(certificate.pointer, key.key.pointer, chain, input, flags) else {
            throw CryptoError.openSSL("sign")
        }
        defer { PKCS7_free(p7) }
        switch encoding {
        case .der:
            guard let der = derBytes({ i2d_PKCS7(p7, $0) }) else { throw CryptoError.openSSL("encode signature") }
            return der
        case .streamedBER:
            guard let out = BIO_new(BIO_s_mem()) else { throw CryptoError.openSSL("encode signature") }
            defer { BIO_free(out) }
            guard i2d_PKCS7_bio_stream(out, p7, input, flags) == 1 else { throw CryptoError.openSSL("encode signature") }
            return memoryBIOContents(out)
        }
    }
}
