import AppStoreSecurity
import HTTPServer
import KakinAdmin
import KakinCore
import KakinStorage
import KakinSystem
import Synchronization

/// The composition of Kakin's HTTP API: each route validates its input, calls the pure core and the
/// store, and maps `KakinError` to the contract's error body. Knows every piece; no piece knows it.
public final class KakinApp: Sendable {
    public struct Settings: Sendable {
        public var apps: [Configuration.App]
        public var wallet: WalletPolicy
        public var transferPolicy: TransferPolicy
        public var auth: Configuration.Auth?
        /// Trusted roots for app receipts' signatures; nil: receipts are read without a signature check.
        public var appReceiptRootsDER: [[UInt8]]? = nil
        /// Whether Kakin listens on a loopback address (admin session cookies then go without `Secure`).
        public var listensOnLoopback: Bool
        /// Processing attempts before a notification is given up on (`dead`); see `NotificationRetryPolicy`.
        public var notificationAttemptsMax: Int

        public init(apps: [Configuration.App], wallet: WalletPolicy = WalletPolicy(), transferPolicy: TransferPolicy = .keepFirstOwner,
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

    public let store: KakinStore
    public let verifier: SignedDataVerifier
    public let clock: any Clock
    public let logger: Logger
    public let metrics = Metrics()
    /// Applies stored notifications in the background.
    public let notificationWorker = BackgroundLoop(pollIntervalMs: 1000)
    /// This process's share of the background work when several processes run on one database.
    let claims = NotificationClaims()
    /// Makes the calls Kakin owes the App Store: answers to CONSUMPTION_REQUESTs, app account tokens (woken when
    /// one is scheduled, polling for retries; `AppStoreJobs.swift`).
    public let appStoreJobsWorker = BackgroundLoop(pollIntervalMs: 15_000)
    /// Schedules processing retries in real time, whatever clock the business logic runs on.
    let retryClock: any Clock
    /// Writes the errors this process answered to the database, for support lookups by request ID.
    let recentErrorFlusher = BackgroundLoop(pollIntervalMs: 1000)
    /// Set once the App Store Server API is configured (local mode: when the simulator's port is known).
    let appStoreAPI = Mutex<AppStoreConnection?>(nil)
    /// The key offers are signed with (`offerSigning`, else the App Store Server API's), once known.
    let offerSigner = Mutex<OfferSigner?>(nil)
    let settings: Settings
    let appsByBundle: [String: Configuration.App]
    /// Every group of every app's catalog, for eligibility answers.
    let mergedCatalog: Catalog
    let authenticator: Authenticator
    /// Built once at the end of init (its handlers capture the app, so it can't be a plain `let`).
    private let router = Mutex(Router())
    /// The support desk (`/admin/`, `/v1/admin/…` reads, recent errors, reports); built at the end of init.
    private let deskBox = Mutex<SupportDesk?>(nil)
    var desk: SupportDesk { deskBox.withLock { $0! } }

    public init(store: KakinStore, verifier: SignedDataVerifier, settings: Settings, clock: any Clock, logger: Logger,
                retryClock: (any Clock)? = nil, extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) {
        self.store = store
        self.retryClock = retryClock ?? SystemClock()
        self.verifier = verifier
        self.settings = settings
        self.clock = clock
        self.logger = logger
        self.appsByBundle = Dictionary(settings.apps.map { ($0.bundleId, $0) }, uniquingKeysWith: { a, _ in a })
        var merged = Catalog()
        for app in settings.apps { for p in app.catalog.sortedProducts { merged.upsert(p) } }
        self.mergedCatalog = merged
        self.authenticator = Authenticator(auth: settings.auth, clock: clock)
        let desk = makeSupportDesk()
        deskBox.withLock { $0 = desk }
        var table = RouteTable(metrics: metrics)
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

    /// Wraps a route body: errors become the contract's error body, and are logged with their ID.
    func run(_ request: HTTPRequest, _ body: () async throws(KakinError) -> HTTPResponse) async -> HTTPResponse {
        do {
            return try await body()
        } catch {
            return errorResponse(error, for: request)
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
}
