// `kakin app`: a command-line app built on KakinKit with the App Store simulator (or, `--store googlePlay`, the Google
// Play simulator) as its store, so every
// seed flow (a purchase killed at any step, the retry at the next launch, the "still processing" refusal,
// restore, the launch-time status) can be replayed in a terminal and scripted against local mode. One
// `--state DIR` is one device: separate invocations are separate launches of the same app on it.
// What must not live here: purchase logic (that is KakinKit's `PurchaseCoordinator`) or server code.
import Foundation
import KakinKit
import KakinKitSimulator

public enum AppCommand {
    static let usage = """
        usage: kakin app --server URL --customer ID --state DIR [--token TOKEN] [--store appStore|googlePlay] <command> [--json]

          launch                 the launch sequence: listen to updates, retry unfinished transactions, status
          buy PRODUCT [--offer ID] [--fail-at payment|send|finish|acknowledge]
                                 a purchase; --fail-at stops it at that step as if the app were killed
                                 (payment: after paying, before Kakin is called; finish (App Store) or acknowledge
                                 (Google Play): after Kakin answered, before the app is done with it) or the network
                                 dropped (send: during the call to Kakin)
          unfinished             the device's unfinished transactions, one per line, or `none`
          restore                App Store sync, retries, then Kakin's restore from the App Store history
          status                 Kakin's status for the customer (new / active / inactive)
          wallet                 retries unfinished transactions, then the coin balance
          offering PLACEMENT [--app-version V] [--country CC]
                                 what the placement's paywall shows (Kakin's rules or the experiment variant)

        --server is Kakin in local mode (its simulators under /simulator/ and /play-simulator/); --state holds the
        device (its unfinished transactions and account) between invocations.
        --store googlePlay: an Android phone of the Play app --package (default dev.kakin.demo): buy PRODUCT[:BASEPLAN]
        (premium:yearly; --offer free-trial) on the Play simulator, the purchase token handed to Kakin until it answers
        201 or 409 (unfinished until then, sent again at launch); restore sends what the device holds, then the status.
        --token is the bearer token for a Kakin with auth configured: the customer's token (an HS256 JWT
        your auth server issues, sub = the customer ID) or a backend API key; default: the environment
        variable KAKIN_CUSTOMER_TOKEN (keeps it out of the process list). Without either, no Authorization.
        exit: 0 ok, 3 refused because an earlier purchase of that product is still unfinished,
              1 other errors (the KKN-… ID is printed), 2 usage
        """

    enum Command: String, CaseIterable {
        case launch, buy, unfinished, restore, status, wallet, offering
    }

    enum FailPoint: String, CaseIterable {
        case payment, send, finish, acknowledge
    }

    enum StoreName: String, CaseIterable {
        case appStore, googlePlay
    }

    static let demoPlayPackage = "dev.kakin.demo"

    struct Options {
        var server: URL
        var customer: String
        var state: URL
        var command: Command
        var product: String?
        var offer: String?
        var failAt: FailPoint?
        /// `offering`: the placement, and what the app says of itself.
        var placement: String?
        var appVersion: String?
        var country: String?
        var json = false
        var store = StoreName.appStore
        /// Google Play's package name (`--package`).
        var packageName = demoPlayPackage
        /// Bearer token for Kakin's customer routes (`--token`, else `KAKIN_CUSTOMER_TOKEN`).
        var token: String?
    }

    static let tokenEnvironmentVariable = "KAKIN_CUSTOMER_TOKEN"

    struct UsageError: Error {
        var message: String
    }

    /// Runs `kakin app …` (the arguments after `app`) and returns the exit status.
    public static func run(_ arguments: [String]) async -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            Output.line(usage)
            return 0
        }
        let options: Options
        do {
            options = try parse(arguments, environment: ProcessInfo.processInfo.environment)
        } catch {
            Output.error("kakin app: \(error.message) (see kakin app --help)")
            return 2
        }
        return await AppSession(options).run()
    }

    static func parse(_ arguments: [String], environment: [String: String]) throws(UsageError) -> Options {
        var values: [String: String] = [:]
        var json = false
        var positionals: [String] = []
        var i = 0
        let valued: Set<String> = ["server", "customer", "state", "offer", "fail-at", "token", "app-version", "country", "store", "package"]
        while i < arguments.count {
            let a = arguments[i]
            i += 1
            guard a.hasPrefix("--") else {
                positionals.append(a)
                continue
            }
            var name = String(a.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if name == "json", inline == nil {
                json = true
            } else if valued.contains(name) {
                if let inline {
                    values[name] = inline
                } else {
                    guard i < arguments.count else { throw UsageError(message: "flag --\(name) needs a value") }
                    values[name] = arguments[i]
                    i += 1
                }
            } else {
                throw UsageError(message: "unknown flag --\(name)")
            }
        }
        guard let serverText = values["server"] else { throw UsageError(message: "--server URL is required") }
        guard let server = URL(string: serverText), let scheme = server.scheme, ["http", "https"].contains(scheme), server.host != nil else {
            throw UsageError(message: "--server must be an http(s) URL such as http://127.0.0.1:8080")
        }
        guard let customer = values["customer"] else { throw UsageError(message: "--customer ID is required") }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:@-")
        guard (1...128).contains(customer.count), customer.allSatisfy(allowed.contains) else {
            throw UsageError(message: "--customer must be 1 to 128 characters of A-Z a-z 0-9 . _ : @ -")
        }
        guard let state = values["state"], !state.isEmpty else { throw UsageError(message: "--state DIR is required") }
        guard let first = positionals.first else {
            throw UsageError(message: "a command is required: \(Command.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard let command = Command(rawValue: first) else { throw UsageError(message: "unknown command \(first)") }
        var options = Options(server: server, customer: customer, state: URL(fileURLWithPath: state, isDirectory: true),
                              command: command, json: json)
        if let token = values["token"] ?? environment[tokenEnvironmentVariable].flatMap({ $0.isEmpty ? nil : $0 }) {
            guard (1...tokenLengthMax).contains(token.utf8.count), token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw UsageError(message: "--token (or \(tokenEnvironmentVariable)) must be 1 to \(tokenLengthMax) printable characters without spaces")
            }
            options.token = token
        }
        if let store = values["store"] {
            guard let name = StoreName(rawValue: store) else { throw UsageError(message: "--store must be appStore or googlePlay") }
            options.store = name
        }
        if let package = values["package"] {
            guard options.store == .googlePlay, (1...255).contains(package.count) else { throw UsageError(message: "--package NAME goes with --store googlePlay") }
            options.packageName = package
        }
        if command == .buy {
            guard positionals.count == 2 else { throw UsageError(message: "buy takes one PRODUCT") }
            options.product = positionals[1]
            options.offer = values["offer"]
            if let f = values["fail-at"] {
                let last: FailPoint = options.store == .googlePlay ? .acknowledge : .finish
                guard let point = FailPoint(rawValue: f), [.payment, .send, last].contains(point) else {
                    throw UsageError(message: "--fail-at must be payment, send or \(last.rawValue)")
                }
                options.failAt = point
            }
        } else if command == .offering {
            guard positionals.count == 2 else { throw UsageError(message: "offering takes one PLACEMENT") }
            if values["offer"] != nil || values["fail-at"] != nil { throw UsageError(message: "--offer and --fail-at go with buy") }
            options.placement = positionals[1]
            options.appVersion = values["app-version"]
            options.country = values["country"]
        } else {
            guard positionals.count == 1 else { throw UsageError(message: "unexpected argument \(positionals[1])") }
            if values["offer"] != nil || values["fail-at"] != nil { throw UsageError(message: "--offer and --fail-at go with buy") }
        }
        if command != .offering, values["app-version"] != nil || values["country"] != nil {
            throw UsageError(message: "--app-version and --country go with offering")
        }
        return options
    }
}

/// One invocation: the device (a `SimulatedStore` on the state directory), Kakin, and the coordinator.
struct AppSession {
    let options: AppCommand.Options
    let out: Output

    init(_ options: AppCommand.Options) {
        self.options = options
        out = Output(json: options.json)
    }

    /// Short waits: a terminal command should not sit for a minute when Kakin is down.
    static let retryPolicy = RetryPolicy(attemptsMax: 3, initialDelay: .milliseconds(200), delayMax: .seconds(1))

    func run() async -> Int32 {
        let token = options.token
        let backend = URLSessionBackend(baseURL: options.server, customerToken: token.map { t in { @Sendable _ in t } })
        let sending: any Backend = options.failAt == .send ? DroppingBackend(inner: backend) : backend
        let coordinator: PurchaseCoordinator
        do {
            let store: any Store, kakin: any Backend
            switch options.store {
            case .appStore:
                store = try await device(backend)
                kakin = sending
            case .googlePlay:
                store = try await playDevice(backend)
                kakin = PlayPurchaseBackend(inner: sending, packageName: options.packageName)
            }
            coordinator = PurchaseCoordinator(customerID: options.customer, store: faulty(store), backend: kakin, options: .init(retry: Self.retryPolicy))
        } catch {
            return out.failure(error)
        }
        switch options.command {
        case .launch: return await launch(coordinator)
        case .buy: return await buy(coordinator)
        case .unfinished: return out.unfinished(await coordinator.unfinishedTransactions())
        case .restore:
            do {
                let report = try await coordinator.restore()
                return out.restore(report)
            } catch {
                return out.failure(error)
            }
        case .status:
            do {
                return out.status(try await coordinator.refreshStatus())
            } catch {
                return out.failure(error)
            }
        case .wallet:
            do {
                return out.wallet(try await coordinator.wallet())
            } catch {
                return out.failure(error)
            }
        case .offering:
            do {
                return out.offering(try await coordinator.offering(placement: options.placement!, appVersion: options.appVersion, country: options.country))
            } catch {
                return out.failure(error)
            }
        }
    }

    /// The device on `--state`. Its Apple account is the customer's `appAccountToken` (the simulator keys
    /// accounts by it); a device that has none yet asks Kakin once and remembers it.
    func device(_ backend: URLSessionBackend) async throws(KakinKitError) -> SimulatedStore {
        // The CLI reads updates once per launch; a long interval keeps it from polling while it runs.
        let store = try SimulatedStore(simulator: options.server, stateDirectory: options.state, pollInterval: .seconds(3600))
        if await store.account != nil { return store }
        return try SimulatedStore(simulator: options.server, stateDirectory: options.state, account: try await account(backend), pollInterval: .seconds(3600))
    }

    /// An Android phone on `--state`: its purchases name the customer's `appAccountToken` as `obfuscatedAccountId`.
    func playDevice(_ backend: URLSessionBackend) async throws(KakinKitError) -> SimulatedPlayStore {
        let store = try SimulatedPlayStore(simulator: options.server, stateDirectory: options.state)
        if await store.account != nil { return store }
        return try SimulatedPlayStore(simulator: options.server, stateDirectory: options.state, account: try await account(backend))
    }

    /// The customer's `appAccountToken`, asked of Kakin once per device.
    func account(_ backend: URLSessionBackend) async throws(KakinKitError) -> UUID {
        let status = try await backend.customer(options.customer)
        guard let token = status.appAccountToken.flatMap(UUID.init(uuidString:)) else {
            throw KakinKitError(.invalidServerResponse, message: "Kakin sent no appAccountToken for \(options.customer).")
        }
        return token
    }

    func faulty(_ store: any Store) -> any Store {
        guard let point = options.failAt, point != .send else { return store }
        let out = self.out
        return StoppingStore(inner: store, point: point) { point, transaction in
            out.stopped(at: point, transaction)
            exit(1)
        }
    }

    func launch(_ coordinator: PurchaseCoordinator) async -> Int32 {
        let report = await coordinator.launch()
        await coordinator.stopListening()
        return out.launch(report)
    }

    func buy(_ coordinator: PurchaseCoordinator) async -> Int32 {
        out.purchase(await coordinator.purchase(options.product!, offerID: options.offer))
    }
}

/// `--fail-at payment|finish`: the app is killed right after the store charged, or right after Kakin
/// answered and before `finish`. Whatever the device saved so far is what the next launch finds.
struct StoppingStore: Store {
    let inner: any Store
    let point: AppCommand.FailPoint
    let stop: @Sendable (AppCommand.FailPoint, StoreTransaction) -> Never

    func updates() -> AsyncStream<StoreTransaction> { inner.updates() }
    func unfinished() async -> [StoreTransaction] { await inner.unfinished() }
    func currentEntitlements() async -> [StoreTransaction] { await inner.currentEntitlements() }
    func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct] { try await inner.products(for: ids) }
    func sync() async throws(KakinKitError) { try await inner.sync() }
    func appTransactionID() async -> String? { await inner.appTransactionID() }

    func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult {
        let result = try await inner.purchase(productID, options: options)
        if point == .payment, case .purchased(let t) = result { stop(point, t) }
        return result
    }

    func finish(_ transaction: StoreTransaction) async {
        if point == .finish || point == .acknowledge { stop(point, transaction) }
        await inner.finish(transaction)
    }
}

/// `--fail-at send`: the network drops during the call to Kakin (the request never arrives).
struct DroppingBackend: Backend {
    let inner: any Backend

    func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult {
        throw KakinKitError(.networkUnavailable, message: "The network dropped during the call to Kakin (--fail-at send); the purchase stays unfinished.")
    }

    func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult {
        throw KakinKitError(.networkUnavailable, message: "The network dropped during the call to Kakin (--fail-at send); the purchase stays unacknowledged.")
    }

    func customer(_ customerID: String) async throws(KakinKitError) -> CustomerStatus { try await inner.customer(customerID) }
    func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> CustomerStatus {
        try await inner.restore(customerID, transactionID: transactionID)
    }
    func wallet(_ customerID: String) async throws(KakinKitError) -> Wallet { try await inner.wallet(customerID) }
    func offerSignature(_ customerID: String, productID: String, offerID: String,
                        format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer {
        try await inner.offerSignature(customerID, productID: productID, offerID: offerID, format: format)
    }
    func introductoryOfferEligibility(_ customerID: String, productID: String, appTransactionID: String?) async throws(KakinKitError) -> String? {
        try await inner.introductoryOfferEligibility(customerID, productID: productID, appTransactionID: appTransactionID)
    }
    func offering(_ customerID: String, placement: String, appVersion: String?, country: String?) async throws(KakinKitError) -> PaywallOffering {
        try await inner.offering(customerID, placement: placement, appVersion: appVersion, country: country)
    }
}
