import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinCore
import KakinEvents
import KakinMetrics
import KakinService
import KakinStorage
import KakinSystem
import Synchronization

/// Kakin's HTTP API: the route table (`Routes/Routes.swift`, each route with the access it needs), thin adapters
/// that parse a request, call a use case of `KakinServices` and render its answer, and the contract's error body.
/// Knows HTTP; the use cases don't.
public final class KakinApp: Sendable {
    public struct Settings: Sendable {
        public var apps: [AppSettings]
        public var wallet: WalletPolicy
        public var transferPolicy: TransferPolicy
        public var auth: Configuration.Auth?
        /// Trusted roots for app receipts' signatures; nil: receipts are read without a signature check.
        public var appReceiptRootsDER: [[UInt8]]? = nil
        /// Whether Kakin listens on a loopback address (admin session cookies then go without `Secure`).
        public var listensOnLoopback: Bool
        /// Processing attempts before a notification is given up on (`dead`); see `NotificationRetryPolicy`.
        public var notificationAttemptsMax: Int
        /// Webhook endpoints and the feed's retention (`events`).
        public var events = EventsSettings()
        public var webhookOptions = WebhookDeliveryWorker.Options()
        /// How webhooks are sent (nil: URLSession).
        public var webhookSender: (any WebhookSender)?
        /// Business numbers' rate table (`exchangeRates`).
        public var exchangeRates: ExchangeRates?
        /// Google Play apps (`apps[]` entries with `"store": "googlePlay"`).
        public var googlePlayApps: [GooglePlayAppSettings] = []

        public init(apps: [AppSettings], wallet: WalletPolicy = WalletPolicy(), transferPolicy: TransferPolicy = .keepFirstOwner,
                    auth: Configuration.Auth? = nil, listensOnLoopback: Bool = true,
                    notificationAttemptsMax: Int = NotificationRetryPolicy.attemptsMax) {
            self.apps = apps
            self.wallet = wallet
            self.transferPolicy = transferPolicy
            self.auth = auth
            self.listensOnLoopback = listensOnLoopback
            self.notificationAttemptsMax = notificationAttemptsMax
        }
    }

    /// The use cases every route calls.
    public let services: KakinServices
    /// Writes the errors this process answered to the database, for support lookups by request ID.
    let recentErrorFlusher = BackgroundLoop(pollIntervalMs: 1000)
    let settings: Settings
    let authenticator: Authenticator
    /// Built once at the end of init (its handlers capture the app, so it can't be a plain `let`).
    private let router = Mutex(Router())
    /// The support desk (`/admin/`, `/v1/admin/…` reads, recent errors, reports); built at the end of init.
    private let deskBox = Mutex<SupportDesk?>(nil)
    var desk: SupportDesk { deskBox.withLock { $0! } }

    public var store: KakinStore { services.store }
    public var metrics: Metrics { services.metrics }
    var clock: any Clock { services.clock }
    var logger: Logger { services.logger }

    public init(store: KakinStore, verifier: SignedDataVerifier, settings: Settings, clock: any Clock, logger: Logger,
                retryClock: (any Clock)? = nil, extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) {
        self.settings = settings
        services = KakinServices(
            store: store, verifier: verifier,
            settings: KakinServices.Settings(apps: settings.apps, wallet: settings.wallet, transferPolicy: settings.transferPolicy,
                                             appReceiptRootsDER: settings.appReceiptRootsDER, notificationAttemptsMax: settings.notificationAttemptsMax,
                                             events: settings.events, webhookOptions: settings.webhookOptions, exchangeRates: settings.exchangeRates,
                                             googlePlayApps: settings.googlePlayApps),
            clock: clock, retryClock: retryClock ?? SystemClock(), logger: logger, webhookSender: settings.webhookSender)
        authenticator = Authenticator(auth: settings.auth, clock: clock)
        let desk = makeSupportDesk()
        deskBox.withLock { $0 = desk }
        var table = RouteTable(app: self)
        registerRoutes(&table)
        var r = table.router
        extraRoutes(&r)
        router.withLock { $0 = r }
    }

    /// The handler to give the HTTP server.
    public func handle(_ request: HTTPRequest) async -> HTTPResponse {
        let routes = router.withLock { $0 }
        let response = await routes.handle(request, notFound: { [self] req in
            metrics.countRequest(method: req.method, route: "unmatched", status: 404)
            return errorResponse(KakinError(.routeNotFound), for: req)
        }, methodNotAllowed: { [self] req, allowed in
            metrics.countRequest(method: req.method, route: "unmatched", status: 405)
            return errorResponse(KakinError(.methodNotAllowed, detail: allowed.joined(separator: ", ")), for: req)
        })
        metrics.count(status: response.status)
        return response
    }

    /// Answers the HTTP server's own refusals (body too large, timeouts, shutdown, overload) with the
    /// contract's body, counted in `/metrics` like every other answer (route `refused`, method unknown:
    /// the server may refuse before it has read one). Runs on the server's threads: never waits.
    public func refusal(_ rejection: HTTPServerRejection, requestId: String) -> HTTPResponse {
        let error = Self.error(for: rejection)
        metrics.countRequest(method: "-", route: "refused", status: error.httpStatus)
        metrics.count(status: error.httpStatus)
        metrics.countError(error.kind)
        return .error(error, requestId: requestId)
    }

    static func error(for rejection: HTTPServerRejection) -> KakinError {
        switch rejection {
        case .bodyTooLarge(let limit): KakinError(.bodyTooLarge, "The request body is larger than \(limit) bytes.")
        case .requestTimeout: KakinError(.requestTimeout)
        case .serviceUnavailable: KakinError(.serviceUnavailable)
        case .badRequest: KakinError(.invalidField, "The request line or path is malformed.")
        case .overloaded: KakinError(.serviceUnavailable, "The server is overloaded; retry shortly.")
        case .headersTooLarge(let limit): KakinError(.headersTooLarge, "The request line and headers are larger than \(limit) bytes.")
        case .uriTooLong(let limit): KakinError(.uriTooLong, "The request's path and query are longer than \(limit) bytes.")
        }
    }

    func errorResponse(_ error: KakinError, for request: HTTPRequest) -> HTTPResponse {
        log(error, request: request)
        return .error(error, requestId: request.requestId)
    }

    func log(_ error: KakinError, request: HTTPRequest) {
        let level: Logger.Level = error.httpStatus >= 500 ? .error : .info
        var md: [String: JSONValue] = ["error.id": .string(error.kind.id), "error.code": .string(error.kind.code),
                                       "http.method": .string(request.method), "http.path": .string(request.path),
                                       "request.id": .string(request.requestId)]
        if let d = error.detail { md["error.detail"] = .string(d) }
        logger.log(level, error.message, md)
        metrics.countError(error.kind)
        if let recent = recentError(error, request: request) { desk.errors.record(recent) }
    }

    // MARK: Background work (started by `kakin serve`, run by tests directly)

    /// Starts the workers: the notification inbox, the App Store jobs, the recent-errors flusher.
    func startWorkers() {
        let services = services
        services.notifications.worker.start { await services.notifications.processDue() }
        services.appStoreJobs.worker.start { await services.appStoreJobs.processDue() }
        services.webhooks.start()
        services.externalPurchases.reporter.start()
        services.googlePlay.start()
        services.googlePlayNotifications.start()
        services.businessMetrics.worker.start { await services.businessMetrics.processDue() }
        services.imports.worker.start { await services.imports.processDue() }
        recentErrorFlusher.start { [self] in await flushRecentErrors() }
    }

    /// Stops them after their current pass, then writes the errors still buffered.
    func stopWorkers() async {
        await services.notifications.worker.stop()
        await services.appStoreJobs.worker.stop()
        await services.webhooks.stop()
        await services.externalPurchases.reporter.stop()
        await services.googlePlay.stop()
        await services.googlePlayNotifications.stop()
        await services.businessMetrics.worker.stop()
        await services.imports.worker.stop()
        await recentErrorFlusher.stop()
        await flushRecentErrors()
    }
}
