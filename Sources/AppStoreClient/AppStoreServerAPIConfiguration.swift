import AppStoreSecurity
import KakinCore
import KakinCrypto

/// Who to call and with which In-App Purchase key, and the limits every call obeys.
public struct AppStoreServerAPIConfiguration: Sendable {
    /// Where requests go.
    public enum Server: Sendable, Equatable {
        /// Apple's hosts. Transaction lookups (info, history, statuses) ask production first and ask
        /// sandbox only when production answers 404 with `TransactionIdNotFound` (4040010) or
        /// `OriginalTransactionIdNotFound` (4040005). Every other endpoint asks production.
        case apple
        /// Apple's sandbox host only (development and TestFlight builds), no fallback.
        case appleSandbox
        /// An explicit base URL, such as the simulator's `http://127.0.0.1:PORT/simulator`. Apple's paths
        /// (`/inApps/v1/…`) are appended to it, keeping any prefix; no fallback.
        /// - Parameter environment: the environment that server answers for (results report it).
        case baseURL(String, environment: AppStoreEnvironment)
    }

    public static let productionBaseURL = "https://api.storekit.apple.com"
    public static let sandboxBaseURL = "https://api.storekit-sandbox.apple.com"

    public var issuerId: String
    public var keyId: String
    public var privateKey: P256PrivateKey
    public var bundleId: String
    public var server: Server
    /// One attempt, connection to last byte.
    public var requestTimeoutMs: Int64 = 15_000
    /// Retries after the first attempt, for retryable failures only (so at most `retriesMax + 1` attempts).
    public var retriesMax: Int = 3
    /// Backoff before retry n (0-based) is drawn from [d/2, d] with d = min(`backoffBaseMs` · 2ⁿ, `backoffMsMax`).
    public var backoffBaseMs: Int64 = 500
    public var backoffMsMax: Int64 = 8_000
    /// Longest wait for a 429's `Retry-After`; a later time fails at once with `retryAfterMs` set.
    public var rateLimitWaitMsMax: Int64 = 10_000
    /// Larger answers are abandoned (`responseTooLarge`).
    public var responseBytesMax: Int = 8 * 1024 * 1024
    /// `exp` of each request's JWT is now + this (Apple's library uses 5 minutes; Apple allows ≤ 60).
    public var tokenLifetimeSeconds: Int64 = 300

    /// - Parameters:
    ///   - issuerId: the issuer ID shown beside In-App Purchase keys in App Store Connect.
    ///   - keyId: the key's ID (the JWT's `kid`).
    ///   - privateKey: the key (`P256PrivateKey(pemPKCS8:)` of the `.p8` file).
    ///   - bundleId: the app's bundle ID (the JWT's `bid`).
    ///   - server: Apple's hosts or an explicit base URL.
    public init(issuerId: String, keyId: String, privateKey: P256PrivateKey, bundleId: String, server: Server) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.privateKey = privateKey
        self.bundleId = bundleId
        self.server = server
    }
}

/// A configuration the client refuses: a base URL it cannot use, or a limit out of range.
public struct AppStoreServerAPIConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { "invalid App Store Server API configuration: \(reason)" }
}

extension AppStoreServerAPIConfiguration {
    /// The hosts a call may use, in order; the base URL has no trailing slash.
    struct Host: Sendable, Equatable {
        var baseURL: String
        var environment: AppStoreEnvironment
    }

    static let production = Host(baseURL: productionBaseURL, environment: .production)
    static let sandbox = Host(baseURL: sandboxBaseURL, environment: .sandbox)

    func validated() throws(AppStoreServerAPIConfigurationError) -> (primary: Host, fallback: Host?) {
        func check(_ ok: Bool, _ reason: String) throws(AppStoreServerAPIConfigurationError) {
            if !ok { throw AppStoreServerAPIConfigurationError(reason: reason) }
        }
        try check(!issuerId.isEmpty && !keyId.isEmpty && !bundleId.isEmpty, "issuer ID, key ID and bundle ID are required")
        try check(requestTimeoutMs > 0 && requestTimeoutMs <= 600_000, "requestTimeoutMs must be in 1...600000")
        try check((0...10).contains(retriesMax), "retriesMax must be in 0...10")
        try check(backoffBaseMs >= 0 && backoffMsMax >= backoffBaseMs && backoffMsMax <= 600_000,
                  "backoff must satisfy 0 ≤ backoffBaseMs ≤ backoffMsMax ≤ 600000")
        try check(rateLimitWaitMsMax >= 0 && rateLimitWaitMsMax <= 3_600_000, "rateLimitWaitMsMax must be in 0...3600000")
        try check(responseBytesMax > 0, "responseBytesMax must be positive")
        try check(tokenLifetimeSeconds > 0 && tokenLifetimeSeconds <= AppStoreServerAPIToken.lifetimeSecondsMax,
                  "tokenLifetimeSeconds must be in 1...3600")
        switch server {
        case .apple: return (Self.production, Self.sandbox)
        case .appleSandbox: return (Self.sandbox, nil)
        case .baseURL(let url, let environment):
            var base = Substring(url)
            while base.hasSuffix("/") { base = base.dropLast() }
            let lowered = base.lowercased()
            try check(lowered.hasPrefix("http://") || lowered.hasPrefix("https://"), "base URL must be http:// or https://")
            let rest = base.drop { $0 != ":" }.dropFirst(3)
            try check(!rest.isEmpty && !rest.hasPrefix("/"), "base URL needs a host")
            try check(!base.contains("?") && !base.contains("#") && !base.contains(" "),
                      "base URL must not have a query, a fragment or spaces")
            return (Host(baseURL: String(base), environment: environment), nil)
        }
    }
}
