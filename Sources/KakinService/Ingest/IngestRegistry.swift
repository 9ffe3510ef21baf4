import KakinCore
import KakinStorage

/// Something a store's path adds to the one apply's write, beside its core sequence (`IngestPlan`). Registered once per
/// store and path in `IngestRegistry.rows` (the path table in `docs/architecture.md`), carried out by `Ingest` in the
/// same write; a caller hands data (`IngestContext`), never a closure, so no path can forget one.
public enum IngestExtra: String, Sendable, CaseIterable {
    /// A purchase made outside the app (no account token) now owned by a customer: Set App Account Token is scheduled
    /// (`AppStoreJobs`; only when the app's App Store Server API is configured, and never for a family member's copy).
    case appAccountToken
    /// A consumable credited without the app: Finish Transaction is scheduled `serverFinish.afterSeconds` later
    /// (`Apple2026Ingest`, when the app's settings ask for it).
    case serverFinish
    /// The app sent a consumable it had sent before (409): a pending server finish ends `appSent`.
    case serverFinishAppSent
    /// A transaction naming `appTransactionId`: that app transaction belongs to the chain's owner (where a
    /// RESCIND_CONSENT is placed), and a rescission waiting for it is placed now. On every path, the app's POST too
    /// (it may be the only copy Kakin gets), so whichever copy arrives first places it.
    case appTransactionLink
    /// A CONSUMPTION_REQUEST's answer is scheduled for the purchase's owner (`AppStoreJobs`).
    case consumptionJob
    /// The notification is marked applied, with the customer and chain it named.
    case notificationState
    /// Google Play: a token not yet acknowledged, now owned, is acknowledged (and a consumable consumed) after the commit,
    /// as a durable job retried until Play's 3-day limit (`GooglePlayPurchases.acknowledgeDue`).
    case playAcknowledgement
    /// Google Play: the RTDN being applied is marked applied, with the customer it reached.
    case playNotificationState
}

/// Whether a path's write tells its changes as events (`CustomerEvents`), declared in its row of the path table.
public enum IngestEvents: String, Sendable {
    /// Every change is told.
    case always
    /// Only when the caller asks for them (`IngestContext.eventsAsked`): an import, whose team usually does not want a
    /// webhook per imported customer (`kakin import --events` asks). Without them the business numbers of the customers
    /// changed are recomputed by the caller (the rollup worker follows events).
    case whenAsked
}

/// The path table's rows: for each store and path, what it adds to the write and whether it tells events. A path
/// without a row cannot apply (`row(store:path:)` stops), and `IngestRegistryTests` fails when a path has no row or the
/// documented table and this one differ.
public enum IngestRegistry {
    public struct Row: Sendable, Hashable {
        /// The store's name in the table (`appStore`, `googlePlay`).
        public var store: String
        public var path: IngestPath
        public var extras: [IngestExtra]
        public var events: IngestEvents = .always
    }

    public static let rows: [Row] = [
        Row(store: "appStore", path: .app, extras: [.appAccountToken, .serverFinishAppSent, .appTransactionLink]),
        Row(store: "appStore", path: .receipt, extras: [.appAccountToken, .serverFinishAppSent, .appTransactionLink]),
        Row(store: "appStore", path: .receiptOlder, extras: [.appAccountToken, .appTransactionLink]),
        Row(store: "appStore", path: .notification,
            extras: [.appAccountToken, .serverFinish, .appTransactionLink, .consumptionJob, .notificationState]),
        Row(store: "appStore", path: .restore, extras: [.appAccountToken, .serverFinish, .appTransactionLink]),
        Row(store: "appStore", path: .refresh, extras: [.appAccountToken, .appTransactionLink]),
        // An imported history was finished by the app that sold it: no server finish.
        Row(store: "appStore", path: .import, extras: [.appAccountToken, .appTransactionLink], events: .whenAsked),
        Row(store: "googlePlay", path: .app, extras: [.playAcknowledgement]),
        Row(store: "googlePlay", path: .notification, extras: [.playAcknowledgement, .playNotificationState]),
    ]

    static func row(store: String, path: IngestPath) -> Row {
        guard let row = rows.first(where: { $0.store == store && $0.path == path }) else {
            preconditionFailure("path \(path) of \(store) has no row in the path table (IngestRegistry.rows)")
        }
        return row
    }
}

/// What a caller hands the one apply beside the facts: data its path's extras need, never behaviour.
public struct IngestContext: Sendable {
    /// The notification being applied (`IngestExtra.notificationState`, `.consumptionJob`).
    public var notification: NotificationContext?
    /// The Play notification being applied (`IngestExtra.playNotificationState`).
    public var playMessageId: String?
    /// The person asked for events (`kakin import --events`): only a path whose row says `IngestEvents.whenAsked` takes it.
    public var eventsAsked: Bool

    public init(notification: NotificationContext? = nil, playMessageId: String? = nil, eventsAsked: Bool = false) {
        self.notification = notification
        self.playMessageId = playMessageId
        self.eventsAsked = eventsAsked
    }

    public struct NotificationContext: Sendable {
        public var notificationUUID: String
        /// A CONSUMPTION_REQUEST's job, its customer filled in by the write.
        public var consumption: ConsumptionJob?
        /// When the consumption answer's first attempt is due (real time).
        public var firstAttemptMs: Int64

        public init(notificationUUID: String, consumption: ConsumptionJob?, firstAttemptMs: Int64) {
            self.notificationUUID = notificationUUID
            self.consumption = consumption
            self.firstAttemptMs = firstAttemptMs
        }
    }
}
