internal import COpenSSL

/// A certificate's validity window, in ms since the epoch (certificates keep whole seconds).
public struct CertificateValidity: Sendable, Hashable {
    public var notBeforeMs: Int64
    public var notAfterMs: Int64

    public init(notBeforeMs: Int64, notAfterMs: Int64) {
        self.notBeforeMs = notBeforeMs
        self.notAfterMs = notAfterMs
    }
}

/// Builds X.509 v3 P-256 certificates for a three-level chain, with the extensions OpenSSL's X509_STRICT
/// mode asks for: SKI on CAs, AKI on issued certificates, critical basicConstraints and keyUsage.
public struct CertificateBuilder {
    public enum Role: Sendable {
        case root, intermediate, leaf
    }

    public var role: Role
    public var commonName: String
    public var validity: CertificateValidity
    public var subjectKey: P256PrivateKey
    /// A marker extension to carry (non-critical, value DER NULL, as Apple marks its chain), if any.
    public var markerOID: String?

    public init(role: Role, commonName: String, validity: CertificateValidity, subjectKey: P256PrivateKey, markerOID: String?) {
        self.role = role
        self.commonName = commonName
        self.validity = validity
        self.subjectKey = subjectKey
        self.markerOID = markerOID
    }

    /// Issues the certificate, signed by `issuerKey` under `issuer` (nil: self-signed root).
    public func issue(issuer: X509Certificate?, issuerKey: P256PrivateKey) throws(CryptoError) -> X509Certificate {
        guard let x = X509_new() else { throw CryptoError.openSSL("new certificate") }
        var owned = true
        defer { if owned { X509_free(x) } }

        guard X509_set_version(x, 2) == 1 else { throw CryptoError.openSSL("certificate version") }
        try setRandomSerial(x)
        let name = try Self.name(commonName)
        defer { X509_NAME_free(name) }
        guard X509_set_subject_name(x, name) == 1 else { throw CryptoError.openSSL("certificate subject") }
        let issuerName = issuer.map { X509_get_subject_name($0.pointer) } ?? name
        guard X509_set_issuer_name(x, issuerName) == 1 else { throw CryptoError.openSSL("certificate issuer") }
        try Self.setTime(x, validity.notBeforeMs, X509_set1_notBefore)
        try Self.setTime(x, validity.notAfterMs, X509_set1_notAfter)
        guard X509_set_pubkey(x, subjectKey.key.pointer) == 1 else { throw CryptoError.openSSL("certificate key") }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.pointer ?? x, x, nil, nil, 0)
        switch role {
        case .root:
            try add(x, &context, NID_basic_constraints, "critical,CA:TRUE")
            try add(x, &context, NID_key_usage, "critical,keyCertSign,cRLSign")
            try add(x, &context, NID_subject_key_identifier, "hash")
            try add(x, &context, NID_authority_key_identifier, "keyid:always")
        case .intermediate:
            try add(x, &context, NID_basic_constraints, "critical,CA:TRUE,pathlen:0")
            try add(x, &context, NID_key_usage, "critical,keyCertSign,cRLSign")
            try add(x, &context, NID_subject_key_identifier, "hash")
            try add(x, &context, NID_authority_key_identifier, "keyid:always")
        case .leaf:
            try add(x, &context, NID_basic_constraints, "critical,CA:FALSE")
            try add(x, &context, NID_key_usage, "critical,digitalSignature")
            try add(x, &context, NID_subject_key_identifier, "hash")
            try add(x, &context, NID_authority_key_identifier, "keyid:always")
        }
        if let markerOID { try Self.addMarker(x, oid: markerOID) }

        guard X509_sign(x, issuerKey.key.pointer, EVP_sha256()) > 0 else { throw CryptoError.openSSL("sign certificate") }
        owned = false
        return try X509Certificate(taking: x)
    }

    private func setRandomSerial(_ x: OpaquePointer) throws(CryptoError) {
        var bytes = [UInt8](repeating: 0, count: 16)
        guard RAND_bytes(&bytes, Int32(bytes.count)) == 1 else { throw CryptoError.openSSL("certificate serial") }
        bytes[0] = (bytes[0] & 0x7F) | 0x40  // positive, full length
        guard let bn = BN_bin2bn(bytes, Int32(bytes.count), nil) else { throw CryptoError.openSSL("certificate serial") }
        defer { BN_free(bn) }
        guard BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != nil else { throw CryptoError.openSSL("certificate serial") }
    }

    private func add(_ x: OpaquePointer, _ context: inout X509V3_CTX, _ nid: Int32, _ value: String) throws(CryptoError) {
        guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else { throw CryptoError.openSSL("extension \(value)") }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(x, ext, -1) == 1 else { throw CryptoError.openSSL("extension \(value)") }
    }

    private static func addMarker(_ x: OpaquePointer, oid: String) throws(CryptoError) {
        guard let object = OBJ_txt2obj(oid, 1) else { throw CryptoError.openSSL("extension \(oid)") }
        defer { ASN1_OBJECT_free(object) }
        guard let value = ASN1_OCTET_STRING_new() else { throw CryptoError.openSSL("extension \(oid)") }
        defer { ASN1_OCTET_STRING_free(value) }
        let derNull: [UInt8] = [0x05, 0x00]
        guard ASN1_OCTET_STRING_set(value, derNull, Int32(derNull.count)) == 1,
            let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, value)
        else { throw CryptoError.openSSL("extension \(oid)") }
        defer { X509_EXTENSION_free(ext) }
        guard X509_add_ext(x, ext, -1) == 1 else { throw CryptoError.openSSL("extension \(oid)") }
    }

    private static func name(_ commonName: String) throws(CryptoError) -> OpaquePointer {
        guard let name = X509_NAME_new() else { throw CryptoError.openSSL("certificate name") }
        let entries = [("C", "JP"), ("O", "Kakin"), ("CN", commonName)]
        for (field, value) in entries where X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0) != 1 {
            X509_NAME_free(name)
            throw CryptoError.openSSL("certificate name")
        }
        return name
    }

    private static func setTime(
        _ x: OpaquePointer, _ ms: Int64, _ setter: (OpaquePointer?, UnsafePointer<ASN1_TIME>?) -> Int32
    ) throws(CryptoError) {
        guard let time = ASN1_TIME_set(nil, time_t(floorDivide(ms, 1000))) else {
            throw CryptoError.openSSL("certificate validity")
        }
        defer { ASN1_TIME_free(time) }
        guard setter(x, time) == 1 else { throw CryptoError.openSSL("certificate validity") }
    }
}
