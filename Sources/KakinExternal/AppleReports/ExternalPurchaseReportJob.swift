import KakinCore

/// One report on its way to Apple, as a state machine (TigerBeetle-style: an illegal transition is a crash):
///
/// ```
/// pending ──sent──▶ sent
///    │ └─429/5xx: stays pending, later attempt
///    └──400 with line-item errors──▶ failed ──correct(…)──▶ corrected ──sent──▶ sent
///                                      ▲                        │
///                                      └────400 again───────────┘
/// ```
/// A failed report keeps Apple's errors (for the support desk) and its `requestIdentifier`: Apple says to
/// "resubmit the full report using the same requestIdentifier" after a 400.
public struct ExternalPurchaseReportJob: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, CaseIterable {
        case pending, sent, failed, corrected

        /// The admin listing's three states (`?state=pending|sent|failed`): a corrected report waits like a new one.
        public var listed: String { self == .corrected ? "pending" : rawValue }
    }

    /// Waits between attempts after 429/5xx/no answer: 1 minute doubling to 6 hours (Apple's deadline is days).
    public static let retryBaseMs: Int64 = 60_000
    public static let retryMaxMs: Int64 = 6 * 3_600_000

    public internal(set) var report: ExternalPurchaseReport
    public internal(set) var state: State
    /// Attempts that got no decision (429, 5xx, timeouts) since the last decision.
    public internal(set) var retryableFailures: Int
    public internal(set) var nextAttemptMs: Int64?
    public internal(set) var sentAtMs: Int64?
    /// Apple's errors of the last refusal; kept while failed and corrected, cleared once sent.
    public internal(set) var errors: [ExternalPurchaseReportError]
    public internal(set) var failures: Int

    public init(report: ExternalPurchaseReport, createdAtMs: Int64) {
        precondition(report.status == .lineItem ? !report.lineItems.isEmpty : report.lineItems.isEmpty,
                     "LINE_ITEM reports carry line items, the other statuses none")
        self.report = report
        state = .pending
        retryableFailures = 0
        nextAttemptMs = createdAtMs
        sentAtMs = nil
        errors = []
        failures = 0
    }

    public var requestIdentifier: String { report.requestIdentifier }

    /// Whether the job sends now (`nextAttemptMs` passed, and it is pending or corrected).
    public func isDue(atMs ms: Int64) -> Bool {
        guard state == .pending || state == .corrected, let next = nextAttemptMs else { return false }
        return next <= ms
    }

    /// Apple answered 200.
    public mutating func markSent(atMs ms: Int64) {
        precondition(state == .pending || state == .corrected, "only a pending or corrected report is sent (was \(state))")
        state = .sent
        sentAtMs = ms
        nextAttemptMs = nil
        errors = []
        retryableFailures = 0
    }

    /// Apple answered 400 with errors (line items, or the report itself): nothing of it was received.
    public mutating func markRejected(_ errors: [ExternalPurchaseReportError], atMs ms: Int64) {
        precondition(state == .pending || state == .corrected, "only a pending or corrected report is refused (was \(state))")
        precondition(!errors.isEmpty, "a refusal names what is wrong")
        state = .failed
        self.errors = Array(errors.prefix(Self.errorsKeptMax))
        failures += 1
        nextAttemptMs = nil
        retryableFailures = 0
    }

    /// No decision (429, 5xx, no answer): try again later, at `retryAfterMs` when Apple named a time.
    public mutating func markRetryable(atMs ms: Int64, retryAfterMs: Int64? = nil) {
        precondition(state == .pending || state == .corrected, "only a pending or corrected report is retried (was \(state))")
        retryableFailures += 1
        var wait = Self.retryBaseMs
        for _ in 1..<min(retryableFailures, 20) where wait < Self.retryMaxMs { wait *= 2 }
        nextAttemptMs = max(retryAfterMs ?? 0, ms + min(wait, Self.retryMaxMs))
    }

    /// The fixed report (its line items rebuilt after the team fixed what Apple refused), resent with the same
    /// `requestIdentifier` for the same token. Apple's errors stay visible until it is sent.
    public mutating func correct(with corrected: ExternalPurchaseReport, atMs ms: Int64) {
        precondition(state == .failed, "only a failed report is corrected (was \(state))")
        precondition(corrected.requestIdentifier == report.requestIdentifier && corrected.externalPurchaseId == report.externalPurchaseId,
                     "a correction keeps the report's requestIdentifier and token")
        precondition(corrected.status == .lineItem ? !corrected.lineItems.isEmpty : corrected.lineItems.isEmpty,
                     "LINE_ITEM reports carry line items, the other statuses none")
        report = corrected
        state = .corrected
        nextAttemptMs = ms
    }

    public var json: JSONValue {
        var o: [String: JSONValue] = [
            "requestIdentifier": .string(report.requestIdentifier), "externalPurchaseId": .string(report.externalPurchaseId),
            "status": .string(report.status.rawValue), "state": .string(state.listed), "lineItems": .int(Int64(report.lineItems.count)),
            "failures": .int(Int64(failures)), "errors": .array(errors.map(\.json)),
        ]
        if state == .corrected { o["corrected"] = true }
        if let sentAtMs { o["sentAt"] = .string(Timestamp.rfc3339(sentAtMs)) }
        if let nextAttemptMs { o["nextAttemptAt"] = .string(Timestamp.rfc3339(nextAttemptMs)) }
        return .object(o)
    }
}

/// When Kakin must report a token, and which token a purchase is reported under (pure rules over the tokens
/// recorded for a customer).
public enum ExternalPurchaseReportSchedule {
    /// Kakin reports a token without purchases this long before Apple's UNREPORTED notification (ours).
    public static let marginMs: Int64 = 86_400_000

    /// When a token that led to no purchase is reported NO_LINE_ITEM: a custom link token once it expired (a
    /// purchase may join it until then; Apple notifies "soon after"), any other a day before Apple's 10 days.
    public static func noPurchaseReportDueMs(_ token: ExternalPurchaseToken) -> Int64 {
        if let expires = token.tokenExpirationDateMs { return expires }
        return token.unreportedNotificationMs - marginMs
    }

    /// The token a purchase at `atMs` is reported under, among the customer's recorded tokens: an active SERVICES
    /// token (the first recorded of its period), else an active ACQUISITION token, else the newest other active
    /// token (IN_APP, LINK_OUT, notice-sheet tokens). Apple: use one token per transaction, the SERVICES one when
    /// both period types are active.
    /// - Parameter tokens: in the order Kakin recorded them.
    public static func tokenForPurchase(among tokens: [ExternalPurchaseToken], atMs: Int64) -> ExternalPurchaseToken? {
        let active = tokens.filter { $0.tokenCreationDateMs <= atMs && $0.isActive(atMs: atMs) }
        if let s = active.first(where: { $0.tokenType == .services }) { return s }
        if let a = active.first(where: { $0.tokenType == .acquisition }) { return a }
        return active.filter { !($0.tokenType?.isPeriodToken ?? false) }.max { $0.tokenCreationDateMs < $1.tokenCreationDateMs }
    }

    /// Whether a token without purchases is a DUPLICATE_TOKEN: a SERVICES or ACQUISITION token of the same type
    /// and period (same creation and expiration dates: a refreshed token) as one recorded before it.
    /// - Parameter tokens: in the order Kakin recorded them.
    public static func isDuplicate(_ token: ExternalPurchaseToken, among tokens: [ExternalPurchaseToken]) -> Bool {
        guard let type = token.tokenType, type.isPeriodToken else { return false }
        for other in tokens {
            if other.externalPurchaseId == token.externalPurchaseId { return false }
            if other.tokenType == type, other.tokenCreationDateMs == token.tokenCreationDateMs,
               other.tokenExpirationDateMs == token.tokenExpirationDateMs { return true }
        }
        return false
    }
}
