import KakinCore
import KakinCrypto

/// The JWS StoreKit takes for signed App Store requests (reference §8.2), made with the In-App Purchase key
/// as Apple's library makes them (`JWSSignatureCreator`): header `{"alg":"ES256","kid","typ":"JWT"}`, claims
/// `iss`, `bid`, `aud`, `iat` (seconds) and `nonce` (a UUID) plus the feature's own; no `exp`.
public enum SignedRequestJWS {
    public enum Audience: String, Sendable, CaseIterable {
        /// `Product.PurchaseOption.promotionalOffer(_:compactJWS:)` (promotional offer V2).
        case promotionalOffer = "promotional-offer"
        /// `Product.PurchaseOption.introductoryOfferEligibility(compactJWS:)`.
        case introductoryOfferEligibility = "introductory-offer-eligibility"
    }

    /// The In-App Purchase key that signs, with the ids App Store Connect gives it.
    public struct Key: Sendable {
        public var privateKey: P256PrivateKey
        public var keyId: String
        public var issuerId: String

        public init(privateKey: P256PrivateKey, keyId: String, issuerId: String) {
            self.privateKey = privateKey
            self.keyId = keyId
            self.issuerId = issuerId
        }
    }

    /// The common claims around a feature's own, signed as a compact JWS.
    /// - Parameters:
    ///   - nonce: a fresh lowercase UUID.
    ///   - issuedAtSeconds: `iat`, seconds since the epoch.
    public static func sign(_ featureClaims: [String: JSONValue], audience: Audience, bundleId: String, key: Key, nonce: String,
                            issuedAtSeconds: Int64) throws(CryptoError) -> String {
        var claims = featureClaims
        claims["iss"] = .string(key.issuerId)
        claims["bid"] = .string(bundleId)
        claims["aud"] = .string(audience.rawValue)
        claims["iat"] = .int(issuedAtSeconds)
        claims["nonce"] = .string(nonce)
        let header: JSONValue = ["alg": "ES256", "kid": .string(key.keyId), "typ": "JWT"]
        return try CompactJWS.make(header: header, payloadBytes: JSONValue.object(claims).serialized(), sign: key.privateKey.signES256)
    }

    /// Promotional offer V2 (Apple's `PromotionalOfferV2SignatureCreator`).
    /// - Parameter transactionId: any transaction of the customer, or their `appTransactionId`; optional.
    public static func promotionalOffer(productId: String, offerIdentifier: String, transactionId: String?, bundleId: String, key: Key,
                                        nonce: String, issuedAtSeconds: Int64) throws(CryptoError) -> String {
        var claims: [String: JSONValue] = ["productId": .string(productId), "offerIdentifier": .string(offerIdentifier)]
        if let transactionId { claims["transactionId"] = .string(transactionId) }
        return try sign(claims, audience: .promotionalOffer, bundleId: bundleId, key: key, nonce: nonce, issuedAtSeconds: issuedAtSeconds)
    }

    /// Introductory offer eligibility (Apple's `IntroductoryOfferEligibilitySignatureCreator`).
    /// - Parameter transactionId: any transaction of the customer, or their `appTransactionId`; required.
    public static func introductoryOfferEligibility(productId: String, allowIntroductoryOffer: Bool, transactionId: String, bundleId: String,
                                                    key: Key, nonce: String, issuedAtSeconds: Int64) throws(CryptoError) -> String {
        let claims: [String: JSONValue] = ["productId": .string(productId), "allowIntroductoryOffer": .bool(allowIntroductoryOffer),
                                           "transactionId": .string(transactionId)]
        return try sign(claims, audience: .introductoryOfferEligibility, bundleId: bundleId, key: key, nonce: nonce,
                        issuedAtSeconds: issuedAtSeconds)
    }
}

/// Why a signed request was refused.
public struct SignedRequestFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case malformed, unsupportedAlgorithm, unknownKey, invalidSignature, wrongIssuer, wrongAudience, wrongBundleId, missingClaim
    }

    public var reason: Reason
    public init(_ reason: Reason) { self.reason = reason }
    public var description: String { "signed request refused: \(reason.rawValue)" }
}

/// What a valid signed request says: the key that signed it and its claims (`iat`, `nonce` checked present).
public struct VerifiedSignedRequest: Sendable, Equatable {
    public var keyId: String
    public var claims: JSONValue
    public var issuedAtSeconds: Int64
    public var nonce: String
}

/// Checks signed requests as the App Store would before honouring them: ES256 by one of the app's keys
/// (`kid`), the key's issuer, the expected `aud` and `bid`, and an `iat` and `nonce`. Freshness and nonce
/// reuse are the caller's business (they need a clock and memory).
public struct SignedRequestVerifier: Sendable {
    public var keys: [String: AppStoreServerAPITokenVerifier.Key]
    public var bundleId: String

    /// - Parameters:
    ///   - keys: the app's In-App Purchase keys by key ID (`kid`).
    ///   - bundleId: the only `bid` accepted.
    public init(keys: [String: AppStoreServerAPITokenVerifier.Key], bundleId: String) {
        self.keys = keys
        self.bundleId = bundleId
    }

    public func verify(_ jws: String, audience: SignedRequestJWS.Audience) throws(SignedRequestFailure) -> VerifiedSignedRequest {
        let bytes = Array(jws.utf8)
        guard bytes.count <= Self.jwsBytesMax else { throw SignedRequestFailure(.malformed) }
        return try bytes.withUnsafeBytes { buffer in
            Result { () throws(SignedRequestFailure) in try verify(buffer, audience: audience) }
        }.get()
    }

    private func verify(_ jws: UnsafeRawBufferPointer, audience: SignedRequestJWS.Audience) throws(SignedRequestFailure) -> VerifiedSignedRequest {
        guard let segments = CompactJWSSegments(jws), let headerBytes = SegmentBase64.decode(segments.header),
              let claimBytes = SegmentBase64.decode(segments.payload), let signature = SegmentBase64.decode(segments.signature),
              let header = try? JSONParser.parse(headerBytes, depthMax: 8), case .object = header,
              let claims = try? JSONParser.parse(claimBytes, depthMax: 8), case .object = claims
        else { throw SignedRequestFailure(.malformed) }
        guard header["alg"]?.stringValue == "ES256" else { throw SignedRequestFailure(.unsupportedAlgorithm) }
        guard let keyId = header["kid"]?.stringValue, let key = keys[keyId] else { throw SignedRequestFailure(.unknownKey) }
        guard signature.withUnsafeBytes({ key.publicKey.isValidES256Signature($0, for: segments.signingInput) }) else {
            throw SignedRequestFailure(.invalidSignature)
        }
        if let expected = key.issuerId, claims["iss"]?.stringValue != expected { throw SignedRequestFailure(.wrongIssuer) }
        guard claims["aud"]?.stringValue == audience.rawValue else { throw SignedRequestFailure(.wrongAudience) }
        guard claims["bid"]?.stringValue == bundleId else { throw SignedRequestFailure(.wrongBundleId) }
        guard let iat = claims["iat"]?.int64Value, let nonce = claims["nonce"]?.stringValue, !nonce.isEmpty else {
            throw SignedRequestFailure(.missingClaim)
        }
        return VerifiedSignedRequest(keyId: keyId, claims: claims, issuedAtSeconds: iat, nonce: nonce)
    }
}
