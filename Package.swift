// swift-tools-version:6.0
import PackageDescription

// Kakin: a self-hostable in-app-purchase backend. Dependency direction:
// KakinCore (pure, with KakinMetrics and KakinOfferings over it) <- KakinSystem (clock, IDs), KakinCrypto (<- AppStoreSecurity, GooglePlaySecurity), KakinStorage (<- KakinSQLite,
// KakinPostgreSQL), AppStoreSimulator, AppStoreClient, GooglePlaySimulator, GooglePlayClient, KakinAdmin <- KakinServer <- kakin
// (with KakinAppCommand, KakinVerifyCommand).
// C libraries live only in the C* system-library targets and the one Swift target that wraps each.
let package = Package(
    name: "Kakin",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "kakin", targets: ["kakin"]),
        .executable(name: "kakin-bench", targets: ["KakinBench"]),
    ],
    // KakinKit (the app-side SDK) is its own package so apps add it without the server's C libraries.
    dependencies: [.package(path: "KakinKit")],
    targets: [
        // C libraries (Debian -dev packages), each with a small shim header.
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // Pure domain: models, rules, errors. No I/O, no C, no clock reads.
        .target(name: "KakinCore", exclude: ["README.md"], linkerSettings: [.linkedLibrary("m")]),
        // The real world the core is handed: the wall clock and random IDs (production's Clock and IDGenerator).
        .target(name: "KakinSystem", dependencies: ["KakinCore"], exclude: ["README.md"]),
        // Generic cryptography over OpenSSL, the one Swift target wrapping COpenSSL: keys (P-256, RSA), ES256/RS256, SHA-256,
        // HMAC, X.509 (parse, build, path validation), PKCS#7, compact JWS/JWT, JWKS.
        .target(name: "KakinCrypto", dependencies: ["KakinCore", "COpenSSL"], exclude: ["README.md"]),
        // Apple's verification rules over KakinCrypto: signed App Store data, its signing CA, API JWTs, offers, receipts.
        .target(name: "AppStoreSecurity", dependencies: ["KakinCore", "KakinCrypto"], exclude: ["Resources", "README.md"]),
        // Google Play's rules over KakinCrypto: service accounts and their JWT-bearer assertions, RTDN push tokens (OIDC).
        .target(name: "GooglePlaySecurity", dependencies: ["KakinCore", "KakinCrypto"], exclude: ["README.md"]),
        // Outbound HTTP for the stores' API clients: the transport protocol, its URLSession implementation, retry backoff.
        .target(name: "StoreAPITransport", exclude: ["README.md"]),
        // SQL storage: the engine-independent SQLDatabase API and the repository over it (no C).
        .target(name: "KakinStorage", dependencies: ["KakinCore"], exclude: ["README.md", "SQL/README.md"]),
        // The SQLite engine of KakinStorage's SQLDatabase: group commit on one writer thread, readers, checkpoints, backup.
        .target(name: "KakinSQLite", dependencies: ["KakinCore", "KakinStorage", "CSQLite"], exclude: ["README.md"]),
        // The PostgreSQL engine of KakinStorage's SQLDatabase, over libpq: many Kakin processes on one database.
        .target(name: "KakinPostgreSQL", dependencies: ["KakinCore", "KakinStorage", "CLibPQ"], exclude: ["README.md"]),
        // HTTP over libmicrohttpd. Knows nothing about purchases.
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"], exclude: ["README.md"]),
        // A lean HTTP/1.1 client over libcurl's multi interface (connections kept alive, one thread): the webhook sender's.
        .target(name: "KakinHTTPClient", dependencies: ["CCurl"], exclude: ["README.md"]),
        // Purchases outside the App Store, pure: Stripe webhooks (signature, events → facts, out-of-order subscription
        // state), the generic source's input, Apple's external purchase tokens and reports. No HTTP, no storage, no C.
        .target(name: "KakinExternal", dependencies: ["KakinCore", "KakinCrypto", "AppStoreSecurity"], exclude: ["README.md"]),
        // The App Store Server API client (URLSession): talks to Apple or to the simulator alike.
        .target(name: "AppStoreClient", dependencies: ["KakinCore", "KakinCrypto", "AppStoreSecurity", "StoreAPITransport"], exclude: ["README.md"]),
        // The fake App Store: catalog, clock, subscription engine, signing CA, Server API, notifications.
        .target(name: "AppStoreSimulator", dependencies: ["KakinCore", "KakinCrypto", "KakinSystem", "AppStoreSecurity", "HTTPServer"], exclude: ["README.md"]),
        // The Google Play Developer API client (service-account OAuth, retries): talks to Google or to the Play simulator alike;
        // and the JWKS fetch behind RTDN push-token checks.
        .target(name: "GooglePlayClient", dependencies: ["KakinCore", "KakinCrypto", "GooglePlaySecurity", "StoreAPITransport"], exclude: ["README.md"]),
        // The fake Google Play: products and base plans, purchase engine, Developer API, OAuth token endpoint, RTDN push.
        .target(name: "GooglePlaySimulator", dependencies: ["KakinCore", "KakinCrypto", "GooglePlaySecurity", "HTTPServer"], exclude: ["README.md"]),
        // The support desk: /admin/ pages (server-rendered, escaped HTML), admin sessions, search, recent errors,
        // the unused paid-coin balance report. An adapter over KakinService's use cases and the store's queries.
        .target(name: "KakinAdmin", dependencies: ["KakinCore", "KakinService", "KakinEvents", "KakinMetrics", "KakinOfferings", "KakinStorage", "HTTPServer", "KakinCrypto"], exclude: ["README.md"]),
        // Business numbers, pure: facts → each customer's share of the daily rollups; rollups → the overview and series.
        .target(name: "KakinMetrics", dependencies: ["KakinCore"], exclude: ["README.md"]),
        // Offerings and experiments, pure: offerings, placements and their targeting rules, experiments (validation,
        // sticky assignment), and an experiment's results with their statistics. No SQL, HTTP or clock.
        .target(name: "KakinOfferings", dependencies: ["KakinCore", "KakinMetrics"], exclude: ["README.md"]),
        // The use cases: one ingest path for every signed fact (verify → owner → plan in the core → one write → typed
        // change), the notification inbox, the App Store jobs, wallet, offers and status reads. No HTTP, no C.
        .target(name: "KakinService", dependencies: ["KakinCore", "KakinSystem", "KakinCrypto", "AppStoreSecurity", "KakinStorage", "StoreAPITransport", "AppStoreClient", "KakinExternal", "KakinEvents",
                                                    "KakinMetrics", "KakinOfferings", "GooglePlaySecurity", "GooglePlayClient"],
                exclude: ["README.md"]),
        // Events out: the event types and JSON, the outbox entry point the ingest calls inside its write, webhook
        // endpoints, the retry schedule, the sender and the delivery worker. No HTTP server, no C.
        .target(name: "KakinEvents", dependencies: ["KakinCore", "KakinStorage", "KakinCrypto", "KakinHTTPClient"], exclude: ["README.md"]),
        // `kakin events listen`: a webhook receiver that checks Kakin-Signature and prints one event a line.
        .target(name: "KakinEventsListener", dependencies: ["KakinCore", "KakinCrypto", "HTTPServer"], exclude: ["README.md"]),
        // Composition: config, HTTP routes (thin adapters over KakinService), auth, local mode, commands.
        .target(name: "KakinServer", dependencies: ["KakinCore", "KakinService", "KakinMetrics", "KakinOfferings", "KakinSystem", "KakinCrypto", "AppStoreSecurity", "KakinStorage", "KakinSQLite", "KakinPostgreSQL", "HTTPServer", "AppStoreClient", "AppStoreSimulator", "GooglePlaySimulator", "KakinAdmin", "KakinExternal",
                                                    "KakinEvents", "KakinEventsListener", "GooglePlaySecurity", "GooglePlayClient"], exclude: ["README.md"]),
        // `kakin app`: a command-line app on KakinKit and the simulator adapter (every seed flow in a terminal).
        .target(name: "KakinAppCommand", dependencies: [
            .product(name: "KakinKit", package: "KakinKit"), .product(name: "KakinKitSimulator", package: "KakinKit"),
        ], exclude: ["README.md"]),
        // `kakin verify`: App Store signed data verified and printed, alone or a stream of lines on every core.
        .target(name: "KakinVerifyCommand", dependencies: ["KakinCore", "KakinSystem", "AppStoreSecurity"], exclude: ["README.md"]),
        // `kakin simulate`: the whole system (simulator, use cases on a real database, KakinKit on simulated phones) on one
        // clock and one seed, with faults injected and every invariant checked after every step.
        .target(name: "KakinSimulation", dependencies: [
            "KakinCore", "KakinService", "KakinStorage", "KakinSQLite", "KakinPostgreSQL", "KakinEvents", "KakinAdmin", "KakinOfferings", "AppStoreSimulator",
            "AppStoreClient", "AppStoreSecurity", "GooglePlaySimulator", "GooglePlaySecurity", "StoreAPITransport", "HTTPServer",
            .product(name: "KakinKit", package: "KakinKit"),
        ], exclude: ["README.md"]),
        .executableTarget(name: "kakin", dependencies: ["KakinServer", "KakinAppCommand", "KakinVerifyCommand", "KakinSimulation"], exclude: ["README.md"]),
        .executableTarget(name: "KakinBench", dependencies: ["KakinServer", "KakinCore", "KakinStorage", "KakinSQLite", "KakinPostgreSQL", "AppStoreSecurity",
                                                                 "KakinService", "KakinMetrics", "KakinEvents"], path: "Benchmarks/KakinBench"),

        .testTarget(name: "KakinCoreTests", dependencies: ["KakinCore"]),
        .testTarget(name: "KakinMetricsTests", dependencies: ["KakinMetrics", "KakinCore"]),
        .testTarget(name: "KakinOfferingsTests", dependencies: ["KakinOfferings", "KakinMetrics", "KakinCore"]),
        .testTarget(name: "KakinExternalTests", dependencies: ["KakinExternal", "KakinCore", "KakinCrypto"], exclude: ["Interop"]),
        .testTarget(name: "AppStoreSecurityTests", dependencies: ["AppStoreSecurity", "KakinCrypto", "KakinVerifyCommand"], exclude: ["Interop"]),
        // The tests' throwaway PostgreSQL (a schema per test) and stores on both engines; used by test targets only.
        .target(name: "KakinTestPostgres", dependencies: ["KakinPostgreSQL", "KakinSQLite", "KakinStorage"], path: "Tests/KakinTestPostgres", exclude: ["README.md"]),
        .testTarget(name: "KakinStorageTests", dependencies: ["KakinStorage", "KakinSQLite", "KakinPostgreSQL", "KakinTestPostgres"]),
        .testTarget(name: "KakinServiceTests", dependencies: ["KakinService", "KakinCore", "KakinCrypto", "KakinStorage", "AppStoreSecurity", "KakinTestPostgres", "KakinExternal",
                                                            "KakinOfferings", "KakinMetrics", "KakinEvents", "KakinSQLite", "KakinPostgreSQL"]),
        .testTarget(name: "KakinPostgreSQLTests", dependencies: ["KakinPostgreSQL", "KakinStorage", "KakinTestPostgres"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "KakinCryptoTests", dependencies: ["KakinCrypto", "KakinCore"], exclude: ["Vectors"]),
        .testTarget(name: "GooglePlaySimulatorTests", dependencies: ["GooglePlaySimulator", "GooglePlaySecurity", "KakinCrypto", "KakinCore", "HTTPServer"]),
        .testTarget(name: "GooglePlayClientTests", dependencies: ["GooglePlayClient", "GooglePlaySimulator", "GooglePlaySecurity", "KakinCrypto", "KakinCore",
                                                              "StoreAPITransport", "HTTPServer"], exclude: ["Interop"]),
        .testTarget(name: "AppStoreClientTests", dependencies: ["AppStoreClient", "AppStoreSimulator", "KakinExternal", "KakinCrypto", "StoreAPITransport"]),
        .testTarget(name: "AppStoreSimulatorTests", dependencies: ["AppStoreSimulator", "KakinSystem", "KakinExternal", "KakinCrypto"], exclude: ["Interop", "Fixtures"]),
        .testTarget(name: "KakinAdminTests", dependencies: ["KakinAdmin", "KakinCore", "KakinStorage"]),
        .testTarget(name: "KakinEventsTests", dependencies: ["KakinEvents", "KakinEventsListener", "KakinCore", "KakinStorage", "KakinSQLite", "KakinPostgreSQL",
                                                            "KakinTestPostgres", "HTTPServer", "KakinCrypto", "KakinHTTPClient"]),
        .testTarget(name: "KakinSimulationTests", dependencies: ["KakinSimulation", "KakinTestPostgres", "KakinCore", "KakinService", "KakinStorage", "KakinAdmin"]),
        .testTarget(name: "KakinServerTests", dependencies: ["KakinServer", "KakinService", "KakinEvents", "KakinOfferings", "KakinEventsListener", "KakinCore", "KakinExternal", "KakinSystem", "KakinStorage", "KakinSQLite", "KakinPostgreSQL", "KakinTestPostgres", "HTTPServer", "KakinCrypto", "AppStoreSecurity", "AppStoreSimulator", "KakinAdmin",
                                                            "GooglePlaySimulator", "GooglePlaySecurity",
                                                            .product(name: "KakinKit", package: "KakinKit"),
                                                            .product(name: "KakinKitSimulator", package: "KakinKit")]),
    ]
)

// libFuzzer targets (Fuzz/README.md): built only by `scripts/fuzz`, as libFuzzer supplies their `main`.
if Context.environment["KAKIN_FUZZ"] == "1" {
    package.targets.append(.executableTarget(name: "KakinFuzz", dependencies: ["KakinCore", "KakinCrypto", "AppStoreSecurity", "KakinServer", "KakinService"], path: "Fuzz/KakinFuzz"))
}
