import KakinCore

/// Compact JWS / JWT (RFC 7515, 7519) assembly and decoding. Which algorithm, key and claims are accepted is
/// the caller's rule (Apple's in AppStoreSecurity, Google's in GooglePlaySecurity).
public enum CompactJWS {
    /// `base64url(header).base64url(payload).base64url(signature)`, the signature made by `sign` over the first two.
    public static func make(header: JSONValue, payloadBytes: [UInt8],
                            sign: ([UInt8]) throws(CryptoError) -> [UInt8]) throws(CryptoError) -> String {
        let signingInput = Base64.urlEncode(header.serialized()) + "." + Base64.urlEncode(payloadBytes)
        let signature = try sign(Array(signingInput.utf8))
        return signingInput + "." + Base64.urlEncode(signature)
    }
}

/// A compact JWT split and decoded, not yet verified.
public struct DecodedJWT: Sendable {
    /// The header, a JSON object.
    public var header: JSONValue
    /// The claims, a JSON object.
    public var claims: JSONValue
    /// `header.payload`: the bytes the signature covers.
    public var signingInput: [UInt8]
    public var signature: [UInt8]

    /// Splits and decodes `token`; nil when it is not three base64url parts of JSON objects or is over `bytesMax`.
    public init?(_ token: String, bytesMax: Int) {
        let bytes = Array(token.utf8)
        guard bytes.count <= bytesMax else { return nil }
        let decoded = bytes.withUnsafeBytes { buffer -> DecodedJWT? in
            guard let segments = CompactJWSSegments(buffer), let headerBytes = SegmentBase64.decode(segments.header),
                let claimBytes = SegmentBase64.decode(segments.payload), let signature = SegmentBase64.decode(segments.signature),
                let header = try? JSONParser.parse(headerBytes, depthMax: Self.depthMax), case .object = header,
                let claims = try? JSONParser.parse(claimBytes, depthMax: Self.depthMax), case .object = claims
            else { return nil }
            return DecodedJWT(header: header, claims: claims, signingInput: Array(segments.signingInput), signature: signature)
        }
        guard let decoded else { return nil }
        self = decoded
    }

    private init(header: JSONValue, claims: JSONValue, signingInput: [UInt8], signature: [UInt8]) {
        self.header = header
        self.claims = claims
        self.signingInput = signingInput
        self.signature = signature
    }

    /// Whether the header says RS256 and `key` made the signature.
    public func isSignedRS256(by key: RSAPublicKey) -> Bool {
        header["alg"]?.stringValue == "RS256" && key.isValidRS256Signature(signature, for: signingInput)
    }
}

/// A JSON Web Key Set of RSA signing keys by `kid` (Google's `oauth2/v3/certs`, the Play simulator's).
public struct JSONWebKeySet: Sendable {
    public var keys: [String: RSAPublicKey]

    public init(keys: [String: RSAPublicKey]) {
        self.keys = keys
    }

    /// Reads `{"keys": [JWK…]}`: RSA keys with a `kid` whose `use` (when present) is `sig` and `alg` (when
    /// present) RS256; other keys are skipped. Throws when the document is not a key set or a listed RSA key is broken.
    public init(json: JSONValue) throws(CryptoError) {
        guard let list = json["keys"]?.arrayValue else { throw CryptoError("JWKS", "no keys array") }
        var keys: [String: RSAPublicKey] = [:]
        for jwk in list.prefix(Self.keysMax) {
            guard jwk["kty"]?.stringValue == "RSA", let kid = jwk["kid"]?.stringValue, !kid.isEmpty,
                (jwk["use"]?.stringValue ?? "sig") == "sig", (jwk["alg"]?.stringValue ?? "RS256") == "RS256"
            else { continue }
            guard let n = jwk["n"]?.stringValue.flatMap(Base64.decode), let e = jwk["e"]?.stringValue.flatMap(Base64.decode) else {
                throw CryptoError("JWKS", "key \(kid) has no valid n or e")
            }
            keys[kid] = try RSAPublicKey(modulus: n, exponent: e)
        }
        self.keys = keys
    }

    public subscript(keyId: String) -> RSAPublicKey? { keys[keyId] }

    /// `{"keys": [JWK…]}`, sorted by `kid`.
    public var json: JSONValue {
        .object(["keys": .array(keys.sorted { $0.key < $1.key }.map { $0.value.jwk(keyId: $0.key) })])
    }
}
