import GooglePlaySecurity

/// Who the client is (a service account), which app it asks about, where Google is, and every limit.
public struct GooglePlayClientConfiguration: Sendable {
    public var serviceAccount: GoogleServiceAccount
    public var packageName: String
    /// Google's `https://androidpublisher.googleapis.com/`, or the Play simulator's `http://127.0.0.1:8080/play-simulator/`
    /// (trailing slash; `androidpublisher/v3/…` is appended).
    public var apiRoot: String
    /// Each attempt, connection to last byte.
    public var requestTimeoutMs: Int64 = 15_000
    /// Attempts after the first, for retryable failures only (429, 5xx, timeouts, connection failures).
    public var retriesMax = 3
    /// Backoff before retry n is drawn from [d/2, d], d = min(`backoffBaseMs` · 2ⁿ, `backoffMsMax`).
    public var backoffBaseMs: Int64 = 500
    public var backoffMsMax: Int64 = 8_000
    /// A 429's or 503's `Retry-After` (seconds) is waited for when at most this long; otherwise the call fails at once
    /// with `retryAfterMs` so the caller can queue the job.
    public var retryAfterWaitMsMax: Int64 = 10_000
    /// A larger answer is not read.
    public var responseBytesMax = 4 * 1024 * 1024
    /// A cached access token is replaced this long before Google says it expires.
    public var tokenRefreshMarginSeconds: Int64 = 300
    /// Pages `allVoidedPurchases` reads in one call.
    public var voidedPagesMax = 50

    public static let googleAPIRoot = "https://androidpublisher.googleapis.com/"

    public init(serviceAccount: GoogleServiceAccount, packageName: String, apiRoot: String = Self.googleAPIRoot) {
        self.serviceAccount = serviceAccount
        self.packageName = packageName
        self.apiRoot = apiRoot
    }

    func validate() throws(GooglePlayAPIError) {
        func check(_ ok: Bool, _ why: String) throws(GooglePlayAPIError) {
            if !ok { throw GooglePlayAPIError(kind: .invalidRequest, request: "configuration", detail: why) }
        }
        try check(!packageName.isEmpty && packageName.utf8.count <= 255, "packageName must be 1 to 255 bytes")
        try check((apiRoot.hasPrefix("https://") || apiRoot.hasPrefix("http://")) && apiRoot.hasSuffix("/"), "apiRoot must be an http(s) URL ending in /")
        try check((1...120_000).contains(requestTimeoutMs), "requestTimeoutMs must be 1 to 120000")
        try check((0...10).contains(retriesMax), "retriesMax must be 0 to 10")
        try check(backoffBaseMs >= 0 && backoffMsMax >= backoffBaseMs && backoffMsMax <= 600_000, "backoff must satisfy 0 ≤ backoffBaseMs ≤ backoffMsMax ≤ 600000")
        try check((0...600_000).contains(retryAfterWaitMsMax), "retryAfterWaitMsMax must be 0 to 600000")
        try check((1024...(64 * 1024 * 1024)).contains(responseBytesMax), "responseBytesMax must be 1 KiB to 64 MiB")
        try check((0...3000).contains(tokenRefreshMarginSeconds), "tokenRefreshMarginSeconds must be 0 to 3000")
        try check((1...1000).contains(voidedPagesMax), "voidedPagesMax must be 1 to 1000")
    }
}

/// The one error type of the client. `request` names the API method (never a token); `reason` is Google's
/// `errors[].reason`. Retryable and refused are separate questions: a caller retries the first and never revokes
/// anything on an error that is not a refusal.
public struct GooglePlayAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// 401 even with a fresh access token.
        case unauthorized
        /// The token endpoint refused the service account's assertion (`invalid_grant`, …).
        case tokenGrantRefused
        /// 410 `purchaseTokenNoLongerValid`: the token expired more than 60 days ago. Nothing to re-read.
        case tokenNoLongerValid
        /// Any other 4xx but 429: Google refused this request (unknown token, wrong product, invalid state…).
        case refused
        /// 429 or 5xx after the retries (or a `Retry-After` longer than the client waits).
        case unavailable
        case timedOut, connectionFailed, responseTooLarge, cancelled
        /// A 2xx answer that is not the documented shape.
        case invalidResponse
        /// The call could not be made (bad configuration or argument).
        case invalidRequest
    }

    public var kind: Kind
    /// `GET purchases.subscriptionsv2.get`.
    public var request: String
    public var httpStatus: Int?
    /// Google's `errors[].reason` (`purchaseTokenNoLongerValid`, `invalid`, …) and `status`.
    public var reason: String?
    public var status: String?
    public var message: String?
    public var detail: String?
    public var attempts = 1
    /// When the answer said how long to wait (`Retry-After`), in ms from now.
    public var retryAfterMs: Int64?

    public init(kind: Kind, request: String, httpStatus: Int? = nil, detail: String? = nil) {
        self.kind = kind
        self.request = request
        self.httpStatus = httpStatus
        self.detail = detail
    }

    /// Worth trying again later: the service or the network failed, not the request.
    public var isRetryable: Bool { [.unavailable, .timedOut, .connectionFailed].contains(kind) }
    /// Google answered that this request is wrong or its purchase is gone: retrying the same call cannot help.
    public var isRefused: Bool { [.refused, .tokenNoLongerValid].contains(kind) }

    public var description: String {
        var parts = ["\(request): \(kind.rawValue)"]
        if let httpStatus { parts.append("HTTP \(httpStatus)") }
        if let reason { parts.append(reason) }
        if let message { parts.append(message) }
        if let detail { parts.append(detail) }
        return parts.joined(separator: ", ")
    }
}
