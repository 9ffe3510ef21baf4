import HTTPServer
import KakinCore
import KakinService
import KakinStorage

/// The support desk: what support staff see and do on `/admin/` and what scripts read at `/v1/admin/…`.
/// An adapter like the HTTP routes: its reads are queries over the store; everything it does to a customer or asks
/// of the App Store (status, restore, grant, extension, order lookup, replay) is a use case of `KakinServices`.
public final class SupportDesk: Sendable {
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
    let services: KakinServices
    /// Logs (and records) an error a page answered, as the HTTP API does.
    let logError: @Sendable (KakinError, HTTPRequest) -> Void
    /// Local mode's form token (no sessions there): random per process, so another site can't forge a form.
    let localFormToken: String

    public init(services: KakinServices, settings: Settings, logError: @escaping @Sendable (KakinError, HTTPRequest) -> Void) {
        self.store = services.store
        self.clock = services.clock
        self.settings = settings
        self.services = services
        self.logError = logError
        self.errors = RecentErrorLog(records: services.supportRecords, clock: clock)
        self.localFormToken = Tokens.random()
    }

    /// Bounds of what one page or answer holds.
    enum Limits {
        static let timelinePage = 30
        static let ledgerPage = 20
        static let notificationsPage = 50
        static let reportPageRows = 5_000
    }

    var reportingZones: [String: String] { Dictionary(settings.apps.map { ($0.bundleId, $0.reportingTimeZone) }, uniquingKeysWith: { a, _ in a }) }
}
