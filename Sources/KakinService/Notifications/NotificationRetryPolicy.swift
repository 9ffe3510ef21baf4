import KakinCore

/// When a notification whose processing failed is tried again, and when it is given up on (`dead`).
///
/// - A failure that retrying cannot fix — the nested signed data is refused for a reason other than
///   `retryable_failure` (bad signature, untrusted chain, wrong app or environment) — is dead at once.
/// - Anything else (the database, a retryable check, a product missing from the catalog that the operator
///   may add) is retried after 1 s, doubling to at most 10 min, and is dead after `attemptsMax` attempts
///   (24 by default: about 2.5 hours of retrying).
/// A dead notification stays stored, is counted in `/metrics` (`kakin_notification_inbox{state="dead"}`),
/// listed at `/admin/notifications?state=dead` and `GET /v1/admin/notifications?state=dead`, and is applied
/// when replayed once its cause is fixed (`POST /v1/admin/notifications/{uuid}/replay`, or the page's button).
public enum NotificationRetryPolicy {
    /// Backoff after `attempts` failed attempts: 1 s doubling to at most 10 min.
    static func retryDelayMs(afterAttempts attempts: Int) -> Int64 {
        min(delayMsMax, 1000 << Int64(min(max(attempts - 1, 0), 20)))
    }

    /// Whether a failure can never succeed by retrying the same notification as it is.
    static func isPermanent(_ kind: ErrorKind) -> Bool {
        switch kind {
        case .invalidFormat, .unsupportedAlgorithm, .untrustedCertificate, .invalidSignature, .wrongBundleID, .wrongAppAppleID,
             .wrongEnvironment:
            return true
        default:
            return false
        }
    }

    /// Whether the notification is dead after this failure (its `attempts` counted this one).
    static func isDead(after kind: ErrorKind, attempts: Int, attemptsMax: Int) -> Bool {
        isPermanent(kind) || attempts >= attemptsMax
    }
}
