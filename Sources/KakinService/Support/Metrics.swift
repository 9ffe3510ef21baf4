import KakinCore
import KakinStorage
import Synchronization

/// `GET /metrics` in Prometheus text format. Layout (one place, so series never collide):
/// - HTTP: `kakin_http_requests_total{method,route,status}` (route = the matched pattern, `unmatched`
///   otherwise, `refused` for the HTTP edge's own refusals), `kakin_http_responses_total{class}`, `kakin_errors_total{id,code}`.
/// - Verification: `kakin_verification_failures_total{code}`.
/// - Business counters: the `Counter` cases (`kakin_purchases_applied_total`, …, `kakin_notifications_dead_total`).
/// - Notification inbox (read from the database at scrape time, so every process reports the same):
///   `kakin_notification_inbox{state}` and `kakin_notification_inbox_oldest_age_seconds{state}` for
///   received, retrying and dead.
/// - Database: `kakin_db_commit_batch_size` (histogram of write bodies per committed transaction: group
///   commit at work), `kakin_db_write_queue_depth`; the work behind them: `kakin_db_statements_total{kind}`
///   (`write`, `read`, `transaction_control`), `kakin_db_round_trips_total` (PostgreSQL), `kakin_db_syncs_total` (SQLite).
/// - Stores' server APIs: `kakin_store_api_requests_total{store,endpoint,result}`, one per HTTP attempt (retries
///   included); store `appStore` (Google Play's joins the same family, so one alert rule covers both); result `ok`,
///   `http_<status>`, `timeout`, `connection_failed`, `too_large`, `cancelled`.
/// - Ledger: `kakin_ledger_check_ok` and `kakin_ledger_check_problems` after a ledger check ran in this process.
/// - Support desk: `kakin_recent_errors_dropped_total`.
/// Other helpers add a `Counter` case, or a labelled family beside the ones here.
public final class Metrics: Sendable {
    public enum Counter: String, CaseIterable, Sendable {
        case purchasesApplied = "kakin_purchases_applied_total"
        case purchasesDuplicate = "kakin_purchases_duplicate_total"
        case spends = "kakin_spends_total"
        case grants = "kakin_grants_total"
        case notificationsReceived = "kakin_notifications_received_total"
        case notificationsApplied = "kakin_notifications_applied_total"
        case notificationsFailed = "kakin_notifications_failed_total"
        case notificationsDead = "kakin_notifications_dead_total"
        case offersSigned = "kakin_offers_signed_total"
        case consumptionAnswersSent = "kakin_consumption_answers_sent_total"
        case consumptionAnswersNotSent = "kakin_consumption_answers_not_sent_total"
        case appAccountTokensSet = "kakin_app_account_tokens_set_total"
        case appAccountTokensNotSet = "kakin_app_account_tokens_not_set_total"
        case serverFinishesSent = "kakin_server_finishes_sent_total"
        case serverFinishesNotSent = "kakin_server_finishes_not_sent_total"
        case retentionMessagesAnswered = "kakin_retention_messages_answered_total"
        case consentRescinded = "kakin_consent_rescinded_total"
        case externalReportsSent = "kakin_external_purchase_reports_sent_total"
        case externalReportsFailed = "kakin_external_purchase_reports_failed_total"
        case externalTokensUnreported = "kakin_external_purchase_tokens_unreported_total"
        case playNotificationsReceived = "kakin_play_notifications_received_total"
        case playNotificationsRefused = "kakin_play_notifications_refused_total"
        case playNotificationsApplied = "kakin_play_notifications_applied_total"
        case playNotificationsDead = "kakin_play_notifications_dead_total"
        case playAcknowledgementsDone = "kakin_play_acknowledgements_done_total"
        case playAcknowledgementsFailed = "kakin_play_acknowledgements_failed_total"
        case playVoidedPolls = "kakin_play_voided_polls_total"
        case playVoidedPollsFailed = "kakin_play_voided_polls_failed_total"
        case playVoidedStored = "kakin_play_voided_purchases_stored_total"

        var help: String {
            switch self {
            case .purchasesApplied: return "Transactions applied for the first time (201)."
            case .purchasesDuplicate: return "Transactions presented again (409)."
            case .spends: return "Coin spends committed."
            case .grants: return "Free-coin grants committed."
            case .notificationsReceived: return "App Store notifications stored."
            case .notificationsApplied: return "App Store notifications applied."
            case .notificationsFailed: return "Notification processing attempts that failed."
            case .notificationsDead: return "Notifications given up on (moved to dead) by this process."
            case .offersSigned: return "Offer signatures and eligibility JWS handed out (refusals are in kakin_errors_total)."
            case .consumptionAnswersSent: return "Answers to CONSUMPTION_REQUEST the App Store accepted."
            case .consumptionAnswersNotSent: return "Answers to CONSUMPTION_REQUEST given up (12 hours passed, or refused by the App Store)."
            case .appAccountTokensSet: return "Purchases linked outside the app whose appAccountToken the App Store set (Set App Account Token)."
            case .appAccountTokensNotSet: return "Set App Account Token calls given up (refused by the App Store, or still failing after 24 tries)."
            case .serverFinishesSent: return "Consumables Kakin finished at the App Store (Finish Transaction) because the app never sent them (serverFinish)."
            case .serverFinishesNotSent: return "Finish Transaction calls given up (refused by the App Store, or still failing after 24 tries)."
            case .retentionMessagesAnswered: return "Get Retention Message requests answered (Retention Messaging API)."
            case .consentRescinded: return "RESCIND_CONSENT notifications recorded."
            case .externalReportsSent: return "External purchase reports Apple accepted."
            case .externalReportsFailed: return "External purchase reports Apple refused (line-item errors; listed at /v1/admin/external-purchase-reports?state=failed)."
            case .externalTokensUnreported: return "EXTERNAL_PURCHASE_TOKEN/UNREPORTED notifications: Apple held no report of a token past its deadline (an error: Kakin reports it at once)."
            case .playNotificationsReceived: return "Google Play RTDN pushes stored (a redelivered messageId is acknowledged, not counted)."
            case .playNotificationsRefused: return "Google Play RTDN pushes refused, nothing stored (not a push 400, push token 401, another package 422)."
            case .playNotificationsApplied: return "Stored Google Play notifications (pushes and voided purchases the poll found) applied."
            case .playNotificationsDead: return "Stored Google Play notifications given up on (dead) by this process."
            case .playAcknowledgementsDone: return "Google Play purchases Kakin acknowledged (or consumed) after crediting them."
            case .playAcknowledgementsFailed: return "Google Play acknowledgements given up: still failing at Play's 3-day limit (Play refunds the purchase)."
            case .playVoidedPolls: return "Runs of the Google Play voided purchases poll that read their window (one per app)."
            case .playVoidedPollsFailed: return "Runs of the Google Play voided purchases poll that failed (retried at the next pass)."
            case .playVoidedStored: return "Voided purchases the poll found and stored for the Play notification worker (not known before)."
            }
        }
    }

    struct RouteKey: Hashable {
        var method: String
        var route: String
        var status: Int
    }

    struct CallKey: Hashable {
        var store: String
        var endpoint: String
        var result: String
    }

    struct Values {
        var responsesByClass = [Int64](repeating: 0, count: 5)
        var errors: [ErrorKind: Int64] = [:]
        var verificationFailures: [VerificationCode: Int64] = [:]
        var counters: [Counter: Int64] = [:]
        var requests: [RouteKey: Int64] = [:]
        var storeCalls: [CallKey: Int64] = [:]
        /// The last ledger check in this process: its problems (0: consistent).
        var ledgerProblems: Int?
    }

    /// What is read from elsewhere at scrape time.
    public struct Sampled: Sendable {
        public var inbox: [InboxDepth]?
        public var nowMs: Int64 = 0
        public var database: DatabaseFigures?
        public var recentErrorsDropped: Int64 = 0
        /// Google Play's stored notifications and acknowledgements by state (from the database).
        public var playNotifications: [String: Int]?
        public var playAcknowledgements: [String: Int]?
        public init() {}
    }

    /// Either engine's group commit, in one shape (`kakin_db_commit_batch_size`, `kakin_db_write_queue_depth`).
    public struct DatabaseFigures: Sendable {
        public var commits: Int
        public var bodiesInCommittedBatches: Int
        /// Committed transactions per `SQLBatchSizeHistogram.bucketBounds` bucket (not cumulative).
        public var committedBatchSizeCounts: [Int]
        public var writeQueueDepth: Int
        public var work: SQLWorkCounts
        public var dialect: SQLDialect

        public init(commits: Int, bodiesInCommittedBatches: Int, committedBatchSizeCounts: [Int], writeQueueDepth: Int, work: SQLWorkCounts,
                    dialect: SQLDialect) {
            self.commits = commits
            self.bodiesInCommittedBatches = bodiesInCommittedBatches
            self.committedBatchSizeCounts = committedBatchSizeCounts
            self.writeQueueDepth = writeQueueDepth
            self.work = work
            self.dialect = dialect
        }
    }

    let values = Mutex(Values())

    public init() {}

    public func increment(_ counter: Counter, by n: Int64 = 1) { values.withLock { $0.counters[counter, default: 0] += n } }

    public func value(_ counter: Counter) -> Int64 { values.withLock { $0.counters[counter] ?? 0 } }

    public func count(status: Int) {
        let i = min(max(status / 100 - 1, 0), 4)
        values.withLock { $0.responsesByClass[i] += 1 }
    }

    public func countRequest(method: String, route: String, status: Int) {
        let key = RouteKey(method: method, route: route, status: status)
        values.withLock { v in
            if v.requests[key] != nil || v.requests.count < Self.seriesPerFamilyMax { v.requests[key, default: 0] += 1 }
        }
    }

    public func countStoreCall(store: String, endpoint: String, result: String) {
        let key = CallKey(store: store, endpoint: endpoint, result: result)
        values.withLock { v in
            if v.storeCalls[key] != nil || v.storeCalls.count < Self.seriesPerFamilyMax { v.storeCalls[key, default: 0] += 1 }
        }
    }

    /// The outcome of a ledger check run in this process (`kakin_ledger_check_ok`).
    public func recordLedgerCheck(problems: Int) { values.withLock { $0.ledgerProblems = problems } }

    public func countError(_ kind: ErrorKind) { values.withLock { $0.errors[kind, default: 0] += 1 } }

    public func countVerificationFailure(_ code: VerificationCode) { values.withLock { $0.verificationFailures[code, default: 0] += 1 } }

    public func prometheusText(_ sampled: Sampled) -> String {
        let v = values.withLock { $0 }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) { out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n" }

        family("kakin_http_requests_total", "counter", "HTTP requests answered by Kakin's own routes, by method, matched route and status.")
        for (k, n) in v.requests.sorted(by: { ($0.key.route, $0.key.method, $0.key.status) < ($1.key.route, $1.key.method, $1.key.status) }) {
            out += "kakin_http_requests_total{method=\"\(label(k.method))\",route=\"\(label(k.route))\",status=\"\(k.status)\"} \(n)\n"
        }
        family("kakin_http_responses_total", "counter", "HTTP responses by status class.")
        for (i, n) in v.responsesByClass.enumerated() { out += "kakin_http_responses_total{class=\"\(i + 1)xx\"} \(n)\n" }
        family("kakin_errors_total", "counter", "Errors answered, by catalogue ID.")
        for kind in ErrorKind.allCases { if let n = v.errors[kind] { out += "kakin_errors_total{id=\"\(kind.id)\",code=\"\(kind.code)\"} \(n)\n" } }
        family("kakin_verification_failures_total", "counter", "Signed data refused, by verification code.")
        for code in VerificationCode.allCases { out += "kakin_verification_failures_total{code=\"\(code.rawValue)\"} \(v.verificationFailures[code] ?? 0)\n" }
        for c in Counter.allCases {
            family(c.rawValue, "counter", c.help)
            out += "\(c.rawValue) \(v.counters[c] ?? 0)\n"
        }

        if let inbox = sampled.inbox {
            family("kakin_notification_inbox", "gauge", "Stored notifications waiting (received, retrying) or given up on (dead).")
            for d in inbox { out += "kakin_notification_inbox{state=\"\(d.state.rawValue)\"} \(d.count)\n" }
            family("kakin_notification_inbox_oldest_age_seconds", "gauge", "Age of the oldest notification in each state (0 when none).")
            for d in inbox {
                let age = d.oldestReceivedMs.map { max(0, sampled.nowMs - $0) / 1000 } ?? 0
                out += "kakin_notification_inbox_oldest_age_seconds{state=\"\(d.state.rawValue)\"} \(age)\n"
            }
        }

        if let counts = sampled.playNotifications {
            family("kakin_play_notifications", "gauge", "Stored Google Play notifications by state (pending: waiting or retrying).")
            for state in ["pending", "applied", "ignored", "dead"] { out += "kakin_play_notifications{state=\"\(state)\"} \(counts[state] ?? 0)\n" }
        }
        if let counts = sampled.playAcknowledgements {
            family("kakin_play_acknowledgements", "gauge", "Google Play acknowledgements Kakin owes or owed, by state (pending: not yet made).")
            for state in ["pending", "done", "expired", "failed"] { out += "kakin_play_acknowledgements{state=\"\(state)\"} \(counts[state] ?? 0)\n" }
        }

        if let db = sampled.database {
            family("kakin_db_commit_batch_size", "histogram", "Write bodies per committed database transaction (group commit).")
            var cumulative = 0
            for (bound, n) in zip(SQLBatchSizeHistogram.bucketBounds, db.committedBatchSizeCounts) {
                cumulative += n
                out += "kakin_db_commit_batch_size_bucket{le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "kakin_db_commit_batch_size_bucket{le=\"+Inf\"} \(db.commits)\n"
            out += "kakin_db_commit_batch_size_sum \(db.bodiesInCommittedBatches)\nkakin_db_commit_batch_size_count \(db.commits)\n"
            family("kakin_db_write_queue_depth", "gauge", "Writes waiting for the database's writer.")
            out += "kakin_db_write_queue_depth \(db.writeQueueDepth)\n"
            family("kakin_db_statements_total", "counter", "SQL statements run: by write bodies (re-runs included), read bodies, and the engine's transaction control.")
            out += "kakin_db_statements_total{kind=\"write\"} \(db.work.writeStatements)\n"
            out += "kakin_db_statements_total{kind=\"read\"} \(db.work.readStatements)\n"
            out += "kakin_db_statements_total{kind=\"transaction_control\"} \(db.work.transactionControlStatements)\n"
            switch db.dialect {
            case .postgresql:
                family("kakin_db_round_trips_total", "counter", "Exchanges with PostgreSQL waited for (a pipeline of statements counts once).")
                out += "kakin_db_round_trips_total \(db.work.roundTrips)\n"
            case .sqlite:
                family("kakin_db_syncs_total", "counter", "fsyncs made: one per COMMIT of a write, two per WAL checkpoint that copied frames (SQLite).")
                out += "kakin_db_syncs_total \(db.work.syncs)\n"
            }
        }

        family("kakin_store_api_requests_total", "counter", "Stores' server API HTTP attempts (retries included), by store, endpoint and result.")
        for (k, n) in v.storeCalls.sorted(by: { ($0.key.store, $0.key.endpoint, $0.key.result) < ($1.key.store, $1.key.endpoint, $1.key.result) }) {
            out += "kakin_store_api_requests_total{store=\"\(label(k.store))\",endpoint=\"\(label(k.endpoint))\",result=\"\(label(k.result))\"} \(n)\n"
        }
        if let problems = v.ledgerProblems {
            family("kakin_ledger_check_ok", "gauge", "1 when the last ledger check in this process found every balance equal to its entries, else 0.")
            out += "kakin_ledger_check_ok \(problems == 0 ? 1 : 0)\n"
            family("kakin_ledger_check_problems", "gauge", "Problems the last ledger check in this process found.")
            out += "kakin_ledger_check_problems \(problems)\n"
        }
        family("kakin_recent_errors_dropped_total", "counter", "Errors not kept for support lookups because the buffer was full.")
        out += "kakin_recent_errors_dropped_total \(sampled.recentErrorsDropped)\n"
        return out
    }

    /// Prometheus label value escaping.
    private func label(_ s: String) -> String {
        var out = ""
        for c in s {
            switch c {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(c)
            }
        }
        return out
    }
}
