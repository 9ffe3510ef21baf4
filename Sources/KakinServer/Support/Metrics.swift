import KakinCore
import Synchronization

/// Counters exposed at `GET /metrics` in Prometheus text format.
public final class Metrics: Sendable {
    public enum Counter: String, CaseIterable, Sendable {
        case purchasesApplied = "kakin_purchases_applied_total"
        case purchasesDuplicate = "kakin_purchases_duplicate_total"
        case spends = "kakin_spends_total"
        case grants = "kakin_grants_total"
        case notificationsReceived = "kakin_notifications_received_total"
        case notificationsApplied = "kakin_notifications_applied_total"
        case notificationsFailed = "kakin_notifications_failed_total"
        case offersSigned = "kakin_offers_signed_total"
        case consumptionAnswersSent = "kakin_consumption_answers_sent_total"
        case consumptionAnswersNotSent = "kakin_consumption_answers_not_sent_total"

        var help: String {
            switch self {
            case .purchasesApplied: return "Transactions applied for the first time (201)."
            case .purchasesDuplicate: return "Transactions presented again (409)."
            case .spends: return "Coin spends committed."
            case .grants: return "Free-coin grants committed."
            case .notificationsReceived: return "App Store notifications stored."
            case .notificationsApplied: return "App Store notifications applied."
            case .notificationsFailed: return "Notification processing attempts that failed (and will be retried)."
            case .offersSigned: return "Offer signatures and eligibility JWS handed out (refusals are in kakin_errors_total)."
            case .consumptionAnswersSent: return "Answers to CONSUMPTION_REQUEST the App Store accepted."
            case .consumptionAnswersNotSent: return "Answers to CONSUMPTION_REQUEST given up (12 hours passed, or refused by the App Store)."
            }
        }
    }

    struct Values {
        var responsesByClass = [Int64](repeating: 0, count: 5)
        var errors: [ErrorKind: Int64] = [:]
        var verificationFailures: [VerificationCode: Int64] = [:]
        var counters: [Counter: Int64] = [:]
    }

    let values = Mutex(Values())

    public init() {}

    public func increment(_ counter: Counter, by n: Int64 = 1) { values.withLock { $0.counters[counter, default: 0] += n } }

    public func value(_ counter: Counter) -> Int64 { values.withLock { $0.counters[counter] ?? 0 } }

    func count(status: Int) {
        let i = min(max(status / 100 - 1, 0), 4)
        values.withLock { $0.responsesByClass[i] += 1 }
    }

    func countError(_ kind: ErrorKind) { values.withLock { $0.errors[kind, default: 0] += 1 } }

    func countVerificationFailure(_ code: VerificationCode) { values.withLock { $0.verificationFailures[code, default: 0] += 1 } }

    public func prometheusText() -> String {
        let v = values.withLock { $0 }
        var out = "# HELP kakin_http_responses_total HTTP responses by status class.\n# TYPE kakin_http_responses_total counter\n"
        for (i, n) in v.responsesByClass.enumerated() { out += "kakin_http_responses_total{class=\"\(i + 1)xx\"} \(n)\n" }
        out += "# HELP kakin_errors_total Errors answered, by catalogue ID.\n# TYPE kakin_errors_total counter\n"
        for kind in ErrorKind.allCases { if let n = v.errors[kind] { out += "kakin_errors_total{id=\"\(kind.id)\",code=\"\(kind.code)\"} \(n)\n" } }
        out += "# HELP kakin_verification_failures_total Signed data refused, by verification code.\n# TYPE kakin_verification_failures_total counter\n"
        for code in VerificationCode.allCases { out += "kakin_verification_failures_total{code=\"\(code.rawValue)\"} \(v.verificationFailures[code] ?? 0)\n" }
        for c in Counter.allCases { out += "# HELP \(c.rawValue) \(c.help)\n# TYPE \(c.rawValue) counter\n\(c.rawValue) \(v.counters[c] ?? 0)\n" }
        return out
    }
}
