import AppStoreSecurity
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import KakinStorage
import Synchronization
import Testing

/// A clock tests move by hand.
final class ManualClock: Clock, @unchecked Sendable {
    let now = Mutex<Int64>(1_800_000_000_000)
    init(_ ms: Int64 = 1_800_000_000_000) { now.withLock { $0 = ms } }
    func nowMs() -> Int64 { now.withLock { $0 } }
    func advance(ms: Int64) { now.withLock { $0 += ms } }
}

/// An App Store-like signer built in the tests: a CA with Apple's OIDs whose root the server trusts.
struct TestAppStore: Sendable {
    static let bundleId = "com.example.kakin.tests"
    let ca: SigningCertificateAuthority
    let counter = Counter()

    final class Counter: Sendable {
        let value = Atomic<Int64>(2_000_000_000)
        func next() -> Int64 { value.add(1, ordering: .relaxed).newValue }
    }

    init(nowMs: Int64) throws {
        ca = try SigningCertificateAuthority(nowMs: nowMs - 365 * 86_400_000)
    }

    var rootDER: [UInt8] { ca.rootDER }

    func nextTransactionId() -> String { String(counter.next()) }

    /// A signed StoreKit 2 transaction (what `jwsRepresentation` would hand the app).
    func transaction(id: String? = nil, productId: String = "coins.100", type: String = "Consumable",
                     appAccountToken: String? = nil, quantity: Int = 1, purchaseMs: Int64, signedMs: Int64? = nil,
                     expiresMs: Int64? = nil, original: String? = nil, revokedMs: Int64? = nil,
                     environment: String = "Sandbox", bundleId: String = TestAppStore.bundleId,
                     extra: [String: JSONValue] = [:]) throws -> (id: String, jws: String) {
        let txId = id ?? nextTransactionId()
        var o: [String: JSONValue] = [
            "transactionId": .string(txId), "originalTransactionId": .string(original ?? txId), "bundleId": .string(bundleId),
            "productId": .string(productId), "purchaseDate": .int(purchaseMs), "originalPurchaseDate": .int(purchaseMs),
            "quantity": .int(Int64(quantity)), "type": .string(type), "inAppOwnershipType": "PURCHASED",
            "signedDate": .int(signedMs ?? purchaseMs), "environment": .string(environment), "transactionReason": "PURCHASE",
            "storefront": "JPN", "storefrontId": "143462", "price": .int(120_000 * Int64(quantity)), "currency": "JPY",
        ]
        if let appAccountToken { o["appAccountToken"] = .string(appAccountToken) }
        if let expiresMs { o["expiresDate"] = .int(expiresMs) }
        if let revokedMs {
            o["revocationDate"] = .int(revokedMs)
            o["revocationReason"] = 0
        }
        for (k, v) in extra { o[k] = v }
        return (txId, try ca.signer().sign(.object(o)))
    }
}

/// Kakin running for real (SQLite file, HTTP on an ephemeral loopback port) for one test.
final class TestKakin: Sendable {
    let runtime: KakinRuntime
    let directory: URL
    let clock: ManualClock
    let appStore: TestAppStore
    let baseURL: String

    static let catalog = Catalog([
        Product(productId: "coins.100", kind: .consumable, coins: 100, priceMilli: 120_000, currency: "JPY"),
        Product(productId: "coins.500", kind: .consumable, coins: 500, bonusCoins: 50, priceMilli: 600_000, currency: "JPY"),
        Product(productId: "noads", kind: .nonConsumable),
        Product(productId: "season.pass", kind: .nonRenewing, durationDays: 90),
        Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1), level: 2),
        Product(productId: "premium.plus", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1), level: 1),
        Product(productId: "premium.lite", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1), level: 3),
    ])

    /// - Parameters:
    ///   - directory, clock, appStore: reuse another run's database, clock and signing CA (a restart).
    ///   - configure, configureRuntime: last changes to the configuration, and to the runtime's options (retry clock, attempts…).
    static func start(wallet: WalletPolicy = WalletPolicy(), transferPolicy: TransferPolicy = .keepFirstOwner,
                      bodyBytesMax: Int = 1 << 20, auth: Configuration.Auth? = nil, clock serverClock: (any Clock)? = nil,
                      catalog: Catalog = TestKakin.catalog, directory: URL? = nil, manualClock: ManualClock? = nil,
                      appStore reusedStore: TestAppStore? = nil, configure: (inout Configuration) -> Void = { _ in },
                      configureRuntime: (inout KakinRuntime.Options) -> Void = { _ in }) async throws -> TestKakin {
        let dir = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("kakin-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        // A start that fails (a configuration a test expects refused) leaves no directory it made behind.
        var started = false
        defer { if !started, directory == nil { try? FileManager.default.removeItem(at: dir) } }
        let clock = manualClock ?? ManualClock()
        let appStore = try reusedStore ?? TestAppStore(nowMs: clock.nowMs())
        var config = Configuration()
        config.port = 0
        config.database = .sqlite(path: dir.appendingPathComponent("kakin.db").path)
        config.trustedRootsDER = [appStore.rootDER]
        config.apps = [Configuration.App(bundleId: TestAppStore.bundleId, appAppleId: 1_234_567_890, environments: [.sandbox], catalog: catalog)]
        config.wallet = wallet
        config.transferPolicy = transferPolicy
        config.auth = auth
        configure(&config)
        var options = KakinRuntime.Options(configuration: config, clock: serverClock ?? clock, logger: Logger(minimum: .error))
        options.http.bodyBytesMax = bodyBytesMax
        configureRuntime(&options)
        let runtime = try await KakinRuntime.start(options)
        started = true
        return TestKakin(runtime: runtime, directory: dir, clock: clock, appStore: appStore)
    }

    init(runtime: KakinRuntime, directory: URL, clock: ManualClock, appStore: TestAppStore) {
        self.runtime = runtime
        self.directory = directory
        self.clock = clock
        self.appStore = appStore
        self.baseURL = "http://127.0.0.1:\(runtime.port)"
    }

    func stop(keepingFiles: Bool = false) async {
        await runtime.shutdown(gracePeriodSeconds: 5)
        if !keepingFiles { try? FileManager.default.removeItem(at: directory) }
    }

    /// Runs `body` against a fresh server and always stops it.
    static func with(wallet: WalletPolicy = WalletPolicy(), transferPolicy: TransferPolicy = .keepFirstOwner,
                     _ body: (TestKakin) async throws -> Void) async throws {
        try await using(try await start(wallet: wallet, transferPolicy: transferPolicy), stop: { await $0.stop() }, body)
    }

    // MARK: HTTP

    struct Response: Sendable {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }
        var errorCode: String? { json["error"]?["code"]?.stringValue }
        var errorId: String? { json["error"]?["id"]?.stringValue }
    }

    static let session: URLSession = {
        let c = URLSessionConfiguration.ephemeral
        c.httpMaximumConnectionsPerHost = 64
        // How long a request waits for its answer's next bytes: a guard against a hang, not a speed check (each test
        // has its time limit). 30 s was too short in the full suite on 2 cores: a 10,000-customer import's report and
        // ledger check, under a second alone, timed out there twice (ImportTests, 2026-12-05).
        c.timeoutIntervalForRequest = 180
        return URLSession(configuration: c)
    }()

    func request(_ method: String, _ path: String, json: JSONValue? = nil, body: [UInt8]? = nil,
                 headers: [String: String] = [:]) async throws -> Response {
        var req = URLRequest(url: URL(string: baseURL + path)!)
        req.httpMethod = method
        if let json {
            req.httpBody = Data(json.serialized())
            req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        } else if let body {
            req.httpBody = Data(body)
        }
        for (k, v) in headers { req.setValue(v, forHTTPHeaderField: k) }
        let (data, response) = try await Self.session.data(for: req)
        let http = response as! HTTPURLResponse
        var hs: [String: String] = [:]
        for (k, v) in http.allHeaderFields { hs[String(describing: k).lowercased()] = String(describing: v) }
        return Response(status: http.statusCode, headers: hs, body: [UInt8](data))
    }

    func postTransaction(_ customer: String, jws: String, processId: String? = nil) async throws -> Response {
        var headers: [String: String] = [:]
        if let processId { headers["X-Purchase-Process-Id"] = processId }
        return try await request("POST", "/v1/customers/\(customer)/transactions", json: ["signedTransaction": .string(jws)], headers: headers)
    }

    func wallet(_ customer: String) async throws -> WalletBalance {
        let r = try await request("GET", "/v1/customers/\(customer)/wallet")
        return WalletBalance(paid: r.json["paid"]?.int64Value ?? -1, free: r.json["free"]?.int64Value ?? -1)
    }

    func spend(_ customer: String, key: String, amount: Int64, item: String = "stamp.heart", recipient: String? = "program:1") async throws -> Response {
        var body: [String: JSONValue] = ["amount": .int(amount), "item": .string(item)]
        if let recipient { body["recipient"] = .string(recipient) }
        return try await request("POST", "/v1/customers/\(customer)/wallet/spend", json: .object(body), headers: ["Idempotency-Key": key])
    }

    func ledgerCheckOK() async throws -> Bool {
        let r = try await request("GET", "/v1/admin/ledger/check")
        return r.status == 200 && r.json["ok"] == true
    }
}

/// Runs `body` with a started resource and stops it afterwards, whether `body` threw or not.
func using<T>(_ resource: T, stop: (T) async -> Void, _ body: (T) async throws -> Void) async throws {
    do {
        try await body(resource)
    } catch {
        await stop(resource)
        throw error
    }
    await stop(resource)
}
