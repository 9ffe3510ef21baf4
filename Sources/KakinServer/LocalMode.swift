import AppStoreSecurity
import AppStoreSimulator
import Foundation
import GooglePlaySimulator
import HTTPServer
import KakinCore
import KakinExternal
import KakinService
import KakinStorage
import KakinSystem
import Synchronization

/// Local mode, the newcomer's first run: SQLite, the demo catalog, and the App Store simulator mounted
/// in-process under `/simulator/` (its Server API also at `/inApps/…`). Kakin trusts only the simulator's CA, runs on the simulator's clock
/// (statuses follow simulated time), and receives its notifications directly: a simulator call answers
/// only after Kakin has applied the notifications it caused. The simulator's state is kept beside the
/// database so a restart keeps the same CA, clock and purchases.
final class LocalMode: Sendable {
    let configuration: Configuration
    let simulator: AppStoreSimulator
    /// The Play simulator under `/play-simulator/` (LocalMode+GooglePlay.swift).
    let playSimulator: GooglePlaySimulator
    let stateFile: String?
    let playStateFile: String?
    let logger: Logger
    /// Kakin, known only once the runtime has started; notifications sent before that are refused (the
    /// simulator retries them on Apple's schedule).
    let kakin = LateApp()

    /// Weak: the runtime owns the app, and the app's routes reach the simulator, whose sink reaches
    /// this box — a strong reference here would keep the whole graph alive after shutdown.
    final class LateApp: Sendable {
        struct Reference { weak var app: KakinApp? }
        let reference = Mutex(Reference())
        var app: KakinApp? { reference.withLock { $0.app } }
        func set(_ app: KakinApp) { reference.withLock { $0.app = app } }
    }

    /// The message local mode's retention rule shows with its offer (a message uploaded with Upload Message).
    static let demoRetentionMessageId = "6b6d5e2a-1c3f-4d7e-9a0b-2f4c6e8a0d1b"

    static func configuration() -> Configuration {
        var c = Configuration()
        // Offer rules to try: a win-back offer for lapsed subscribers (once), a discount for current ones; the
        // demo's other promotional offers follow the default (anyone who has or had a subscription in the group).
        c.apps = [Configuration.App(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox],
                                    catalog: .demo, offerRules: [
                                        "promo.6m.free": OfferRule(offerId: "promo.6m.free", eligibility: .lapsed, maxRedemptions: 1),
                                        "promo.3m.half": OfferRule(offerId: "promo.3m.half", eligibility: .current),
                                    ])]
        // The simulated customers "consented": local mode shows how refund requests are answered.
        c.apps[0].consumptionInformation = ConsumptionInformationPolicy(customerConsented: true)
        // Purchases outside the App Store (issue 17): external purchase tokens the simulator issues are reported to it.
        c.apps[0].external.reporting = ExternalPurchaseReportingConfiguration(
            enabled: true, tax: ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000))
        // Apple's 2026 additions (the contract): a monthly subscriber cancelling is offered promo.3m.half, and a
        // consumable the app never sent is finished by Kakin after 10 minutes.
        c.apple2026[Catalog.demoBundleId] = Apple2026AppSettings(
            retentionMessaging: RetentionMessagingConfig(rules: [
                .init(productIds: ["premium.monthly"], messageId: LocalMode.demoRetentionMessageId, offerId: "promo.3m.half"),
            ]),
            serverFinish: ServerFinishPolicy(afterSeconds: 600))
        return c
    }

    /// - Parameters:
    ///   - simulatorConfiguration: the simulated App Store (its catalog should be the app's).
    ///   - simulatorStartMs: where a new simulated clock starts (default: now).
    ///   - deliveries: wraps the in-process notification sink (tests cut or copy deliveries with it).
    /// A fresh simulator gets a random seed: its transaction ids and notification UUIDs must never repeat
    /// ones an existing database already holds (a lost state file would otherwise make new purchases look
    /// like old ones: 409 and no coins).
    init(configuration: Configuration,
         simulatorConfiguration: SimulatorConfiguration = SimulatorConfiguration(seed: UInt64.random(in: 1...UInt64(Int64.max))),
         simulatorStartMs: Int64? = nil, logger: Logger,
         deliveries: (any NotificationSink) -> any NotificationSink = { $0 }) throws {
        self.configuration = configuration
        self.logger = logger
        if case .sqlite(let path) = configuration.database {
            stateFile = path + ".simulator.json"
            playStateFile = path + ".play-simulator.json"
        } else {
            stateFile = nil
            playStateFile = nil
        }
        let appBox = kakin
        let sink = deliveries(InProcessNotificationSink { request in
            guard let app = appBox.app else {
                return HTTPResponse.text("starting", status: 503)
            }
            let response = await app.handle(request)
            // Read-your-writes: the simulator call that caused this notification (clock, purchase,
            // action) answers only once Kakin has applied it, so a status read right after is current.
            if (200...206).contains(response.status) { await app.services.notifications.worker.completePass() }
            return response
        })
        if let stateFile, let bytes = FileManager.default.contents(atPath: stateFile) {
            simulator = try AppStoreSimulator(stateFile: [UInt8](bytes), sink: sink)
            logger.info("simulator state loaded", ["simulator.stateFile": .string(stateFile)])
        } else {
            simulator = try AppStoreSimulator(configuration: simulatorConfiguration,
                                              clock: simulatorStartMs.map { SimulatedClock(startMs: $0) }, sink: sink)
        }
        playSimulator = try Self.makePlaySimulator(stateFile: playStateFile, clock: simulator.clock, kakin: appBox, logger: logger)
    }

    func runtimeOptions() -> KakinRuntime.Options {
        let simulator = simulator
        let local = self
        var configuration = configuration
        // App receipts the simulator writes are checked against its CA, like its signed transactions.
        configuration.appReceiptRootsDER = configuration.appReceiptRootsDER ?? [simulator.rootCertificateDER]
        // The demo Play app: its catalog joins the status's; its client is pointed at the simulator once the port is known.
        if configuration.googlePlayApps.isEmpty, let play = try? demoPlayApp(port: configuration.port) {
            configuration.googlePlayApps = [play]
        }
        return KakinRuntime.Options(
            configuration: configuration, defaultRootsDER: [simulator.rootCertificateDER], clock: simulator.clock, logger: logger,
            extraRoutes: { router in
                // The control API under /simulator/; the Server API at Apple's own paths too (/inApps/…), as
                // `kakin simulator serve` answers it, so a client's base URL can be the same in both modes.
                for method in ["GET", "POST", "PUT", "DELETE"] {
                    for mount in ["/simulator/{rest...}", "/inApps/{rest...}"] {
                        router.add(method, mount) { request, _ in await local.simulatorCall(request) }
                    }
                    router.add(method, GooglePlaySimulator.mount + "/{rest...}") { request, _ in await local.playSimulator.handle(request) }
                }
            })
    }

    /// Connects the simulator's notifications to the running server and points Kakin's App Store Server
    /// API client at the simulator.
    func attach(to runtime: KakinRuntime) async throws {
        let app = runtime.app
        kakin.set(app)
        let key = simulator.apiKey
        try app.services.connectAppStoreServerAPI(AppStoreServerAPISettings(
            issuerId: key.issuerId, keyId: key.keyId, privateKeyPEM: key.privateKeyPEM,
            baseURL: "http://127.0.0.1:\(runtime.port)/simulator"))
        try attachApple2026(port: runtime.port)
        attachGooglePlay(port: runtime.port)
        for play in runtime.app.settings.googlePlayApps where play.packageName == playSimulator.configuration.packageName {
            var connected = try demoPlayApp(port: runtime.port)
            connected.catalog = play.catalog
            try app.services.googlePlay.connect(connected)
            app.services.googlePlayNotifications.accept(connected, keys: PlaySimulatorKeySet(play: playSimulator))
        }
        await recordStampClock()
    }

    /// Kakin stamps rows with the simulator's clock: the database records it (`StampClock`), so `kakin export` takes
    /// its window from that clock. `stopped`: at shutdown, as simulated time does not pass while Kakin is down.
    func recordStampClock(stopped: Bool = false) async {
        guard let app = kakin.app else { return }
        let reading = StampClock(simulatedMs: simulator.clock.nowMs(), wallMs: SystemClock().nowMs(),
                                 rate: stopped ? 0 : simulator.clock.timeRate)
        do {
            try await app.services.supportRecords.recordStampClock(reading)
        } catch {
            logger.warning("the simulated clock was not recorded for kakin export", ["error.detail": .string(error.message)])
        }
    }

    /// Records the stopped clock and saves the simulator's state for the next run.
    func stop() async {
        await recordStampClock(stopped: true)
        savePlaySimulator()
        guard let stateFile else { return }
        do {
            try Data(simulator.snapshot()).write(to: URL(fileURLWithPath: stateFile), options: .atomic)
        } catch {
            logger.error("could not save the simulator state", ["simulator.stateFile": .string(stateFile), "error": .string("\(error)")])
        }
    }

    func banner(port: Int) -> String {
        let b = "http://127.0.0.1:\(port)"
        return """
            Kakin is running in local mode on \(b)
              SQLite database, demo catalog (bundle \(Catalog.demoBundleId)), App Store simulator at \(b)/simulator/,
              Google Play simulator at \(b)/play-simulator/ (package dev.kakin.demo; same clock)
              support desk (search any purchase, the notification inbox, the unused-balance report) at \(b)/admin/
              (loopback only, no credentials; Ctrl-C stops and saves the simulator's state)

            Try it:
              # 1. the app asks who the customer is (creates u1 and its appAccountToken)
              curl -s \(b)/v1/customers/u1
              # 2. buy 500 coins in the simulated App Store with that token, then hand the signed transaction to Kakin
              T=$(curl -s \(b)/v1/customers/u1 | sed 's/.*"appAccountToken":"\\([^"]*\\)".*/\\1/')
              JWS=$(curl -s -X POST \(b)/simulator/v1/purchases -d "{\\"productId\\":\\"coins.500\\",\\"appAccountToken\\":\\"$T\\"}" | sed 's/.*"signedTransaction":"\\([^"]*\\)".*/\\1/')
              curl -s -X POST \(b)/v1/customers/u1/transactions -H 'Content-Type: application/json' -d "{\\"signedTransaction\\":\\"$JWS\\"}"
              # 3. spend 120 of them on a stamp for program 1
              curl -s -X POST \(b)/v1/customers/u1/wallet/spend -H 'Content-Type: application/json' -H 'Idempotency-Key: stamp-1' \\
                -d '{"amount": 120, "item": "stamp.heart", "recipient": "program:1"}'
            """
    }
}
