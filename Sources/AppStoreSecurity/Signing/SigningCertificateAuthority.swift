import KakinCore
import KakinCrypto

/// A private stand-in for Apple's App Store signing chain: a P-256 root, an intermediate with Apple's
/// intermediate marker (1.2.840.113635.100.6.2.1) and a leaf with the leaf marker
/// (1.2.840.113635.100.6.11.1). Kakin's App Store simulator signs with it, and tests build broken
/// chains with its options. Apple's own library (X509_STRICT) accepts its chains.
public final class SigningCertificateAuthority: Sendable {
    /// How to build the chain. The defaults give a valid chain; tests flip one option to break it.
    public struct Options: Sendable {
        public var commonNamePrefix = "Kakin Simulator"
        /// nil: from a day before `nowMs` for 20 years (root), 15 years (intermediate), 10 years (leaf),
        /// widened to cover the window of the certificate below.
        public var rootValidity: CertificateValidity? = nil
        public var intermediateValidity: CertificateValidity? = nil
        public var leafValidity: CertificateValidity? = nil
        public var leafHasAppleMarker = true
        public var intermediateHasAppleMarker = true

        public init() {}
    }

    public let rootKey: P256PrivateKey
    public let intermediateKey: P256PrivateKey
    public let leafKey: P256PrivateKey
    public let root: X509Certificate
    public let intermediate: X509Certificate
    public let leaf: X509Certificate

    /// Generates three fresh keys and certificates.
    /// - Parameter nowMs: the time the default validity windows are counted from.
    public init(nowMs: Int64, options: Options = Options()) throws(CryptoError) {
        let dayMs: Int64 = 86_400_000
        let yearMs: Int64 = 365 * dayMs
        // Default windows start a day before now and always cover the windows below them, so that a
        // test that moves only the leaf's window gets a chain valid wherever the leaf is.
        func window(_ years: Int64, covering inner: CertificateValidity) -> CertificateValidity {
            CertificateValidity(
                notBeforeMs: min(nowMs - dayMs, inner.notBeforeMs), notAfterMs: max(nowMs + years * yearMs, inner.notAfterMs))
        }
        let leafValidity =
            options.leafValidity
            ?? CertificateValidity(notBeforeMs: nowMs - dayMs, notAfterMs: nowMs + 10 * yearMs)
        let intermediateValidity = options.intermediateValidity ?? window(15, covering: leafValidity)
        let rootValidity = options.rootValidity ?? window(20, covering: intermediateValidity)
        rootKey = try P256PrivateKey()
        intermediateKey = try P256PrivateKey()
        leafKey = try P256PrivateKey()
        root = try CertificateBuilder(
            role: .root, commonName: "\(options.commonNamePrefix) Root CA", validity: rootValidity,
            subjectKey: rootKey, markerOID: nil
        ).issue(issuer: nil, issuerKey: rootKey)
        intermediate = try CertificateBuilder(
            role: .intermediate, commonName: "\(options.commonNamePrefix) Intermediate CA",
            validity: intermediateValidity, subjectKey: intermediateKey,
            markerOID: options.intermediateHasAppleMarker ? appleIntermediateMarkerOID : nil
        ).issue(issuer: root, issuerKey: rootKey)
        leaf = try CertificateBuilder(
            role: .leaf, commonName: "\(options.commonNamePrefix) App Store Signing",
            validity: leafValidity, subjectKey: leafKey,
            markerOID: options.leafHasAppleMarker ? appleLeafMarkerOID : nil
        ).issue(issuer: intermediate, issuerKey: intermediateKey)
    }

    private init(
        rootKey: P256PrivateKey, intermediateKey: P256PrivateKey, leafKey: P256PrivateKey,
        root: X509Certificate, intermediate: X509Certificate, leaf: X509Certificate
    ) {
        self.rootKey = rootKey
        self.intermediateKey = intermediateKey
        self.leafKey = leafKey
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
    }

    /// The root certificate (DER) that verifiers must trust.
    public var rootDER: [UInt8] { root.der }

    /// The JWS `x5c` header value: standard base64 DER of leaf, intermediate, root.
    public var x5c: [String] { [leaf, intermediate, root].map { Base64.encode($0.der) } }

    /// A signer with this chain's leaf.
    public func signer() -> JWSSigner { JWSSigner(key: leafKey, x5c: x5c) }

    // MARK: Persistence

    static let exportFormat = "kakin-signing-ca-1"

    /// Keys (PKCS#8 PEM) and certificates (base64 DER) as JSON, for a simulator to persist.
    /// It holds private keys: store it like any secret.
    public func exported() throws(CryptoError) -> JSONValue {
        func part(_ key: P256PrivateKey, _ certificate: X509Certificate) throws(CryptoError) -> JSONValue {
            .object(["privateKey": .string(try key.pemPKCS8()), "certificate": .string(Base64.encode(certificate.der))])
        }
        return .object([
            "format": .string(Self.exportFormat),
            "root": try part(rootKey, root),
            "intermediate": try part(intermediateKey, intermediate),
            "leaf": try part(leafKey, leaf),
        ])
    }

    /// Restores an authority saved with `exported()`. Each key must match its certificate.
    public convenience init(exported json: JSONValue) throws(CryptoError) {
        guard json["format"]?.stringValue == Self.exportFormat else {
            throw CryptoError("load signing CA", "unknown format")
        }
        func part(_ name: String) throws(CryptoError) -> (P256PrivateKey, X509Certificate) {
            guard let pem = json[name]?["privateKey"]?.stringValue, let b64 = json[name]?["certificate"]?.stringValue,
                let der = Base64.decode(b64)
            else { throw CryptoError("load signing CA", "\(name) is incomplete") }
            let key = try P256PrivateKey(pemPKCS8: pem)
            let certificate = try X509Certificate(der: der)
            guard try certificate.publicKey().spkiDER == key.publicKey.spkiDER else {
                throw CryptoError("load signing CA", "\(name) key does not match its certificate")
            }
            return (key, certificate)
        }
        let (rootKey, root) = try part("root")
        let (intermediateKey, intermediate) = try part("intermediate")
        let (leafKey, leaf) = try part("leaf")
        self.init(
            rootKey: rootKey, intermediateKey: intermediateKey, leafKey: leafKey, root: root, intermediate: intermediate,
            leaf: leaf)
    }
}

/// Signs payloads as compact ES256 JWS with an `x5c` header, like the App Store does.
public struct JWSSigner: Sendable {
    public let key: P256PrivateKey
    public let x5c: [String]

    public init(key: P256PrivateKey, x5c: [String]) {
        self.key = key
        self.x5c = x5c
    }

    /// `{"alg":"ES256","x5c":[leaf, intermediate, root]}`.
    public var header: JSONValue { .object(["alg": "ES256", "x5c": .array(x5c.map(JSONValue.string))]) }

    /// Signs `payload` (serialised with sorted keys) with the standard header.
    public func sign(_ payload: JSONValue) throws(CryptoError) -> String {
        try sign(payloadBytes: payload.serialized(), header: header)
    }

    /// Signs exact payload bytes under any header JSON. For tests that need malformed tokens (another
    /// `alg`, two or four certificates, a missing `x5c`); the signature is always ES256 by `key`.
    public func sign(payloadBytes: [UInt8], header: JSONValue) throws(CryptoError) -> String {
        try CompactJWS.make(header: header, payloadBytes: payloadBytes, sign: key.signES256)
    }
}
