import AppStoreClient
import AppStoreSecurity
import KakinCore
import KakinEvents
import KakinMetrics
import KakinOfferings
import KakinStorage
import StoreAPITransport

/// Kakin's use cases, built once over the store, the verifier and the clocks. The HTTP routes, the support desk,
/// the commands and the whole-system simulation call these and nothing below them; each use case holds only what it
/// needs.
public final class KakinServices: Sendable {
    public struct Settings: Sendable {
        public var apps: [AppSettings]
        public var wallet: WalletPolicy
        public var transferPolicy: TransferPolicy
        /// Trusted roots for app receipts' signatures; nil: receipts are read without a signature check.
        public var appReceiptRootsDER: [[UInt8]]?
        /// Processing attempts before a notification is given up on (`dead`); see `NotificationRetryPolicy`.
        public var notificationAttemptsMax: Int
        /// Webhook endpoints and the feed's retention (`events`).
        public var events: EventsSettings
        /// How the webhook worker works (timeouts, slots, retries); tests shorten them.
        public var webhookOptions: WebhookDeliveryWorker.Options
        /// Business numbers' rate table (`exchangeRates`; nil: amounts stay per currency).
        public var exchangeRates: ExchangeRates? = nil
        /// Google Play apps (`apps[]` entries with `"store": "googlePlay"`).
        public var googlePlayApps: [GooglePlayAppSettings]

        public init(apps: [AppSettings], wallet: WalletPolicy = WalletPolicy(), transferPolicy: TransferPolicy = .keepFirstOwner,
                    appReceiptRootsDER: [[UInt8]]? = nil, notificationAttemptsMax: Int = NotificationRetryPolicy.attemptsMax,
                    events: EventsSettings = EventsSettings(), webhookOptions: WebhookDeliveryWorker.Options = WebhookDeliveryWorker.Options(),
                    exchangeRates: ExchangeRates? = nil, googlePlayApps: [GooglePlayAppSettings] = []) {
            self.exchangeRates = exchangeRates
            self.googlePlayApps = googlePlayApps
            self.apps = apps
            self.wallet = wallet
            self.transferPolicy = transferPolicy
            self.appReceiptRootsDER = appReceiptRootsDER
            self.notificationAttemptsMax = notificationAttemptsMax
            self.events = events
            self.webhookOptions = webhookOptions
        }
    }

    public let store: KakinStore
    public let verifier: SignedDataVerifier
    /// The business clock (the simulator's in local mode).
    public let clock: any Clock
    public let logger: Logger
    public let metrics: Metrics
    public let settings: Settings
    public let appsByBundle: [String: AppSettings]
    /// Every product of every app's catalog, for status and eligibility answers.
    public let catalog: Catalog
    /// The App Store Server API and the offer-signing key, once configured.
    public let appStore = AppStoreAccess()

    /// Delivers the events the use cases append (signed webhooks), and keeps the feed to its retention.
    public let webhooks: WebhookDeliveryWorker
    public let events: CustomerEvents
    /// What the events routes read (feed, a customer's events, webhook counts and deliveries).
    public let eventReads: EventReads
    public let ingest: Ingest
    public let statusReads: CustomerStatusReads
    public let notifications: NotificationInbox
    public let appStoreSync: AppStoreSync
    public let appStoreJobs: AppStoreJobs
    public let extensions: SubscriptionExtensions
    public let wallets: Wallets
    public let offers: Offers
    /// Apple's 2026 additions: Get Retention Message, RESCIND_CONSENT, the server-finish job (`Apple2026/`).
    public let retentionMessages: RetentionMessages
    public let apple2026: Apple2026Ingest
    /// Purchases outside the App Store (the web, Stripe) and Apple's external purchase tokens and reports.
    public let externalPurchases: ExternalPurchases
    /// Business numbers: rollups, overview, series, rebuild (`docs/metrics.md`).
    public let businessMetrics: BusinessMetrics
    /// Offerings, placements, experiments and their results; customer attributes.
    public let offerings: Offerings
    /// Moving in: imports of an existing app's customers, purchases and balances (`kakin import`).
    public let imports: Imports
    /// Real time: retries, leases, the App Store client's pacing (the business clock may be simulated).
    public let retryClock: any Clock
    /// The support desk's sessions and recent errors.
    public let supportRecords: SupportRecords
    /// A customer's timeline (the desk's page and the admin API).
    public let timeline: CustomerTimeline
    /// Google Play purchases and the acknowledgements Kakin owes Play (`GooglePlay/`).
    public let googlePlay: GooglePlayPurchases
    /// Google Play's real-time developer notifications: the inbox and its worker.
    public let googlePlayNotifications: GooglePlayNotifications

    /// - Parameters:
    ///   - retryClock: schedules retries in real time, whatever clock the business logic runs on.
    ///   - webhookSender: how webhooks are sent (URLSession; tests give another).
    public init(store: KakinStore, verifier: SignedDataVerifier, settings: Settings, clock: any Clock, retryClock: any Clock,
                logger: Logger, metrics: Metrics = Metrics(), webhookSender: (any WebhookSender)? = nil) {
        self.store = store
        self.verifier = verifier
        self.settings = settings
        self.clock = clock
        self.retryClock = retryClock
        self.logger = logger
        self.metrics = metrics
        let apps = Dictionary(settings.apps.map { ($0.bundleId, $0) }, uniquingKeysWith: { a, _ in a })
        appsByBundle = apps
        var merged = Catalog()
        for app in settings.apps { for p in app.catalog.sortedProducts { merged.upsert(p) } }
        // Play's products share the App Store's groupIds; an id both stores use keeps the App Store's definition.
        for app in settings.googlePlayApps { for p in app.catalog.sortedProducts where merged[p.productId] == nil { merged.upsert(p) } }
        catalog = merged
        let access = appStore
        let jobsWorker = BackgroundLoop(pollIntervalMs: 15_000)
        appStoreJobs = AppStoreJobs(store: store, access: access, apps: apps, metrics: metrics, logger: logger, clock: clock,
                                    retryClock: retryClock, worker: jobsWorker)
        let claims = NotificationClaims()
        var webhookOptions = settings.webhookOptions
        webhookOptions.retentionDays = settings.events.retentionDays
        let worker = WebhookDeliveryWorker(
            store: store, endpoints: settings.events.webhooks, sender: webhookSender ?? HTTPWebhookSender(), clock: retryClock,
            eventClock: clock, owner: claims.owner, options: webhookOptions,
            log: { level, message, metadata in logger.log(level == .error ? .error : level == .warning ? .warning : .info, message, metadata) })
        webhooks = worker
        events = CustomerEvents(catalog: merged, wake: { worker.wake() })
        eventReads = EventReads(store: store, webhooks: worker)
        let apple2026 = Apple2026Ingest(store: store, verifier: verifier, apps: apps, events: events, metrics: metrics)
        self.apple2026 = apple2026
        ingest = Ingest(store: store, verifier: verifier, catalogs: apps.mapValues(\.catalog), walletPolicy: settings.wallet,
                        transferPolicy: settings.transferPolicy, metrics: metrics,
                        setsAppAccountTokens: { access.setsAppAccountTokens(bundleId: $0) }, wakeAppStoreJobs: { jobsWorker.wake() },
                        events: events, apple2026: apple2026)
        statusReads = CustomerStatusReads(store: store, catalog: merged, clock: clock, events: events)
        let metricsSettings = MetricsSettings.from(apps: settings.apps, googlePlayApps: settings.googlePlayApps, exchangeRates: settings.exchangeRates)
        businessMetrics = BusinessMetrics(store: store, settings: metricsSettings, clock: clock, logger: logger)
        googlePlay = GooglePlayPurchases(store: store, ingest: ingest, numbers: businessMetrics, clock: clock, retryClock: retryClock, logger: logger,
                                         metrics: metrics,
                                         worker: BackgroundLoop(pollIntervalMs: 15_000))
        googlePlayNotifications = GooglePlayNotifications(store: store, purchases: googlePlay, retryClock: retryClock, logger: logger,
                                                          metrics: metrics, leaseOwner: claims.owner, worker: BackgroundLoop(pollIntervalMs: 1000))
        let reporter = ExternalPurchaseReporter(store: store, access: access, apps: apps, clock: clock, metrics: metrics, logger: logger, events: events)
        externalPurchases = ExternalPurchases(store: store, apps: apps, walletPolicy: settings.wallet, events: events, statusReads: statusReads,
                                              clock: clock, metrics: metrics, logger: logger, reporter: reporter)
        notifications = NotificationInbox(store: store, ingest: ingest, metrics: metrics, logger: logger, apps: apps, retryClock: retryClock,
                                          attemptsMax: settings.notificationAttemptsMax, claims: claims,
                                          worker: BackgroundLoop(pollIntervalMs: 1000),
                                          apple2026: apple2026,
                                          externalPurchaseToken: { json throws(KakinError) in try await reporter.unreported(notification: json) })
        appStoreSync = AppStoreSync(store: store, access: access, ingest: ingest, inbox: notifications, logger: logger, clock: clock,
                                    retryClock: retryClock, apps: apps, appReceiptRootsDER: settings.appReceiptRootsDER, leaseOwner: claims.owner)
        extensions = SubscriptionExtensions(store: store, access: access, ingest: ingest, statusReads: statusReads, apps: apps, logger: logger)
        wallets = Wallets(store: store, spendOrder: settings.wallet.spendOrder, metrics: metrics, logger: logger, events: events)
        offers = Offers(store: store, access: access, statusReads: statusReads, apps: settings.apps, catalog: merged, clock: clock, metrics: metrics)
        retentionMessages = RetentionMessages(store: store, verifier: verifier, access: access, apps: apps, catalog: merged,
                                              clock: clock, metrics: metrics, logger: logger)
        supportRecords = SupportRecords(store: store)
        timeline = CustomerTimeline(store: store)
        // Google Play rows are rejected (`google_play_not_configured`) until Play's ingest gives the resolver here.
        imports = Imports(store: store, wallets: wallets, sync: appStoreSync, numbers: businessMetrics, googlePlay: nil, clock: retryClock,
                          logger: logger, owner: claims.owner)
        offerings = Offerings(store: store, settings: Offerings.Settings(catalogs: Self.productCatalogs(merged)), catalog: merged, clock: clock,
                              events: events, metricsSettings: metricsSettings)
    }

    /// The catalogs an offering's packages are checked against: the apps' products are what the App Store sells and what
    /// purchases outside it (the web, Stripe) record. Google Play joins here with its own catalog; until one is configured,
    /// a package naming a Play product is refused (`store_catalog_not_configured`).
    static func productCatalogs(_ catalog: Catalog) -> ProductCatalogs {
        let ids = Set(catalog.sortedProducts.map(\.productId))
        return ProductCatalogs([.appStore: ids, .web: ids])
    }

    /// Points the App Store Server API client at Apple or (local mode) at the simulator; its key signs offers unless
    /// `offerSigning` named another.
    public func connectAppStoreServerAPI(_ api: AppStoreServerAPISettings) throws(KakinError) {
        try connectAppStoreServerAPI(api, transport: URLSessionTransport())
    }

    /// The same over another transport (the whole-system simulation reaches its simulator in-process).
    public func connectAppStoreServerAPI(_ api: AppStoreServerAPISettings, transport: any HTTPTransport) throws(KakinError) {
        let connection = try AppStoreConnection(api: api, apps: settings.apps, clock: clock,
                                                transport: CountingTransport(inner: transport, metrics: metrics, store: PurchaseSource.appStore,
                                                                             words: CountingTransport.appStoreWords),
                                                pacingClock: retryClock)
        try appStore.useAPIKeyForOffers(api)
        appStore.connect(connection)
    }
}
