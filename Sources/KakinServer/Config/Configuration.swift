import Foundation
import KakinAdmin
import KakinCore
import KakinMetrics
import KakinEvents
import KakinService
import KakinPostgreSQL
import KakinStorage

/// `kakin.json`, validated once at start: exactly the contract's keys (plus the few documented additions),
/// unknown keys refused, every error one line naming the key. Relative paths are relative to the file.
public struct Configuration: Sendable {
    public enum Database: Sendable, Equatable {
        case sqlite(path: String)
        case postgresql(url: String)

        public static func parse(_ s: String, relativeTo base: String?) throws(ConfigurationError) -> Database {
            if s.hasPrefix("sqlite:") {
                let path = String(s.dropFirst("sqlite:".count))
                guard !path.isEmpty else { throw ConfigurationError("database", "sqlite: needs a file path") }
                return .sqlite(path: Configuration.resolve(path, relativeTo: base))
            }
            if s.hasPrefix("postgresql://") || s.hasPrefix("postgres://") { return .postgresql(url: s) }
            throw ConfigurationError("database", "must be sqlite:PATH or postgresql://user@host:port/db")
        }
    }

    /// One app's settings (`apps[]`): what the use cases run on (`KakinService.AppSettings`).
    public typealias App = AppSettings

    public typealias AppStoreServerAPI = AppStoreServerAPISettings
    public typealias OfferSigning = OfferSigningSettings

    public struct APIKey: Sendable {
        public enum Scope: String, Sendable { case backend, admin }
        /// Lowercase hex SHA-256 of the key; the key itself never sits in the config.
        public var sha256: String
        public var scope: Scope
    }

    public struct Auth: Sendable {
        public var apiKeys: [APIKey]
        /// HS256 secret for customer tokens, read from the environment variable the config names.
        public var customerTokenSecret: [UInt8]?
    }

    public var host = "127.0.0.1"
    public var port = 8080
    public var database = Database.sqlite(path: "kakin.db")
    /// PostgreSQL: the password from the environment variable `databasePasswordEnv` names.
    public var databasePassword: String?
    /// PostgreSQL: pool size and timeouts (`postgres`).
    public var postgres = PostgresDatabase.Options()
    /// DER certificates; nil = the bundled Apple Root CA - G3.
    public var trustedRootsDER: [[UInt8]]?
    public var apps: [App] = []
    /// `apps[]` entries with `"store": "googlePlay"` (`Configuration+GooglePlay.swift`).
    public var googlePlayApps: [GooglePlayAppSettings] = []
    public var appStoreServerAPI: AppStoreServerAPI?
    public var offerSigning: OfferSigning?
    public var auth: Auth?
    public var wallet = WalletPolicy()
    /// Addition to the contract: what happens when a purchase is linked to another customer.
    public var transferPolicy = TransferPolicy.keepFirstOwner
    /// Roots an app receipt's signature must chain to (`appReceipts`); nil: receipts are read unverified.
    public var appReceiptRootsDER: [[UInt8]]?
    /// Events out (`events`): webhook endpoints and retention; nil = none configured (the feed still answers).
    public var events: EventsSettings?
    /// Business numbers' rate table (`Configuration+Metrics.swift`).
    public var exchangeRates: ExchangeRates?
    /// Offerings, placements and experiments to seed (`Configuration+Offerings.swift`).
    public var paywalls: [PaywallSeed] = []

    public init() {}

    static let topKeys: Set<String> = ["listen", "database", "trustedRoots", "apps", "appStoreServerAPI", "offers", "offerSigning", "auth", "wallet", "accounts",
                                       "appReceipts", "databasePasswordEnv", "postgres", "events"]

    /// Reads and validates a config file. `environment` resolves `…Env` keys (secrets never sit in the file).
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws(ConfigurationError) -> Configuration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError("", "cannot read config file \(path)")
        }
        guard data.count <= 4 << 20 else { throw ConfigurationError("", "config file \(path) is larger than 4 MiB") }
        let json: JSONValue
        do {
            json = try JSONParser.parse([UInt8](data))
        } catch {
            throw ConfigurationError("", "config file \(path) is not valid JSON (\(error))")
        }
        let base = (path as NSString).deletingLastPathComponent
        return try parse(json, baseDirectory: base.isEmpty ? "." : base, environment: environment)
    }

    public static func parse(_ json: JSONValue, baseDirectory: String, environment: [String: String]) throws(ConfigurationError) -> Configuration {
        let o = try StrictObject(json, path: "")
        try o.check(allowedKeys: topKeys.union(metricsTopKeys).union(offeringsTopKeys))
        var c = Configuration()
        if let listen = try o.object("listen") {
            try listen.check(allowedKeys: ["host", "port"])
            c.host = try listen.string("host") ?? c.host
            c.port = Int(try listen.int("port", range: 0...65535) ?? Int64(c.port))
        }
        if let db = try o.string("database") { c.database = try Database.parse(db, relativeTo: baseDirectory) }
        try parsePostgreSQL(o, into: &c, environment: environment)
        if let roots = try o.array("trustedRoots") {
            guard !roots.isEmpty else { throw ConfigurationError("trustedRoots", "must list at least one certificate") }
            c.trustedRootsDER = try roots.enumerated().map { (i, v) throws(ConfigurationError) in
                guard let p = v.stringValue else { throw ConfigurationError("trustedRoots[\(i)]", "must be a file path") }
                return try readFile(p, base: baseDirectory, key: "trustedRoots[\(i)]")
            }
        }
        guard let apps = try o.array("apps"), !apps.isEmpty else { throw ConfigurationError("apps", "must list at least one app") }
        var appStoreEntries: [(index: Int, json: JSONValue)] = []
        var packages = Set<String>()
        for (i, v) in apps.enumerated() {
            guard try isGooglePlayApp(v, path: "apps[\(i)]") else {
                appStoreEntries.append((i, v))
                continue
            }
            let play = try parseGooglePlayApp(v, path: "apps[\(i)]", base: baseDirectory)
            guard packages.insert(play.packageName).inserted else { throw ConfigurationError("apps[\(i)].packageName", "duplicates another app") }
            c.googlePlayApps.append(play)
        }
        c.apps = try appStoreEntries.map { (i, v) throws(ConfigurationError) in try parseApp(v, path: "apps[\(i)]", base: baseDirectory) }
        try parseApple2026(appStoreEntries, &c.apps)
        var seen = Set<String>()
        for (k, app) in c.apps.enumerated() where !seen.insert(app.bundleId).inserted {
            throw ConfigurationError("apps[\(appStoreEntries[k].index)].bundleId", "duplicates another app")
        }
        if let api = try o.object("appStoreServerAPI") {
            try api.check(allowedKeys: ["issuerId", "keyId", "privateKeyFile", "baseURL"])
            let keyFile = try api.requiredString("privateKeyFile")
            let pem = try readText(keyFile, base: baseDirectory, key: api.sub("privateKeyFile"))
            let baseURL = try api.string("baseURL")
            if let b = baseURL, !(b.hasPrefix("http://") || b.hasPrefix("https://")) {
                throw ConfigurationError(api.sub("baseURL"), "must be an http:// or https:// URL")
            }
            c.appStoreServerAPI = AppStoreServerAPI(issuerId: try api.requiredString("issuerId"), keyId: try api.requiredString("keyId"),
                                                    privateKeyPEM: pem, baseURL: baseURL)
        }
        if o.has("offers"), o.has("offerSigning") {
            throw ConfigurationError("offers", "give offerSigning (its newer spelling, with issuerId) or offers, not both")
        }
        for name in ["offerSigning", "offers"] {
            guard let signing = try o.object(name) else { continue }
            try signing.check(allowedKeys: name == "offers" ? ["keyId", "privateKeyFile"] : ["issuerId", "keyId", "privateKeyFile"])
            let pem = try readText(try signing.requiredString("privateKeyFile"), base: baseDirectory, key: signing.sub("privateKeyFile"))
            c.offerSigning = OfferSigning(issuerId: try signing.string("issuerId"), keyId: try signing.requiredString("keyId"), privateKeyPEM: pem)
        }
        if let auth = try o.object("auth") {
            try auth.check(allowedKeys: ["apiKeys", "customerTokens"])
            var keys: [APIKey] = []
            for (i, v) in (try auth.array("apiKeys") ?? []).enumerated() {
                let k = try StrictObject(v, path: auth.sub("apiKeys") + "[\(i)]")
                try k.check(allowedKeys: ["sha256", "scope"])
                let hex = try k.requiredString("sha256").lowercased()
                guard hex.count == 64, hex.allSatisfy({ $0.isHexDigit }) else {
                    throw ConfigurationError(k.sub("sha256"), "must be 64 hex digits (SHA-256 of the key)")
                }
                guard let scope = APIKey.Scope(rawValue: try k.requiredString("scope")) else {
                    throw ConfigurationError(k.sub("scope"), "must be backend or admin")
                }
                keys.append(APIKey(sha256: hex, scope: scope))
            }
            var secret: [UInt8]?
            if let ct = try auth.object("customerTokens") {
                try ct.check(allowedKeys: ["hs256SecretEnv"])
                let name = try ct.requiredString("hs256SecretEnv")
                guard let value = environment[name], value.utf8.count >= 32 else {
                    throw ConfigurationError(ct.sub("hs256SecretEnv"), "environment variable \(name) must hold a secret of at least 32 bytes")
                }
                secret = Array(value.utf8)
            }
            c.auth = Auth(apiKeys: keys, customerTokenSecret: secret)
        }
        if let w = try o.object("wallet") {
            try w.check(allowedKeys: ["spendOrder", "allowNegativeBalance"])
            if let order = try w.string("spendOrder") {
                guard let so = SpendOrder(rawValue: order) else { throw ConfigurationError(w.sub("spendOrder"), "must be freeFirst or paidFirst") }
                c.wallet.spendOrder = so
            }
            c.wallet.allowNegativeBalance = try w.bool("allowNegativeBalance") ?? c.wallet.allowNegativeBalance
        }
        if let a = try o.object("accounts") {
            try a.check(allowedKeys: ["transferPolicy"])
            if let p = try a.string("transferPolicy") {
                guard let tp = TransferPolicy(rawValue: p) else { throw ConfigurationError(a.sub("transferPolicy"), "must be keepFirstOwner or transfer") }
                c.transferPolicy = tp
            }
        }
        c.appReceiptRootsDER = try parseAppReceipts(o, baseDirectory: baseDirectory)
        try resolveExternal(&c, environment: environment)
        c.events = try parseEvents(o, environment: environment)
        try validateApple2026(c)
        c.exchangeRates = try parseExchangeRates(o)
        c.paywalls = try parsePaywalls(o)
        return c
    }

    static func parseApp(_ v: JSONValue, path: String, base: String) throws(ConfigurationError) -> App {
        let a = try StrictObject(v, path: path)
        try a.check(allowedKeys: Set(["store", "bundleId", "appAppleId", "environments", "storekitFile", "products", "offerRules", "consumptionInformation",
                                      "reportingTimeZone"]).union(externalAppKeys).union(Apple2026AppSettings.appKeys).union(metricsAppKeys))
        let bundleId = try a.requiredString("bundleId")
        let appAppleId = try a.int("appAppleId", range: 1...Int64.max)
        var envs: Set<AppStoreEnvironment> = [.production]
        if let list = try a.array("environments") {
            guard !list.isEmpty else { throw ConfigurationError(a.sub("environments"), "must list at least one environment") }
            envs = []
            for (i, e) in list.enumerated() {
                guard let s = e.stringValue, let env = AppStoreEnvironment.known.first(where: { $0.rawValue == s }) else {
                    throw ConfigurationError(a.sub("environments") + "[\(i)]", "must be Production, Sandbox, Xcode or LocalTesting")
                }
                envs.insert(env)
            }
        }
        if envs.contains(.production), appAppleId == nil {
            throw ConfigurationError(a.sub("appAppleId"), "is required when Production is accepted (Apple checks it)")
        }
        var catalog = Catalog()
        if let file = try a.string("storekitFile") {
            let bytes = try readFile(file, base: base, key: a.sub("storekitFile"))
            do {
                catalog = try StoreKitConfiguration(bytes: bytes).catalog
            } catch {
                throw ConfigurationError(a.sub("storekitFile"), "is not a readable StoreKit configuration: \(error)")
            }
        }
        if let products = try a.array("products") {
            let overrides = try Catalog(contractJSON: .array(products), path: a.sub("products"))
            for p in overrides.sortedProducts { catalog.upsert(catalog[p.productId].map { p.inheriting(from: $0) } ?? p) }
        }
        guard !catalog.products.isEmpty else { throw ConfigurationError(a.sub("products"), "the app needs a storekitFile or products") }
        var rules: [String: OfferRule] = [:]
        let promotional = Set(catalog.sortedProducts.flatMap(\.promotionalOffers).compactMap(\.id))
        for (i, v) in (try a.array("offerRules") ?? []).enumerated() {
            let r = try StrictObject(v, path: a.sub("offerRules") + "[\(i)]")
            try r.check(allowedKeys: ["offerId", "eligibility", "maxRedemptions"])
            let offerId = try r.requiredString("offerId")
            guard promotional.contains(offerId) else {
                throw ConfigurationError(r.sub("offerId"), "names no promotional offer of the app's catalog")
            }
            guard rules[offerId] == nil else { throw ConfigurationError(r.sub("offerId"), "has a rule already") }
            guard let audience = OfferAudience(rawValue: try r.requiredString("eligibility")) else {
                throw ConfigurationError(r.sub("eligibility"), "must be current, lapsed, currentOrLapsed or anyone")
            }
            rules[offerId] = OfferRule(offerId: offerId, eligibility: audience,
                                       maxRedemptions: try r.int("maxRedemptions", range: 1...1_000_000).map { Int($0) })
        }
        let zone = try a.string("reportingTimeZone") ?? ReportingDay.defaultTimeZone
        guard ReportingDay.isKnownTimeZone(zone) else {
            throw ConfigurationError(a.sub("reportingTimeZone"), "must be an IANA time zone name such as Asia/Tokyo")
        }
        var app = App(bundleId: bundleId, appAppleId: appAppleId, environments: envs, catalog: catalog, offerRules: rules,
                      reportingTimeZone: zone)
        app.consumptionInformation = try parseConsumptionInformation(a)
        app.external = try parseExternal(a)
        app.commissionRate = try parseCommissionRate(a)
        return app
    }

    static func resolve(_ path: String, relativeTo base: String?) -> String {
        guard let base, !path.hasPrefix("/") else { return path }
        return (base as NSString).appendingPathComponent(path)
    }

    static func readFile(_ path: String, base: String, key: String) throws(ConfigurationError) -> [UInt8] {
        let full = resolve(path, relativeTo: base)
        guard let data = FileManager.default.contents(atPath: full) else { throw ConfigurationError(key, "cannot read file \(full)") }
        guard data.count <= 8 << 20 else { throw ConfigurationError(key, "file \(full) is larger than 8 MiB") }
        return [UInt8](data)
    }

    static func readText(_ path: String, base: String, key: String) throws(ConfigurationError) -> String {
        guard let s = String(validating: try readFile(path, base: base, key: key), as: UTF8.self) else {
            throw ConfigurationError(key, "file is not UTF-8 text")
        }
        return s
    }

    /// Whether `host` is a loopback address (local mode and no-auth setups may only bind those).
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

extension Product {
    /// A config `products` entry overriding a `.storekit` product keeps what the config leaves unsaid
    /// (price, period, level, offers, name), so coin amounts can be added to a synced StoreKit file.
    func inheriting(from base: Product) -> Product {
        var p = self
        p.displayName = p.displayName ?? base.displayName
        p.priceMilli = p.priceMilli ?? base.priceMilli
        p.currency = p.currency ?? base.currency
        if p.kind == base.kind, p.kind == .autoRenewable {
            p.period = base.period ?? p.period
            p.level = base.level
            p.familyShareable = base.familyShareable
            if p.introductoryOffer == nil { p.introductoryOffer = base.introductoryOffer }
            if p.promotionalOffers.isEmpty { p.promotionalOffers = base.promotionalOffers }
            if p.offerCodes.isEmpty { p.offerCodes = base.offerCodes }
            if p.winBackOffers.isEmpty { p.winBackOffers = base.winBackOffers }
        }
        return p
    }
}
