import KakinCore
import KakinCrypto

/// Bearer JWTs of the App Store Server API (reference §6.1): created by Kakin's API client from an
/// In-App Purchase key (`.p8`), and checked by Kakin's App Store simulator the way Apple checks them.
public enum AppStoreServerAPIToken {
    public static let audience = "appstoreconnect-v1"

    /// Creates `{"alg":"ES256","kid":…,"typ":"JWT"}.{"iss","iat","exp","aud","bid"}` signed by `key`.
    /// - Parameters:
    ///   - issuedAtSeconds: `iat`, seconds since the epoch; nil leaves it out (as Apple's library does).
    ///   - expiresAtSeconds: `exp`, at most 60 minutes after `iat`.
    public static func make(
        key: P256PrivateKey, keyId: String, issuerId: String, bundleId: String, issuedAtSeconds: Int64?,
        expiresAtSeconds: Int64
    ) throws(CryptoError) -> String {
        let header: JSONValue = ["alg": "ES256", "kid": .string(keyId), "typ": "JWT"]
        var claims: [String: JSONValue] = [
            "iss": .string(issuerId), "exp": .int(expiresAtSeconds), "aud": .string(audience), "bid": .string(bundleId),
        ]
        if let issuedAtSeconds { claims["iat"] = .int(issuedAtSeconds) }
        return try CompactJWS.make(header: header, payloadBytes: JSONValue.object(claims).serialized(), sign: key.signES256)
    }
}

/// Why an App Store Server API token was refused (the simulator answers 401 for every one).
public struct APITokenFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case malformed, unsupportedAlgorithm, unknownKey, invalidSignature, wrongIssuer, wrongAudience, wrongBundleId
        case missingExpiry, expired, lifetimeTooLong, issuedInFuture
    }

    public var reason: Reason
    public init(_ reason: Reason) { self.reason = reason }
    public var description: String { "App Store Server API token refused: \(reason.rawValue)" }
}

/// What a valid token says.
public struct APITokenClaims: Sendable, Equatable {
    public var keyId: String
    public var issuerId: String?
    public var bundleId: String
    public var issuedAtSeconds: Int64?
    public var expiresAtSeconds: Int64
}

/// Checks App Store Server API tokens as Apple does: ES256 by a known key (`kid`), `aud` exactly
/// `appstoreconnect-v1`, the expected `bid`, `exp` present, in the future and at most 60 minutes after
/// `iat` (or after now without `iat`).
public struct AppStoreServerAPITokenVerifier: Sendable {
    public struct Key: Sendable {
        public var publicKey: P256PublicKey
        /// When set, `iss` must equal it (App Store Connect ties each key to an issuer).
        public var issuerId: String?

        public init(publicKey: P256PublicKey, issuerId: String? = nil) {
            self.publicKey = publicKey
            self.issuerId = issuerId
        }
    }

    public var keys: [String: Key]
    public var bundleId: String

    /// - Parameters:
    ///   - keys: by key ID (`kid`).
    ///   - bundleId: the only `bid` accepted.
    public init(keys: [String: Key], bundleId: String) {
        self.keys = keys
        self.bundleId = bundleId
    }

    public func verify(_ token: String, nowSeconds: Int64) throws(APITokenFailure) -> APITokenClaims {
        let bytes = Array(token.utf8)
        guard bytes.count <= Self.tokenBytesMax else { throw APITokenFailure(.malformed) }
        return try bytes.withUnsafeBytes { buffer in
            Result { () throws(APITokenFailure) in try verify(buffer, nowSeconds: nowSeconds) }
        }.get()
    }

    private func verify(_ token: UnsafeRawBufferPointer, nowSeconds: Int64) throws(APITokenFailure) -> APITokenClaims {
        guard let segments = CompactJWSSegments(token), let headerBytes = SegmentBase64.decode(segments.header),
            let claimBytes = SegmentBase64.decode(segments.payload), let signature = SegmentBase64.decode(segments.signature),
            let header = try? JSONParser.parse(headerBytes, depthMax: 8), case .object = header,
            let claims = try? JSONParser.parse(claimBytes, depthMax: 8), case .object = claims
        else { throw APITokenFailure(.malformed) }
        guard header["alg"]?.stringValue == "ES256" else { throw APITokenFailure(.unsupportedAlgorithm) }
        guard let keyId = header["kid"]?.stringValue, let key = keys[keyId] else { throw APITokenFailure(.unknownKey) }
        let valid = signature.withUnsafeBytes { key.publicKey.isValidES256Signature($0, for: segments.signingInput) }
        guard valid else { throw APITokenFailure(.invalidSignature) }

        let issuer = claims["iss"]?.stringValue
        if let expected = key.issuerId, issuer != expected { throw APITokenFailure(.wrongIssuer) }
        guard claims["aud"]?.stringValue == AppStoreServerAPIToken.audience else { throw APITokenFailure(.wrongAudience) }
        guard let bid = claims["bid"]?.stringValue, bid == bundleId else { throw APITokenFailure(.wrongBundleId) }
        guard let exp = claims["exp"]?.int64Value else { throw APITokenFailure(.missingExpiry) }
        var issuedAt: Int64? = nil
        if let iat = claims["iat"], !iat.isNull {
            guard let seconds = iat.int64Value else { throw APITokenFailure(.malformed) }
            issuedAt = seconds
        }
        guard exp > nowSeconds else { throw APITokenFailure(.expired) }
        if let issuedAt, issuedAt > nowSeconds + AppStoreServerAPIToken.clockSkewSecondsMax {
            throw APITokenFailure(.issuedInFuture)
        }
        // A very early `iat` would overflow the subtraction: that lifetime is too long as well.
        let (lifetime, overflow) = exp.subtractingReportingOverflow(issuedAt ?? nowSeconds)
        guard !overflow, lifetime <= AppStoreServerAPIToken.lifetimeSecondsMax else {
            throw APITokenFailure(.lifetimeTooLong)
        }
        return APITokenClaims(keyId: keyId, issuerId: issuer, bundleId: bid, issuedAtSeconds: issuedAt, expiresAtSeconds: exp)
    }
}
