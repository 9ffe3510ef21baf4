import KakinCore
import KakinCrypto

/// The OAuth 2.0 JWT-bearer grant of a service account (RFC 7523), as Google's libraries make it: an RS256 JWT
/// with `kid` = `private_key_id`, `iss` = `client_email`, `scope`, `aud` = Google's token URL (whatever
/// `token_uri` says: google-auth signs that audience always), `iat`, `exp` = `iat` + 1 h.
public enum ServiceAccountAssertion {
    /// Google's token endpoint, the audience google-auth signs.
    public static let googleTokenURL = "https://oauth2.googleapis.com/token"
    /// The scope of the Google Play Developer API.
    public static let androidPublisherScope = "https://www.googleapis.com/auth/androidpublisher"
    /// `grant_type` of the form post.
    public static let grantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

    /// Signs an assertion for `account` at `nowSeconds`.
    public static func make(account: GoogleServiceAccount, scope: String = androidPublisherScope, audience: String = googleTokenURL,
                            nowSeconds: Int64) throws(CryptoError) -> String {
        let header: JSONValue = ["alg": "RS256", "typ": "JWT", "kid": .string(account.privateKeyId)]
        let claims: JSONValue = ["iss": .string(account.clientEmail), "scope": .string(scope), "aud": .string(audience),
                                 "iat": .int(nowSeconds), "exp": .int(nowSeconds + lifetimeSecondsMax)]
        return try CompactJWS.make(header: header, payloadBytes: claims.serialized(), sign: account.privateKey.signRS256)
    }
}

/// Why a token endpoint refused an assertion (the Play simulator answers `invalid_grant` with the reason).
public struct AssertionFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable {
        case malformed, unsupportedAlgorithm, unknownAccount, wrongKey, invalidSignature, wrongAudience, missingScope
        case expired, issuedInFuture, lifetimeTooLong
    }

    public var reason: Reason
    public init(_ reason: Reason) { self.reason = reason }
    public var description: String { "service-account assertion refused: \(reason.rawValue)" }
}

/// Checks assertions the way Google's token endpoint does, for the Play simulator: RS256 by the key of the
/// account named in `iss` (and `kid`, when present, that key's id), an accepted `aud`, the Developer API's
/// scope, `iat`/`exp` within an hour and the skew.
public struct ServiceAccountAssertionVerifier: Sendable {
    public struct Account: Sendable {
        public var keyId: String
        public var publicKey: RSAPublicKey
        public init(keyId: String, publicKey: RSAPublicKey) {
            self.keyId = keyId
            self.publicKey = publicKey
        }
    }

    /// By `client_email`.
    public var accounts: [String: Account]
    /// Google's token URL and the endpoint's own URL.
    public var audiences: Set<String>
    public var requiredScope: String

    public init(accounts: [String: Account], audiences: Set<String>, requiredScope: String = ServiceAccountAssertion.androidPublisherScope) {
        self.accounts = accounts
        self.audiences = audiences
        self.requiredScope = requiredScope
    }

    /// - Returns: the service account's email.
    public func verify(_ assertion: String, nowSeconds: Int64) throws(AssertionFailure) -> String {
        guard let jwt = DecodedJWT(assertion, bytesMax: ServiceAccountAssertion.bytesMax) else { throw AssertionFailure(.malformed) }
        guard jwt.header["alg"]?.stringValue == "RS256" else { throw AssertionFailure(.unsupportedAlgorithm) }
        guard let email = jwt.claims["iss"]?.stringValue, let account = accounts[email] else { throw AssertionFailure(.unknownAccount) }
        if let kid = jwt.header["kid"], kid.stringValue != account.keyId { throw AssertionFailure(.wrongKey) }
        guard jwt.isSignedRS256(by: account.publicKey) else { throw AssertionFailure(.invalidSignature) }
        guard let audience = jwt.claims["aud"]?.stringValue, audiences.contains(audience) else { throw AssertionFailure(.wrongAudience) }
        let scopes = (jwt.claims["scope"]?.stringValue ?? "").split(separator: " ").map(String.init)
        guard scopes.contains(requiredScope) else { throw AssertionFailure(.missingScope) }
        guard let iat = jwt.claims["iat"]?.int64Value, let exp = jwt.claims["exp"]?.int64Value else { throw AssertionFailure(.malformed) }
        let skew = ServiceAccountAssertion.clockSkewSecondsMax
        guard iat <= nowSeconds + skew else { throw AssertionFailure(.issuedInFuture) }
        guard exp > nowSeconds - skew else { throw AssertionFailure(.expired) }
        let (lifetime, overflow) = exp.subtractingReportingOverflow(iat)
        guard !overflow, lifetime <= ServiceAccountAssertion.lifetimeSecondsMax else { throw AssertionFailure(.lifetimeTooLong) }
        return email
    }
}
