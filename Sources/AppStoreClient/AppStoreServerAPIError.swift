import KakinCore

/// A failed App Store Server API call, after any retries. Never carries the bearer token, the key or a
/// response body beyond Apple's short `errorMessage`.
public struct AppStoreServerAPIError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        /// 401: Apple refused the JWT (wrong key, issuer, bundle ID, expired; Apple sends no body).
        case unauthorized
        /// Any other non-2xx answer; `httpStatus` and, when Apple sent them, `errorCode`/`errorMessage`.
        case httpError
        /// No answer within `requestTimeoutMs`.
        case timedOut
        /// No HTTP answer: connection refused, DNS, TLS, reset.
        case connectionFailed
        /// The answer exceeded `responseBytesMax`.
        case responseTooLarge
        /// A 2xx answer whose body is not the documented JSON shape.
        case invalidResponse
        /// The calling task was cancelled.
        case cancelled
        /// The request could not be made: bad argument (empty ID) or the JWT could not be signed.
        case invalidRequest
    }

    public var kind: Kind
    /// `GET /inApps/v1/transactions/…`: the method and path, no query (no secrets either way).
    public var request: String
    /// The environment of the host that gave this answer.
    public var environment: AppStoreEnvironment?
    public var httpStatus: Int?
    /// Apple's `errorCode` (for example 4040010 `TransactionIdNotFound`), when the body had one.
    public var errorCode: Int?
    public var errorMessage: String?
    /// From a 429's `Retry-After`: UNIX time in milliseconds when calling again is allowed.
    public var retryAfterMs: Int64?
    /// Attempts made on the host that gave this answer.
    public var attempts: Int
    /// Transport or decoding detail, short and free of secrets.
    public var detail: String?
    /// External Purchase Server API only: the `errors` of a 400 `SendReportErrorResponse` (line-item and report
    /// errors). Apple received nothing of the report; fix them and resend with the same `requestIdentifier`.
    public var reportErrors: [ExternalPurchaseReportError] = []

    public init(
        kind: Kind, request: String, environment: AppStoreEnvironment? = nil, httpStatus: Int? = nil,
        errorCode: Int? = nil, errorMessage: String? = nil, retryAfterMs: Int64? = nil, attempts: Int = 1,
        detail: String? = nil
    ) {
        self.kind = kind
        self.request = request
        self.environment = environment
        self.httpStatus = httpStatus
        self.errorCode = errorCode
        self.errorMessage = errorMessage
        self.retryAfterMs = retryAfterMs
        self.attempts = attempts
        self.detail = detail
    }

    /// Apple refused an external purchase report for what it says (400 with errors), as opposed to an outage.
    public var isReportRejection: Bool { httpStatus == 400 && !reportErrors.isEmpty }

    /// Worth trying again later: 429, 5xx, Apple's `…Retryable` codes, timeouts and connection failures.
    /// After a 429 wait until `retryAfterMs`.
    public var isRetryable: Bool {
        switch kind {
        case .timedOut, .connectionFailed: return true
        case .httpError:
            if let httpStatus, httpStatus == 429 || (500...599).contains(httpStatus) { return true }
            if let errorCode, AppStoreAPIErrorCode.retryable.contains(errorCode) { return true }
            return false
        case .unauthorized, .responseTooLarge, .invalidResponse, .cancelled, .invalidRequest: return false
        }
    }

    public var description: String {
        var text = "App Store Server API \(request)"
        if let environment { text += " (\(environment.rawValue))" }
        text += ": "
        switch kind {
        case .unauthorized: text += "HTTP 401, the API token was refused"
        case .httpError: text += "HTTP \(httpStatus.map(String.init) ?? "?")"
        case .timedOut: text += "timed out"
        case .connectionFailed: text += "connection failed"
        case .responseTooLarge: text += "response too large"
        case .invalidResponse: text += "invalid response"
        case .cancelled: text += "cancelled"
        case .invalidRequest: text += "invalid request"
        }
        if let errorCode { text += ", errorCode \(errorCode)" }
        if let errorMessage { text += " (\(errorMessage))" }
        if !reportErrors.isEmpty { text += ", \(reportErrors.count) report error(s), first: \(reportErrors[0])" }
        if let detail { text += ": \(detail)" }
        if let retryAfterMs { text += ", retry after \(Timestamp.rfc3339(retryAfterMs))" }
        if attempts > 1 { text += ", after \(attempts) attempts" }
        return text
    }
}

/// Apple's `errorCode` values the client acts on (reference §6.1 lists them all).
public enum AppStoreAPIErrorCode {
    public static let accountNotFoundRetryable = 4040002
    public static let appNotFoundRetryable = 4040004
    public static let originalTransactionIdNotFound = 4040005
    public static let originalTransactionIdNotFoundRetryable = 4040006
    public static let transactionIdNotFound = 4040010
    public static let subscriptionExtensionIneligible = 4030004
    public static let subscriptionMaxExtension = 4030005
    public static let familySharedSubscriptionExtensionIneligible = 4030007
    public static let statusRequestNotFound = 4040009
    public static let appTransactionDoesNotExist = 4040019
    public static let generalInternalRetryable = 5000001

    /// Codes Apple documents as retryable (besides 429 and 5xx by status).
    public static let retryable: Set<Int> = [
        accountNotFoundRetryable, appNotFoundRetryable, originalTransactionIdNotFoundRetryable, generalInternalRetryable,
    ]
    /// A 404 with one of these from production sends a transaction lookup to sandbox.
    public static let notFoundInEnvironment: Set<Int> = [transactionIdNotFound, originalTransactionIdNotFound]
}
