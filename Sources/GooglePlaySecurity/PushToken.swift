import KakinCore
import KakinCrypto
import Synchronization

/// What a Pub/Sub push token (the OIDC ID token in `Authorization: Bearer …` of an RTDN push) must say: Google's
/// issuer, the audience the push subscription was set up with, its service account's email, verified.
public struct PushTokenPolicy: Sendable, Equatable {
    public static let googleIssuers: Set<String> = ["https://accounts.google.com", "accounts.google.com"]
    public static let googleCertsURL = "https://www.googleapis.com/oauth2/v3/certs"

    /// The `aud` Pub/Sub was configured with (by default the push endpoint's URL).
    public var audience: String
    /// The push subscription's service account (`email`).
    public var serviceAccountEmail: String
    /// Accepted `iss` values: Google's two spellings by default; the simulator's issuer when it signs.
    public var issuers: Set<String>
    /// Tolerated clock difference for `iat` and `exp`.
    public var clockSkewSeconds: Int64
    /// Google's push tokens live one hour; longer ones are refused.
    public var lifetimeSecondsMax: Int64

    public init(audience: String, serviceAccountEmail: String, issuers: Set<String> = Self.googleIssuers,
                clockSkewSeconds: Int64 = 300, lifetimeSecondsMax: Int64 = 3600) {
        self.audience = audience
        self.serviceAccountEmail = serviceAccountEmail
        self.issuers = issuers
        self.clockSkewSeconds = clockSkewSeconds
        self.lifetimeSecondsMax = lifetimeSecondsMax
    }
}

/// Why a push token was refused. Every reason but `keysUnavailable` is a 401 (`push_token_invalid`);
/// `keysUnavailable` is retryable (503: Pub/Sub redelivers).
public struct PushTokenFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: String, Sendable, CaseIterable {
        case missing, malformed, unsupportedAlgorithm, unknownKey, invalidSignature, wrongIssuer, wrongAudience
        case wrongEmail, emailNotVerified, expired, issuedInFuture, lifetimeTooLong, keysUnavailable
    }

    public var reason: Reason
    public init(_ reason: Reason) { self.reason = reason }

    public var isRetryable: Bool { reason == .keysUnavailable }
    /// The catalogue's error for the answer.
    public var errorKind: ErrorKind { isRetryable ? .pushTokenKeysUnavailable : .pushTokenInvalid }
    public var description: String { "push token refused: \(reason.rawValue)" }
}

/// What a valid push token says.
public struct PushTokenClaims: Sendable, Equatable {
    public var issuer: String
    public var audience: String
    public var email: String
    public var subject: String?
    public var issuedAtSeconds: Int64
    public var expiresAtSeconds: Int64
}

/// Where the signing keys come from: Google's certs URL over HTTP (`GooglePlayClient`'s `HTTPKeySetSource`), or
/// a fixed set in tests.
public protocol JSONWebKeySetSource: Sendable {
    /// Fetches the current key set once (no retries: the verifier decides when to ask again).
    func fetchKeySet() async throws(PushTokenFailure) -> JSONWebKeySet
}

/// Checks push tokens: RS256 by a key of the JWKS named by `kid`, then the policy's claims. The key set is cached
/// (one set, at most `JSONWebKeySet.keysMax` keys) for `keySetMaxAgeMs`; a `kid` not in it refetches at most once per
/// `refetchIntervalMsMin`, so forged `kid`s cannot make it hammer the certs URL. When a refetch fails the cached set is
/// used while it is younger than `keySetStaleAgeMsMax`; with no usable set the answer is `keysUnavailable` (retryable).
/// Pushes that need a fetch while one is in flight wait for it (Pub/Sub pushes concurrently: a cold cache must not
/// refuse all but the first).
public final class PushTokenVerifier: Sendable {
    public let policy: PushTokenPolicy
    let source: any JSONWebKeySetSource
    public let keySetMaxAgeMs: Int64
    public let refetchIntervalMsMin: Int64
    public let keySetStaleAgeMsMax: Int64

    struct Cache {
        var keys: JSONWebKeySet?
        var fetchedAtMs: Int64 = .min
        var lastAttemptMs: Int64 = .min
        /// The fetch in flight, which concurrent verifications join.
        var fetching: Task<JSONWebKeySet?, Never>?
    }

    private let cache = Mutex(Cache())

    public init(policy: PushTokenPolicy, source: any JSONWebKeySetSource, keySetMaxAgeMs: Int64 = 3_600_000,
                refetchIntervalMsMin: Int64 = 30_000, keySetStaleAgeMsMax: Int64 = 86_400_000) {
        precondition(keySetMaxAgeMs > 0 && refetchIntervalMsMin >= 0 && keySetStaleAgeMsMax >= keySetMaxAgeMs)
        self.policy = policy
        self.source = source
        self.keySetMaxAgeMs = keySetMaxAgeMs
        self.refetchIntervalMsMin = refetchIntervalMsMin
        self.keySetStaleAgeMsMax = keySetStaleAgeMsMax
    }

    /// Verifies the value of an `Authorization` header (`Bearer <token>`) at `nowMs`.
    public func verify(authorization: String?, nowMs: Int64) async throws(PushTokenFailure) -> PushTokenClaims {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else {
            throw PushTokenFailure(.missing)
        }
        return try await verify(token: String(authorization.dropFirst(7)), nowMs: nowMs)
    }

    /// Verifies a bare token at `nowMs`.
    public func verify(token: String, nowMs: Int64) async throws(PushTokenFailure) -> PushTokenClaims {
        guard let jwt = DecodedJWT(token, bytesMax: Self.tokenBytesMax) else { throw PushTokenFailure(.malformed) }
        guard jwt.header["alg"]?.stringValue == "RS256" else { throw PushTokenFailure(.unsupportedAlgorithm) }
        guard let kid = jwt.header["kid"]?.stringValue, !kid.isEmpty else { throw PushTokenFailure(.malformed) }
        let key = try await key(kid, nowMs: nowMs)
        guard jwt.isSignedRS256(by: key) else { throw PushTokenFailure(.invalidSignature) }
        return try Self.check(jwt.claims, policy: policy, nowSeconds: nowMs / 1000)
    }

    /// The policy's claim rules, in order; the first failing one decides.
    static func check(_ claims: JSONValue, policy: PushTokenPolicy, nowSeconds: Int64) throws(PushTokenFailure) -> PushTokenClaims {
        guard let issuer = claims["iss"]?.stringValue, policy.issuers.contains(issuer) else { throw PushTokenFailure(.wrongIssuer) }
        guard let audience = claims["aud"]?.stringValue, audience == policy.audience else { throw PushTokenFailure(.wrongAudience) }
        guard let email = claims["email"]?.stringValue, email == policy.serviceAccountEmail else { throw PushTokenFailure(.wrongEmail) }
        let verified = claims["email_verified"]
        guard verified?.boolValue == true || verified?.stringValue == "true" else { throw PushTokenFailure(.emailNotVerified) }
        guard let iat = claims["iat"]?.int64Value, let exp = claims["exp"]?.int64Value else { throw PushTokenFailure(.malformed) }
        guard exp > nowSeconds - policy.clockSkewSeconds else { throw PushTokenFailure(.expired) }
        guard iat <= nowSeconds + policy.clockSkewSeconds else { throw PushTokenFailure(.issuedInFuture) }
        let (lifetime, overflow) = exp.subtractingReportingOverflow(iat)
        guard !overflow, lifetime <= policy.lifetimeSecondsMax else { throw PushTokenFailure(.lifetimeTooLong) }
        return PushTokenClaims(issuer: issuer, audience: audience, email: email, subject: claims["sub"]?.stringValue,
                               issuedAtSeconds: iat, expiresAtSeconds: exp)
    }

    /// The key named `kid`: from the cached set while fresh, else after a fetch (see the type's rules).
    func key(_ kid: String, nowMs: Int64) async throws(PushTokenFailure) -> RSAPublicKey {
        let source = source
        let (fresh, fetch) = cache.withLock { c -> (JSONWebKeySet?, Task<JSONWebKeySet?, Never>?) in
            let fresh = c.fetchedAtMs != .min && nowMs - c.fetchedAtMs < keySetMaxAgeMs ? c.keys : nil
            if fresh?[kid] != nil { return (fresh, nil) }
            if let running = c.fetching { return (fresh, running) }
            guard c.lastAttemptMs == .min || nowMs - c.lastAttemptMs >= refetchIntervalMsMin else { return (fresh, nil) }
            c.lastAttemptMs = nowMs
            let started = Task { try? await source.fetchKeySet() }
            c.fetching = started
            return (fresh, started)
        }
        if let key = fresh?[kid] { return key }
        if let fetch {
            let fetched = await fetch.value
            cache.withLock { c in
                if c.fetching == fetch { c.fetching = nil }
                if let fetched, nowMs >= c.fetchedAtMs {
                    c.keys = fetched
                    c.fetchedAtMs = nowMs
                }
            }
            if let keys = fetched {
                guard let key = keys[kid] else { throw PushTokenFailure(.unknownKey) }
                return key
            }
        }
        // Too soon to fetch again, or the fetch failed: the set at hand serves while it is not too old.
        let usable = cache.withLock { c in c.fetchedAtMs != .min && nowMs - c.fetchedAtMs < keySetStaleAgeMsMax ? c.keys : nil }
        guard let usable else { throw PushTokenFailure(.keysUnavailable) }
        guard let key = usable[kid] else { throw PushTokenFailure(.unknownKey) }
        return key
    }
}

/// Signs push tokens the way Pub/Sub does for a push subscription with authentication: RS256, `kid`, claims
/// `iss`, `aud`, `azp` and `sub` (the service account's unique id), `email`, `email_verified`, `iat`, `exp` = `iat` + 1 h.
/// The Play simulator signs every RTDN push with one.
public struct PushTokenSigner: Sendable {
    public let key: RSAPrivateKey
    public let keyId: String
    public var issuer: String

    public init(key: RSAPrivateKey, keyId: String, issuer: String = "https://accounts.google.com") {
        self.key = key
        self.keyId = keyId
        self.issuer = issuer
    }

    /// The JWKS a verifier fetches (`certsUrl`).
    public var keySet: JSONWebKeySet { JSONWebKeySet(keys: [keyId: key.publicKey]) }

    public func sign(audience: String, email: String, subject: String, nowSeconds: Int64) throws(CryptoError) -> String {
        let header: JSONValue = ["alg": "RS256", "kid": .string(keyId), "typ": "JWT"]
        let claims: JSONValue = ["iss": .string(issuer), "aud": .string(audience), "azp": .string(subject), "sub": .string(subject),
                                 "email": .string(email), "email_verified": true, "iat": .int(nowSeconds), "exp": .int(nowSeconds + 3600)]
        return try CompactJWS.make(header: header, payloadBytes: claims.serialized(), sign: key.signRS256)
    }
}
