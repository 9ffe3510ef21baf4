import AppStoreClient
import AppStoreSecurity
import AppStoreSimulator
import Foundation
import GooglePlaySimulator
import HTTPServer
import KakinAdmin
import KakinCore
import KakinEvents
import KakinKit
import KakinPostgreSQL
import KakinService
import KakinSQLite
import KakinStorage
import Synchronization

/// What the App Store charged and did, as the world saw it (its side of the invariants). Guarded: the device reports
/// charges from inside its actor.
final class WorldModel: Sendable {
    struct Charge: Sendable {
        var customer: Int
        var productId: String
        var quantity: Int
        var kind: ProductKind
        var originalTransactionId: String
        /// Refunded now (per the App Store).
        var refunded = false
        var reversed = false
    }

    struct State {
        var charges: [String: Charge] = [:]
        /// Each customer's charges in order (deterministic picks, and no scan of everyone's).
        var chargesOf: [Int: [String]] = [:]
        var customerOfToken: [String: Int] = [:]
        /// Subscription instances (original transaction id) per customer, in purchase order.
        var subscriptions: [Int: [String]] = [:]
        /// What each Apple account owns (non-consumables and subscriptions), for the device's `currentEntitlements`.
        var owned: [String: [StoreTransaction]] = [:]
        var touched: Set<Int> = []
        /// Subscriptions shared through Family Sharing (the member's copy).
        var family: Set<String> = []
    }

    let state = Mutex(State())

    func charged(_ t: StoreTransaction, token: String, quantity: Int, kind: ProductKind) {
        state.withLock { s in
            guard let c = s.customerOfToken[token] else { return }
            s.touched.insert(c)
            if s.charges[t.id] == nil { s.chargesOf[c, default: []].append(t.id) }
            s.charges[t.id] = Charge(customer: c, productId: t.productID, quantity: quantity, kind: kind, originalTransactionId: t.originalID)
            if kind == .autoRenewable, !(s.subscriptions[c] ?? []).contains(t.originalID) { s.subscriptions[c, default: []].append(t.originalID) }
            if kind != .consumable { s.owned[token, default: []].append(t) }
        }
    }
}

/// A customer: Kakin's customer ID, their Apple account (Kakin's `appAccountToken`), their phone and the app on it.
final class SimCustomer {
    let index: Int
    let id: String
    let token: String
    var device: DeviceStore
    var app: PurchaseCoordinator
    var spends = 0
    /// An Android phone: buys on Google Play (every fourth customer); the others buy on the App Store.
    var isPlay: Bool { index % 4 == 3 }

    init(index: Int, id: String, token: String, device: DeviceStore, app: PurchaseCoordinator) {
        self.index = index
        self.id = id
        self.token = token
        self.device = device
        self.app = app
    }
}

/// The whole system on one clock and one seed: the App Store simulator, Kakin's use cases on a real database, and the
/// customers' phones running KakinKit's purchase coordinator. `run()` schedules every step itself (no threads or
/// timers of Kakin's run: the inbox, the jobs and the webhook worker are stepped), injects the faults, and checks the
/// invariants after every step.
public final class World {
    let options: SimulationOptions
    var rng: SplitMix64
    let simulator: AppStoreSimulator
    /// Google Play, on the same clock: its RTDNs go to `playPushes`, the world delivers them (`PlayWorld.swift`).
    let play: GooglePlaySimulator
    let playPushes = PlayPushCollector()
    let playFaults = PlayAPIFaults()
    /// What Play sold and voided, as the world saw it (its side of the Play invariants).
    var playModel = PlayWorldModel()
    /// RTDNs on their way to Kakin.
    var playInFlight: [PlayPush] = []
    /// The world's own Developer API access token (reads of Play's truth) and when it is renewed.
    var playBearer: (token: String, renewAtMs: Int64)?
    /// The last App Store notification taken (the simulator runs without a sink: the world takes and delivers them).
    var lastNotificationSeq: Int64 = 0
    let clock: SimulatedClock
    let catalog = Catalog.demo
    let bundleId = Catalog.demoBundleId
    let ids: SeededIDGenerator
    let model = WorldModel()
    let network = NetworkSwitch()
    let receiver: WorldWebhookReceiver
    let directory: URL?
    let dbPath: String?
    var database: FaultyDatabase
    let kakin: KakinHandle
    var desk: SupportDesk
    var customers: [SimCustomer] = []
    var digest = TraceDigest()
    var step = 0
    var actions = 0
    var faultsInjected = 0
    var notificationsSeen = 0
    let uuidRng: SeededIDGenerator
    /// Notifications on their way to Kakin: (due, order, payload).
    var inFlight: [(dueMs: Int64, order: Int, jws: String)] = []
    var inFlightOrder = 0
    var settling = false
    var daysBegun = 0
    /// Customers touched since the last evening.
    var dirtyToday: Set<Int> = []
    /// The last trace lines, printed with a failure or a replay's stop.
    var recent: [String] = []
    /// Per customer: the last event sequence the webhook receiver acknowledged, and every event id acknowledged.
    var lastSequence: [String: Int64] = [:]
    var acknowledgedIds: Set<String> = []
    let startMs: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z
    public var log: (String) -> Void = { print($0) }

    static let dayMs: Int64 = 86_400_000
    /// How long an unfinished transaction may wait for its credit: the app relaunches daily and retries.
    static let unfinishedWindowMs: Int64 = 3 * 86_400_000

    public init(_ options: SimulationOptions) async throws {
        self.options = options
        rng = SplitMix64(seed: options.seed)
        ids = SeededIDGenerator(seed: options.seed)
        uuidRng = SeededIDGenerator(seed: options.seed ^ 0x7575_6964)
        clock = SimulatedClock(startMs: startMs)
        simulator = try AppStoreSimulator(configuration: SimulatorConfiguration(gracePeriodDays: 16, seed: options.seed), clock: clock, sink: nil,
                                          wall: clock)
        play = try GooglePlaySimulator(configuration: .demo(seed: options.seed), clock: clock, wall: clock,
                                       push: .init(sink: playPushes, audience: Self.playPushAudience))
        receiver = WorldWebhookReceiver(seed: options.seed, failRate: options.faults.contains(.webhook) ? 0.2 : 0)
        let inner: any SQLDatabase
        if let url = options.databaseURL {
            inner = try PostgresDatabase(url: url)
            directory = nil
            dbPath = nil
        } else {
            let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
            let dir = URL(fileURLWithPath: base).appendingPathComponent("kakin-simulate-\(options.seed)-\(ProcessInfo.processInfo.processIdentifier)-\(UInt64.random(in: 0...UInt64.max))")
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            directory = dir
            dbPath = dir.appendingPathComponent("kakin.sqlite").path
            inner = try SQLiteDatabase(path: dbPath!, options: .init(durable: false))
        }
        database = FaultyDatabase(inner)
        let services = try await Self.makeServices(database: database, ids: ids, clock: clock, simulator: simulator, play: play, playFaults: playFaults,
                                                    receiver: receiver)
        kakin = KakinHandle(services)
        desk = Self.makeDesk(services)
    }

    /// Closes the database and removes the temporary directory.
    public func close() async {
        await database.close()
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    deinit {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    static func appSettings() -> AppSettings {
        AppSettings(bundleId: Catalog.demoBundleId, appAppleId: Catalog.demoAppAppleId, environments: [.sandbox], catalog: .demo, reportingTimeZone: "UTC")
    }

    static func makeServices(database: any SQLDatabase, ids: SeededIDGenerator, clock: SimulatedClock, simulator: AppStoreSimulator,
                             play: GooglePlaySimulator, playFaults: PlayAPIFaults, receiver: WorldWebhookReceiver) async throws -> KakinServices {
        let store = KakinStore(database: database, ids: ids, clock: clock)
        try await store.migrate()
        let app = appSettings()
        let verifier = try SignedDataVerifier(trustedRoots: [simulator.rootCertificateDER],
                                              apps: [AppIdentity(bundleId: app.bundleId, appAppleId: app.appAppleId, environments: app.environments)],
                                              clock: { clock.nowMs() })
        let endpoint = WebhookEndpoint(id: "backend", url: "https://backend.simulated.invalid/kakin", secrets: [Array("simulated-secret".utf8)])
        var webhookOptions = WebhookDeliveryWorker.Options()
        let playApp = try playAppSettings(play)
        let settings = KakinServices.Settings(apps: [app], events: EventsSettings(webhooks: [endpoint]), webhookOptions: webhookOptions,
                                              googlePlayApps: [playApp])
        let services = KakinServices(store: store, verifier: verifier, settings: settings, clock: clock, retryClock: clock,
                                     logger: Logger(minimum: .error), webhookSender: receiver)
        let key = simulator.apiKey
        try services.connectAppStoreServerAPI(
            AppStoreServerAPISettings(issuerId: key.issuerId, keyId: key.keyId, privateKeyPEM: key.privateKeyPEM, baseURL: "http://simulator.invalid/simulator"),
            transport: InProcessTransport { await simulator.handle($0) })
        try services.googlePlay.connect(playApp, transport: InProcessTransport(refuse: { playFaults.refusal($0) }) { await play.handle($0) },
                                        sleeper: NoWait())
        services.googlePlayNotifications.accept(playApp, keys: PlaySimulatorKeySet(play: play))
        try await services.webhooks.prepare()
        return services
    }

    static func makeDesk(_ services: KakinServices) -> SupportDesk {
        SupportDesk(services: services, settings: SupportDesk.Settings(adminKeyHashes: nil, listensOnLoopback: true,
                                                                       apps: [.init(bundleId: Catalog.demoBundleId, reportingTimeZone: "UTC", catalog: .demo),
                                                                              .init(bundleId: "dev.kakin.demo", reportingTimeZone: "UTC",
                                                                                    catalog: PlaySimulatorConfiguration.demoKakinCatalog)]),
                    logError: { _, _ in })
    }

    var services: KakinServices { kakin.services }

    // MARK: Trace and failures

    static let profiles = ProcessInfo.processInfo.environment["KAKIN_SIM_PROFILE"] == "1"
    var profileTotals: [String: (count: Int, seconds: Double)] = [:]

    /// With `KAKIN_SIM_PROFILE=1`: wall time per phase, printed at the end (never part of the trace).
    func profile(_ name: String, since start: ContinuousClock.Instant) {
        guard Self.profiles else { return }
        let d = ContinuousClock.now - start
        let s = Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
        profileTotals[name, default: (0, 0)].count += 1
        profileTotals[name, default: (0, 0)].seconds += s
    }

    public func printProfile() {
        guard Self.profiles else { return }
        for (name, t) in profileTotals.sorted(by: { $0.value.seconds > $1.value.seconds }) {
            print("profile \(name) \(t.count) \(String(format: "%.3f", t.seconds))s")
        }
    }

    static let printsTrace = ProcessInfo.processInfo.environment["KAKIN_SIM_TRACE"] == "1"

    func trace(_ line: String) {
        if Self.printsTrace { print("trace " + line) }
        digest.add(line)
        recent.append(line)
        if recent.count > 40 { recent.removeFirst(recent.count - 20) }
    }

    public var lastTraceLines: [String] { Array(recent.suffix(20)) }

    func fail(_ invariant: String, _ detail: String) -> InvariantFailure {
        InvariantFailure(seed: options.seed, step: step, invariant: invariant, detail: detail)
    }

    /// Counts a step; true when the replay's `--until` stops here.
    func nextStep() -> Bool {
        step += 1
        return options.untilStep.map { step >= $0 } ?? false
    }

    // MARK: Customers and their phones

    func newApp(for device: DeviceStore, customerId: String) -> PurchaseCoordinator {
        let rng = uuidRng
        let options = PurchaseCoordinator.Options(retry: RetryPolicy(attemptsMax: 2), offerFormat: .jws, sleep: { _ in },
                                                  makeUUID: {
                                                      let (a, b) = rng.rng.withLock { r in (r.next(), r.next()) }
                                                      return UUID(uuid: Self.bytes(a, b))
                                                  })
        return PurchaseCoordinator(customerID: customerId, store: device, backend: InProcessBackend(kakin: kakin, network: network), options: options)
    }

    static func bytes(_ a: UInt64, _ b: UInt64) -> uuid_t {
        func byte(_ v: UInt64, _ i: Int) -> UInt8 { UInt8(truncatingIfNeeded: v >> (8 * i)) }
        return (byte(a, 0), byte(a, 1), byte(a, 2), byte(a, 3), byte(a, 4), byte(a, 5), byte(a, 6), byte(a, 7),
                byte(b, 0), byte(b, 1), byte(b, 2), byte(b, 3), byte(b, 4), byte(b, 5), byte(b, 6), byte(b, 7))
    }

    func newDevice() -> DeviceStore {
        let model = model
        let catalog = catalog
        return DeviceStore(simulator: simulator, catalog: catalog, entitlements: { token in model.state.withLock { $0.owned[token] ?? [] } },
                           charged: { t, token, quantity in
                               model.charged(t, token: token, quantity: quantity, kind: catalog[t.productID]?.kind ?? .consumable)
                           })
    }

    func createCustomers() async throws {
        for i in 0..<options.customers {
            let id = "c\(i + 1)"
            let status = try await services.statusReads.status(id)
            let token = status.customer.appAccountToken.lowercased()
            model.state.withLock { $0.customerOfToken[token] = i }
            let device = newDevice()
            customers.append(SimCustomer(index: i, id: id, token: token, device: device, app: newApp(for: device, customerId: id)))
        }
    }

    // MARK: The run

    public func run() async -> SimulationResult {
        do {
            try await createCustomers()
        } catch {
            return result(failure: fail("setup", "\(error)"))
        }
        trace("world seed \(options.seed) customers \(options.customers) days \(options.days) faults \(options.faults.description)")
        let wall = ContinuousClock.now
        for day in 0..<options.days {
            daysBegun = day + 1
            let dayStart = startMs + Int64(day) * Self.dayMs
            // Today's actions: who and when (seconds into the day, before the evening's settling at 22:00).
            let count = poisson(Double(options.customers) * options.actionsPerCustomerDay)
            var plan: [(atMs: Int64, customer: Int)] = []
            for _ in 0..<count { plan.append((dayStart + Int64(rng.below(79_200)) * 1000, rng.below(options.customers))) }
            plan.sort { ($0.atMs, $0.customer) < ($1.atMs, $1.customer) }
            do {
                for item in plan {
                    if let max = options.actionsMax, actions >= max { break }
                    try await moveTime(toMs: item.atMs)
                    actions += 1
                    if nextStep() { return await stopped() }
                    try await act(customers[item.customer])
                    let t0 = ContinuousClock.now
                    try await checkTouched()
                    profile("check.step", since: t0)
                    try await deliverDue()
                }
                if try await settle(dayStart: dayStart, day: day) { return await stopped() }
            } catch let failure as InvariantFailure {
                return result(failure: failure)
            } catch {
                return result(failure: fail("run", "\(error)"))
            }
            if options.printDays {
                let seconds = Double((ContinuousClock.now - wall).components.attoseconds) / 1e18 + Double((ContinuousClock.now - wall).components.seconds)
                log("day \(day + 1) steps \(step) actions \(actions) notifications \(notificationsSeen) faults \(faultsInjected) digest \(digest.hex.prefix(16)) \(String(format: "%.1f", seconds))s")
            }
            if let max = options.actionsMax, actions >= max { break }
        }
        return result(failure: nil)
    }

    func result(failure: InvariantFailure?) -> SimulationResult {
        SimulationResult(digest: digest.hex, steps: step, actions: actions, failure: failure, stoppedAt: nil, notifications: notificationsSeen,
                         faultsInjected: faultsInjected, days: daysBegun)
    }

    func stopped() async -> SimulationResult {
        log("stopped at step \(step) (simulated \(Timestamp.rfc3339(clock.nowMs())))")
        var r = result(failure: nil)
        r.stoppedAt = step
        return r
    }

    func poisson(_ mean: Double) -> Int {
        // Normal approximation, rounded (means here are large or zero-ish; exactness does not matter, determinism does).
        if mean <= 0 { return 0 }
        let u1 = max(Double(rng.next() % 1_000_000) / 1_000_000, 1e-9), u2 = Double(rng.next() % 1_000_000) / 1_000_000
        let z = (-2 * Foundation.log(u1)).squareRoot() * cos(2 * Double.pi * u2)
        return max(0, Int((mean + z * mean.squareRoot()).rounded()))
    }

    // MARK: Time and notifications

    /// Moves both stores' clock (renewals, retries, expirations happen on the way) and delivers what is due. Play's
    /// pushes carry a token that expires within the hour: time stops at each Play event (its pushes are taken when they
    /// are made) and at each push's arrival.
    func moveTime(toMs target: Int64) async throws {
        while true {
            let now = clock.nowMs()
            let stops = [playInFlight.lazy.map(\.dueMs).min(), play.nextEventMs()].compactMap { $0 }.filter { $0 > now && $0 < target }
            guard let next = stops.min() else { break }
            try await moveTimeOnce(toMs: next)
        }
        try await moveTimeOnce(toMs: target)
    }

    func moveTimeOnce(toMs target: Int64) async throws {
        let now = clock.nowMs()
        if target > now { await advanceStores(seconds: (target - now + 999) / 1000) }
        try await collectNotifications()
        try await deliverDue()
    }

    /// The App Store simulator moves the shared clock; Play catches up with it, each of its events at its own instant.
    func advanceStores(seconds: Int64) async {
        await simulator.advance(seconds: seconds)
        await play.advance(toMs: clock.nowMs())
    }

    /// Takes what the App Store sent and puts it on its way, with the notification faults.
    func collectNotifications() async throws {
        collectPlayPushes()
        let taken = simulator.signedNotifications(after: lastNotificationSeq)
        lastNotificationSeq = taken.last?.seq ?? lastNotificationSeq
        let arrived = taken.map(\.signedPayload)
        let now = clock.nowMs()
        for jws in arrived {
            notificationsSeen += 1
            let f = options.faults
            if !settling, f.contains(.drop), rng.chance(0.03) {
                faultsInjected += 1
                trace("fault drop \(Self.sortKey(jws).1)")
                continue
            }
            var due = now
            if !settling, f.contains(.delay), rng.chance(0.05) {
                due = now + Int64(60 + rng.below(2 * 86_400)) * 1000
                faultsInjected += 1
            } else if !settling, f.contains(.reorder), rng.chance(0.1) {
                due = now + Int64(rng.below(600)) * 1000
                faultsInjected += 1
            }
            enqueue(due, jws)
            if !settling, f.contains(.duplicate), rng.chance(0.05) {
                faultsInjected += 1
                enqueue(due + Int64(rng.below(3600)) * 1000, jws)
            }
        }
    }

    func enqueue(_ due: Int64, _ jws: String) {
        inFlightOrder += 1
        inFlight.append((due, inFlightOrder, jws))
    }

    static func sortKey(_ jws: String) -> (Int64, String) {
        guard let p = StoredJWS.payload(jws) else { return (0, jws) }
        return (p["signedDate"]?.int64Value ?? 0, p["notificationUUID"]?.stringValue ?? "")
    }

    /// Delivers every notification due now, one at a time, each applied before the next arrives.
    func deliverDue() async throws {
        try await deliverPlayPushes()
        let now = clock.nowMs()
        let due = inFlight.filter { $0.dueMs <= now }.sorted { ($0.dueMs, $0.order) < ($1.dueMs, $1.order) }
        guard !due.isEmpty else { return }
        inFlight.removeAll { $0.dueMs <= now }
        for n in due {
            await crashMaybe()
            let t0 = ContinuousClock.now
            defer { profile("notification", since: t0) }
            let full = diskFullMaybe()
            do {
                try await services.notifications.receive(n.jws, source: "push")
            } catch {
                // Refused (disk full): the App Store retries it on its schedule; here, an hour later.
                enqueue(now + 3_600_000, n.jws)
            }
            database.full.store(false, ordering: .relaxed)
            _ = full
            await services.notifications.processDue()
            noteTouched(by: n.jws)
            trace("notification \(Self.sortKey(n.jws).1)")
        }
        try await checkTouched()
    }

    /// The customer a notification is about (by the token in its transaction), for the next invariant check.
    func noteTouched(by jws: String) {
        guard let p = StoredJWS.payload(jws), let data = p["data"] else { return }
        for key in ["signedTransactionInfo", "signedRenewalInfo"] {
            if let nested = data[key]?.stringValue, let json = StoredJWS.payload(nested), let token = json["appAccountToken"]?.stringValue?.lowercased() {
                model.state.withLock { s in if let c = s.customerOfToken[token] { s.touched.insert(c) } }
                return
            }
        }
    }

    // MARK: Faults on Kakin's side

    /// Kakin crashes (now and then, with the crash fault): a write in progress is lost, the process restarts on the
    /// same database with nothing in memory.
    func crashMaybe() async {
        guard !settling, options.faults.contains(.crash), rng.chance(0.002) else { return }
        faultsInjected += 1
        trace("fault crash step \(step)")
        await restartKakin()
    }

    func restartKakin() async {
        await database.close()
        do {
            let inner: any SQLDatabase
            if let url = options.databaseURL {
                inner = try PostgresDatabase(url: url)
            } else {
                inner = try SQLiteDatabase(path: dbPath!, options: .init(durable: false))
            }
            database = FaultyDatabase(inner)
            let services = try await Self.makeServices(database: database, ids: ids, clock: clock, simulator: simulator, play: play, playFaults: playFaults,
                                                    receiver: receiver)
            kakin.replace(services)
            desk = Self.makeDesk(services)
        } catch {
            preconditionFailure("Kakin could not restart on its database: \(error)")
        }
    }

    /// The disk fills for one step (with the disk fault): every write of it fails.
    func diskFullMaybe() -> Bool {
        guard !settling, options.faults.contains(.disk), rng.chance(0.004) else { return false }
        faultsInjected += 1
        trace("fault disk-full step \(step)")
        database.full.store(true, ordering: .relaxed)
        return true
    }

    // MARK: The evening: let everything settle, then check everything

    /// Recovers what was lost, relaunches apps with unfinished purchases, drains Kakin's retries and the webhooks,
    /// then checks every invariant for every customer touched today. Returns true when `--until` stopped here.
    func settle(dayStart: Int64, day: Int) async throws -> Bool {
        try await moveTime(toMs: dayStart + 22 * 3_600_000)
        settling = true
        defer { settling = false }
        if nextStep() { return true }
        // Whatever is still on its way arrives now or never: Notification History brings back the lost ones.
        let late = inFlight.count
        inFlight.removeAll()
        // Pub/Sub loses nothing: Play's pushes still on their way arrive now.
        playFaults.disarm()
        try await deliverPlayPushes(all: true)
        do {
            let t0 = ContinuousClock.now
            let r = try await services.appStoreSync.recoverMissedNotifications()
            profile("evening.history", since: t0)
            trace("history read \(r.read) new \(r.new) late \(late)")
        } catch {
            throw fail("history", "Notification History not read: \(error)")
        }
        await drainInbox()
        // Apps with unfinished transactions are opened again (KakinKit retries them at launch).
        for c in customers where await c.device.unfinishedCount > 0 {
            if nextStep() { return true }
            c.app = newApp(for: c.device, customerId: c.id)
            let retries = await c.app.enterForeground()
            model.state.withLock { _ = $0.touched.insert(c.index) }
            trace("relaunch \(c.id) retries \(retries.map { Self.describe($0) }.joined(separator: ","))")
        }
        for c in customers where c.isPlay && !(playModel.unsent[c.index] ?? []).isEmpty {
            if nextStep() { return true }
            let sent = await sendUnsentPlayPurchases(c)
            model.state.withLock { _ = $0.touched.insert(c.index) }
            trace("relaunch \(c.id) play \(sent)")
        }
        var t = ContinuousClock.now
        await drainInbox()
        profile("evening.drain", since: t)
        t = ContinuousClock.now
        try await deliverWebhooks()
        profile("evening.webhooks", since: t)
        try await readPlayVoided()
        t = ContinuousClock.now
        try await checkDay(dayStart: dayStart)
        profile("evening.check", since: t)
        return false
    }

    /// Processes the inbox until nothing is pending, moving time over Kakin's retry backoff.
    func drainInbox() async {
        var waitSeconds: Int64 = 1
        for _ in 0..<40 {
            await services.notifications.processDue()
            await stepPlayWorkers()
            let playPending = (try? await services.store.playNotificationCounts())?["pending"] ?? 0
            guard let pending = try? await services.store.pendingNotificationCount(), pending + playPending > 0 else { return }
            await advanceStores(seconds: waitSeconds)
            try? await collectNotifications()
            try? await deliverDue()
            waitSeconds = min(waitSeconds * 2, 600)
        }
    }

    /// Steps the webhook worker until every event is delivered (or dead): a pass, its sends, the invariant; when a pass
    /// sends nothing, the retry schedule's time passes.
    func deliverWebhooks() async throws {
        for _ in 0..<500 {
            let more = await services.webhooks.runPass()
            await services.webhooks.waitForSends()
            let acknowledged = receiver.takeAcknowledged()
            try checkEvents(acknowledged)
            let counts = try await services.store.webhookCounts(endpointIds: services.webhooks.endpoints.map(\.id))
            if !more, counts.allSatisfy({ $0.pending + $0.retrying + $0.notFannedOut == 0 }) { break }
            if acknowledged.isEmpty, !more {
                // Only retries are left: let their time come.
                await advanceStores(seconds: 30)
                try await collectNotifications()
                try await deliverDue()
            }
        }
    }

    static func describe(_ r: RetryOutcome) -> String {
        switch r.result {
        case .credited: return "\(r.transaction.id):credited"
        case .alreadyCredited: return "\(r.transaction.id):already"
        case .revoked: return "\(r.transaction.id):revoked"
        case .stillUnfinished(let e): return "\(r.transaction.id):unfinished(\(e.code))"
        }
    }
}
