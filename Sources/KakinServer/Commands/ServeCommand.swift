import AppStoreSecurity
import AppStoreSimulator
import Dispatch
import Foundation
import HTTPServer
import KakinCore
import KakinEvents
import KakinService
import KakinPostgreSQL
import KakinSQLite
import KakinStorage
import KakinSystem

/// A running Kakin: the database, the app, the HTTP server and its background workers, stopped together.
public final class KakinRuntime: Sendable {
    public struct Options: Sendable {
        public var configuration: Configuration
        /// Trusted roots used when the configuration names none (nil = Apple Root CA - G3).
        public var defaultRootsDER: [[UInt8]]?
        public var clock: any Clock
        /// Where customer tokens and entry ids come from (random; tests may make them deterministic).
        public var ids: any IDGenerator
        public var logger: Logger
        /// How often missed notifications are looked for in Notification History (when the API is configured).
        public var recoveryIntervalMs: Int64 = 15 * 60 * 1000
        /// Whether Google Play's voided purchases are polled in the background (each app at its
        /// `voidedPurchasesPollMinutes`); tests turn it off and poll when they choose.
        public var pollsVoidedPurchases = true
        public var http: HTTPServerConfiguration
        public var extraRoutes: @Sendable (inout Router) -> Void
        /// When failed notifications are retried (real time; tests move a manual clock).
        public var notificationRetryClock: any Clock = SystemClock()
        /// Attempts before a failing notification is dead (`NotificationRetryPolicy.attemptsMax`).
        public var notificationAttemptsMax = NotificationRetryPolicy.attemptsMax
        /// How webhooks are delivered (timeouts, slots, retries; tests shorten them) and sent (nil: URLSession).
        public var webhookOptions = WebhookDeliveryWorker.Options()
        public var webhookSender: (any WebhookSender)?

        public init(configuration: Configuration, defaultRootsDER: [[UInt8]]? = nil, clock: any Clock = SystemClock(),
                    ids: (any IDGenerator)? = nil, logger: Logger = Logger(),
                    extraRoutes: @escaping @Sendable (inout Router) -> Void = { _ in }) {
            self.configuration = configuration
            self.defaultRootsDER = defaultRootsDER
            self.clock = clock
            self.ids = ids ?? RandomIDGenerator(clock: clock)
            self.logger = logger
            var http = HTTPServerConfiguration()
            http.host = configuration.host
            http.port = configuration.port
            http.bodyBytesMaxByPath = [KakinApp.importsPath: ImportLimits.fileBytesMax]
            self.http = http
            self.extraRoutes = extraRoutes
        }
    }

    public let app: KakinApp
    public let server: HTTPServer
    public let database: any SQLDatabase
    /// Reads Notification History periodically (its first pass runs at start: it heals a downtime).
    let recovery: BackgroundLoop

    public var port: Int { server.port }

    init(app: KakinApp, server: HTTPServer, database: any SQLDatabase, recovery: BackgroundLoop) {
        self.app = app
        self.server = server
        self.database = database
        self.recovery = recovery
    }

    /// Opens the database (migrating it), builds the verifier and the app, and starts listening.
    public static func start(_ options: Options) async throws -> KakinRuntime {
        LimitRelations.check(.declared)
        let config = options.configuration
        if config.auth == nil, !Configuration.isLoopback(config.host) {
            throw KakinError(.invalidConfiguration, "Refusing to listen on \(config.host) without auth: configure auth or bind a loopback address.")
        }
        let (app, database) = try await makeApp(options)
        do {
            // Endpoints take the events committed from now on: registered before the first request can change anything.
            // The business numbers' cursor too, so the outbox's retention waits for it.
            try await app.services.webhooks.prepare()
            try await app.services.businessMetrics.prepare()
            try await seedPaywalls(config.paywalls, app)
        } catch {
            await database.close()
            throw error
        }
        let server = HTTPServer(configuration: options.http, handler: { [app] req in await app.handle(req) },
                                rejectionResponder: { [app] rejection, requestId in app.refusal(rejection, requestId: requestId) })
        do {
            try server.start()
        } catch {
            await database.close()
            throw error
        }
        app.startWorkers()
        if options.pollsVoidedPurchases { app.services.googlePlayNotifications.startVoidedPoll() }
        let recovery = BackgroundLoop(pollIntervalMs: options.recoveryIntervalMs)
        if config.appStoreServerAPI != nil {
            recovery.start { [sync = app.services.appStoreSync, intervalMs = options.recoveryIntervalMs] in
                await sync.recoverMissedNotificationsInTurn(everyMs: intervalMs)
            }
        }
        return KakinRuntime(app: app, server: server, database: database, recovery: recovery)
    }

    /// The config file's `paywalls` the database does not hold yet; one the catalogs or the others refuse stops the start
    /// like any configuration error.
    static func seedPaywalls(_ seeds: [Configuration.PaywallSeed], _ app: KakinApp) async throws(KakinError) {
        do {
            _ = try await app.services.offerings.seed(seeds.map { ($0.kind, $0.id, $0.body) }, actor: "config")
        } catch {
            guard error.httpStatus == 422 else { throw error }
            throw KakinError(.invalidConfiguration, "paywalls: \(error.message)")
        }
    }

    /// The app over its migrated database, without HTTP (commands use it directly).
    static func makeApp(_ options: Options) async throws -> (KakinApp, any SQLDatabase) {
        let config = options.configuration
        let database = try openDatabase(config)
        do {
            let store = KakinStore(database: database, ids: options.ids, clock: options.clock)
            try await store.migrate()
            let roots = config.trustedRootsDER ?? options.defaultRootsDER ?? [AppleRootCertificates.appleRootCAG3]
            let verifier = try SignedDataVerifier(
                trustedRoots: roots,
                apps: config.apps.map { AppIdentity(bundleId: $0.bundleId, appAppleId: $0.appAppleId, environments: $0.environments) },
                clock: { [clock = options.clock] in clock.nowMs() })
            var settings = KakinApp.Settings(apps: config.apps, wallet: config.wallet, transferPolicy: config.transferPolicy, auth: config.auth,
                                             listensOnLoopback: Configuration.isLoopback(config.host),
                                             notificationAttemptsMax: options.notificationAttemptsMax)
            settings.appReceiptRootsDER = config.appReceiptRootsDER
            settings.events = config.events ?? EventsSettings()
            settings.webhookOptions = options.webhookOptions
            config.events?.delivery?.apply(to: &settings.webhookOptions)
            settings.webhookSender = options.webhookSender
            settings.exchangeRates = config.exchangeRates
            settings.googlePlayApps = config.googlePlayApps
            let app = KakinApp(store: store, verifier: verifier, settings: settings,
                               clock: options.clock, logger: options.logger, retryClock: options.notificationRetryClock,
                               extraRoutes: options.extraRoutes)
            if let signing = config.offerSigning {
                try app.services.appStore.configureOfferSigning(signing, apiIssuerId: config.appStoreServerAPI?.issuerId)
            }
            if let api = config.appStoreServerAPI { try app.services.connectAppStoreServerAPI(api) }
            for play in config.googlePlayApps {
                try app.services.googlePlay.connect(play)
                app.services.googlePlayNotifications.accept(play)
            }
            return (app, database)
        } catch {
            await database.close()
            throw error
        }
    }

    /// The configured database: a SQLite file, or a PostgreSQL pool (any number of Kakin processes may share it).
    static func openDatabase(_ config: Configuration) throws -> any SQLDatabase {
        switch config.database {
        case .sqlite(let path):
            return try SQLiteDatabase(path: path)
        case .postgresql(let url):
            return try PostgresDatabase(url: url, password: config.databasePassword, options: config.postgres)
        }
    }

    /// Graceful stop: finish in-flight requests, then close the database.
    public func shutdown(gracePeriodSeconds: Double = 10) async {
        await server.shutdown(gracePeriodSeconds: gracePeriodSeconds)
        await recovery.stop()
        await app.stopWorkers()
        await database.close()
    }
}

/// Waits for SIGINT or SIGTERM (graceful shutdown of long-running commands).
public enum Signals {
    public static func waitForTermination() async -> Int32 {
        signal(SIGINT, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        let queue = DispatchQueue(label: "kakin.signals")
        return await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            let once = OnceFlag()
            var sources: [DispatchSourceSignal] = []
            for sig in [SIGINT, SIGTERM] {
                let source = DispatchSource.makeSignalSource(signal: sig, queue: queue)
                source.setEventHandler {
                    if once.claim() { continuation.resume(returning: sig) }
                }
                source.resume()
                sources.append(source)
            }
            SignalSources.keep(sources)
        }
    }
}

/// Keeps signal sources alive for the process lifetime.
enum SignalSources {
    nonisolated(unsafe) static var retained: [DispatchSourceSignal] = []
    static func keep(_ s: [DispatchSourceSignal]) { retained.append(contentsOf: s) }
}

final class OnceFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if done { return false }
        done = true
        return true
    }
}

enum ServeCommand {
    static let usage = """
        usage: kakin serve [--config kakin.json] [--host H] [--port N] [--database sqlite:PATH|postgresql://…]
          With no --config: local mode — SQLite, the demo catalog, the App Store simulator under /simulator/,
          its CA trusted, loopback only, no credentials; KAKIN_WEBHOOK_URL (and KAKIN_WEBHOOK_SECRET, else one is
          generated and printed) sends every event to a webhook, e.g. `kakin events listen`'s.
        """

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["config", "host", "port", "database"])
            guard args.positionals.isEmpty else { throw ParsedArguments.UsageError(description: "unexpected argument \(args.positionals[0])") }
        } catch {
            Console.err("kakin serve: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        var config: Configuration
        var localWebhook: LocalWebhook?
        let port: Int?
        do {
            port = try args.int("port", range: 0...65535)
        } catch {
            Console.err("kakin serve: \(error)")
            return 2
        }
        do {
            if let path = args.last("config") {
                config = try Configuration.load(path: path)
            } else {
                config = LocalMode.configuration()
            }
            if let host = args.last("host") { config.host = host }
            if let port { config.port = port }
            if let db = args.last("database") { config.database = try Configuration.Database.parse(db, relativeTo: nil) }
            if !args.has("config") { localWebhook = try LocalWebhook.apply(to: &config, environment: ProcessInfo.processInfo.environment) }
        } catch {
            Console.err("kakin serve: invalid configuration: \(error)")
            return 2
        }
        let local = !args.has("config")
        let logger = Logger()
        do {
            let runtime: KakinRuntime
            var localMode: LocalMode?
            if local {
                let lm = try LocalMode(configuration: config, logger: logger)
                runtime = try await KakinRuntime.start(lm.runtimeOptions())
                try await lm.attach(to: runtime)
                localMode = lm
            } else {
                runtime = try await KakinRuntime.start(KakinRuntime.Options(configuration: config, logger: logger))
            }
            logger.info("kakin listening", ["http.url": .string("http://\(config.host):\(runtime.port)"), "mode": .string(local ? "local" : "config"),
                                            "database": .string(config.database.description)])
            if let localMode { Console.out(localMode.banner(port: runtime.port) + LocalWebhook.banner(localWebhook, base: "http://127.0.0.1:\(runtime.port)")) }
            let sig = await Signals.waitForTermination()
            logger.info("shutting down", ["signal": .int(Int64(sig))])
            await localMode?.stop()
            await runtime.shutdown()
            return 0
        } catch let error as KakinError {
            Console.err("kakin serve: \(error.message)" + (error.detail.map { " (\($0))" } ?? ""))
            return error.kind == .invalidConfiguration ? 2 : 1
        } catch {
            Console.err("kakin serve: \(error)")
            return 1
        }
    }
}

enum LedgerCommand {
    static func run(arguments: [String]) async -> Int32 {
        let usage = "usage: kakin ledger check [--config kakin.json] [--database sqlite:PATH|postgresql://…]   (exit 0 consistent, 1 not)"
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["config", "database"])
        } catch {
            Console.err("kakin ledger: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        guard args.positionals == ["check"] else {
            Console.err(usage)
            return 2
        }
        do {
            var config = Configuration()
            if let path = args.last("config") { config = try Configuration.load(path: path) }
            if let db = args.last("database") { config.database = try Configuration.Database.parse(db, relativeTo: nil) }
            let database = try KakinRuntime.openDatabase(config)
            let store = KakinStore(database: database, ids: RandomIDGenerator(), clock: SystemClock())
            try await store.migrate()
            let report = try await store.checkLedger()
            await database.close()
            Console.out(report.json.prettyString())
            return report.ok ? 0 : 1
        } catch let error as ConfigurationError {
            Console.err("kakin ledger: invalid configuration: \(error)")
            return 2
        } catch {
            Console.err("kakin ledger: \(error)")
            return 1
        }
    }
}

enum NotificationsCommand {
    static let usage = """
        usage: kakin notifications recover --config kakin.json
          Reads the App Store's Notification History since the last run (or the last 30 days) and applies
          every notification Kakin missed. Needs appStoreServerAPI in the config. Exit 0 on success.
        """

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["config"])
        } catch {
            Console.err("kakin notifications: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        guard args.positionals == ["recover"], let path = args.last("config") else {
            Console.err(usage)
            return 2
        }
        do {
            let config = try Configuration.load(path: path)
            guard config.appStoreServerAPI != nil else {
                Console.err("kakin notifications: the config has no appStoreServerAPI section")
                return 2
            }
            let (app, database) = try await KakinRuntime.makeApp(KakinRuntime.Options(configuration: config))
            let read: Int, new: Int
            do {
                (read, new) = try await app.services.appStoreSync.recoverMissedNotifications()
                await app.services.notifications.drain()
            } catch {
                await database.close()
                throw error
            }
            await database.close()
            Console.out(#"{"read": \#(read), "new": \#(new)}"#)
            return 0
        } catch let error as ConfigurationError {
            Console.err("kakin notifications: invalid configuration: \(error)")
            return 2
        } catch let error as KakinError {
            Console.err("kakin notifications: \(error.message)" + (error.detail.map { " (\($0))" } ?? ""))
            return 1
        } catch {
            Console.err("kakin notifications: \(error)")
            return 1
        }
    }
}
