import HTTPServer
import KakinCore
import KakinStorage

/// A transaction the App Store handed back, already verified by the server.
public struct VerifiedTransaction: Sendable, Hashable {
    public var payload: TransactionPayload
    public var jws: String

    public init(payload: TransactionPayload, jws: String) {
        self.payload = payload
        self.jws = jws
    }
}

/// The support desk: what support staff see and do on `/admin/` and what scripts read at `/v1/admin/…`.
/// It reads the store directly; everything that needs the App Store, the verifier or the status engine
/// comes in as `Services` from the composition layer, so this target knows no App Store client.
public final class SupportDesk: Sendable {
    public struct Services: Sendable {
        /// The customer's status exactly as the app sees it (`GET /v1/customers/{id}`).
        public var customerStatus: @Sendable (String) async throws(KakinError) -> JSONValue
        /// Apple's Look Up Order ID, every returned transaction verified.
        public var lookUpOrder: @Sendable (String) async throws(KakinError) -> [VerifiedTransaction]
        /// Get Transaction Info (verified), for an ID Kakin has never stored.
        public var fetchTransaction: @Sendable (String) async throws(KakinError) -> VerifiedTransaction
        /// Pulls the customer's history from the App Store and applies it.
        public var restore: @Sendable (String) async throws(KakinError) -> Void
        /// Extends a subscription at the App Store (`POST /v1/admin/subscriptions/{id}/extend`'s own path):
        /// original transaction ID, days, Apple's reason by name, request identifier, who asked.
        public var extendSubscription: @Sendable (_ originalTransactionId: String, _ days: Int64?, _ reason: String,
                                                  _ requestIdentifier: String, _ actor: String) async throws(KakinError) -> Void
        /// Runs the notification inbox once (after a replay, so the page shows the outcome).
        public var processNotifications: @Sendable () async -> Void
        /// Logs (and records) an error a page answered.
        public var logError: @Sendable (KakinError, HTTPRequest) -> Void

        public init(customerStatus: @escaping @Sendable (String) async throws(KakinError) -> JSONValue,
                    lookUpOrder: @escaping @Sendable (String) async throws(KakinError) -> [VerifiedTransaction],
                    fetchTransaction: @escaping @Sendable (String) async throws(KakinError) -> VerifiedTransaction,
                    restore: @escaping @Sendable (String) async throws(KakinError) -> Void,
                    extendSubscription: @escaping @Sendable (String, Int64?, String, String, String) async throws(KakinError) -> Void,
                    processNotifications: @escaping @Sendable () async -> Void,
                    logError: @escaping @Sendable (KakinError, HTTPRequest) -> Void) {
            self.customerStatus = customerStatus
            self.lookUpOrder = lookUpOrder
            self.fetchTransaction = fetchTransaction
            self.restore = restore
            self.extendSubscription = extendSubscription
            self.processNotifications = processNotifications
            self.logError = logError
        }
    }

    public struct App: Sendable {
        public var bundleId: String
        /// IANA zone in which "as of a day" ends for the unused-balance report.
        public var reportingTimeZone: String
        /// For pricing a purchase whose transaction carries no price.
        public var catalog: Catalog

        public init(bundleId: String, reportingTimeZone: String, catalog: Catalog) {
            self.bundleId = bundleId
            self.reportingTimeZone = reportingTimeZone
            self.catalog = catalog
        }
    }

    public struct Settings: Sendable {
        /// SHA-256 of each `admin`-scope API key; nil = no authentication (local mode, loopback only): the
        /// pages open without signing in and actions are recorded as done by `local`.
        public var adminKeyHashes: Set<[UInt8]>?
        /// Kakin listens on a loopback address: session cookies go without `Secure` unless the request came
        /// through a TLS proxy (`X-Forwarded-Proto: https`).
        public var listensOnLoopback: Bool
        public var apps: [App]
        public var sessionLifetimeMs: Int64 = 8 * 3_600_000

        public init(adminKeyHashes: Set<[UInt8]>?, listensOnLoopback: Bool, apps: [App]) {
            self.adminKeyHashes = adminKeyHashes
            self.listensOnLoopback = listensOnLoopback
            self.apps = apps
        }
    }

    public let store: KakinStore
    public let clock: any Clock
    public let settings: Settings
    public let errors: RecentErrorLog
    let services: Services
    /// Local mode's form token (no sessions there): random per process, so another site can't forge a form.
    let localFormToken: String

    public init(store: KakinStore, clock: any Clock, settings: Settings, services: Services) {
        self.store = store
        self.clock = clock
        self.settings = settings
        self.services = services
        self.errors = RecentErrorLog(store: store, clock: clock)
        self.localFormToken = Tokens.random()
    }

    /// Bounds of what one page or answer holds.
    enum Limits {
        static let searchHitsMax = 50
        static let customerTransactionsMax = 500
        static let subscriptionItemsMax = 100
        static let timelinePage = 30
        static let timelinePageMax = 200
        static let ledgerPage = 20
        static let notificationsPage = 50
        static let notificationsPageMax = 200
        static let replayAllMax = 1_000
        static let reportPageRows = 5_000
    }

    var reportingZones: [String: String] { Dictionary(settings.apps.map { ($0.bundleId, $0.reportingTimeZone) }, uniquingKeysWith: { a, _ in a }) }
}
