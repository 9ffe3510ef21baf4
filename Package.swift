// swift-tools-version:6.0
import PackageDescription

// Kakin: a self-hostable in-app-purchase backend. Dependency direction:
// KakinCore (pure) <- AppStoreSecurity, KakinStorage, AppStoreSimulator, AppStoreClient, KakinAdmin <- KakinServer <- kakin.
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

        // Pure domain: models, rules, errors. No I/O, no C, no clock reads.
        .target(name: "KakinCore", linkerSettings: [.linkedLibrary("m")]),
        // JWS / X.509 / ES256 over OpenSSL.
        .target(name: "AppStoreSecurity", dependencies: ["KakinCore", "COpenSSL"], exclude: ["Resources", "README.md"]),
        // SQL storage: SQLite with group commit; the repository over it.
        .target(name: "KakinStorage", dependencies: ["KakinCore", "CSQLite"], exclude: ["SQL/README.md"]),
        // The PostgreSQL engine of KakinStorage's SQLDatabase, over libpq: many Kakin processes on one database.
        .target(name: "KakinPostgreSQL", dependencies: ["KakinCore", "KakinStorage", "CLibPQ"], exclude: ["README.md"]),
        // HTTP over libmicrohttpd. Knows nothing about purchases.
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"], exclude: ["README.md"]),
        // The App Store Server API client (URLSession): talks to Apple or to the simulator alike.
        .target(name: "AppStoreClient", dependencies: ["KakinCore", "AppStoreSecurity"], exclude: ["README.md"]),
        // The fake App Store: catalog, clock, subscription engine, signing CA, Server API, notifications.
        .target(name: "AppStoreSimulator", dependencies: ["KakinCore", "AppStoreSecurity", "HTTPServer"], exclude: ["README.md"]),
        // The support desk: /admin/ pages (server-rendered, escaped HTML), admin sessions, search, recent errors,
        // the unused paid-coin balance report. Over the store; no App Store or verification code of its own.
        .target(name: "KakinAdmin", dependencies: ["KakinCore", "KakinStorage", "HTTPServer", "AppStoreSecurity"], exclude: ["README.md"]),
        // Events out: the event types and JSON, the outbox entry point the ingest calls inside its write, webhook
        // endpoints, the retry schedule, the sender and the delivery worker. No HTTP server, no C.
        .target(name: "KakinEvents", dependencies: ["KakinCore", "KakinStorage", "AppStoreSecurity"], exclude: ["README.md"]),
        // `kakin events listen`: a webhook receiver that checks Kakin-Signature and prints one event a line.
        .target(name: "KakinEventsListener", dependencies: ["KakinCore", "AppStoreSecurity", "HTTPServer"], exclude: ["README.md"]),
        // Composition: config, routes, auth, the notification inbox, the App Store Server API use, local mode, commands.
        .target(name: "KakinServer", dependencies: ["KakinCore", "AppStoreSecurity", "KakinStorage", "KakinPostgreSQL", "HTTPServer", "AppStoreClient", "AppStoreSimulator", "KakinAdmin",
                                                    "KakinEvents", "KakinEventsListener"]),
        // `kakin app`: a command-line app on KakinKit and the simulator adapter (every seed flow in a terminal).
        .target(name: "KakinAppCommand", dependencies: [
            .product(name: "KakinKit", package: "KakinKit"), .product(name: "KakinKitSimulator", package: "KakinKit"),
        ]),
        .executableTarget(name: "kakin", dependencies: ["KakinServer", "KakinAppCommand"]),
        .executableTarget(name: "KakinBench", dependencies: ["KakinServer", "KakinCore", "KakinStorage", "KakinPostgreSQL", "AppStoreSecurity"], path: "Benchmarks/KakinBench"),

        .testTarget(name: "KakinCoreTests", dependencies: ["KakinCore"]),
        .testTarget(name: "AppStoreSecurityTests", dependencies: ["AppStoreSecurity", "KakinServer"], exclude: ["Interop"]),
        // The tests' throwaway PostgreSQL (a schema per test); used by test targets only.
        .target(name: "KakinTestPostgres", dependencies: ["KakinPostgreSQL", "KakinStorage"], path: "Tests/KakinTestPostgres"),
        .testTarget(name: "KakinStorageTests", dependencies: ["KakinStorage", "KakinPostgreSQL", "KakinTestPostgres"]),
        .testTarget(name: "KakinPostgreSQLTests", dependencies: ["KakinPostgreSQL", "KakinStorage", "KakinTestPostgres"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "AppStoreClientTests", dependencies: ["AppStoreClient", "AppStoreSimulator"]),
        .testTarget(name: "AppStoreSimulatorTests", dependencies: ["AppStoreSimulator"], exclude: ["Interop", "Fixtures"]),
        .testTarget(name: "KakinAdminTests", dependencies: ["KakinAdmin", "KakinCore", "KakinStorage"]),
        .testTarget(name: "KakinEventsTests", dependencies: ["KakinEvents", "KakinEventsListener", "KakinCore", "KakinStorage", "KakinPostgreSQL",
                                                            "KakinTestPostgres", "HTTPServer", "AppStoreSecurity"]),
        .testTarget(name: "KakinServerTests", dependencies: ["KakinServer", "KakinCore", "KakinStorage", "KakinPostgreSQL", "KakinTestPostgres", "HTTPServer", "AppStoreSecurity", "AppStoreSimulator", "KakinAdmin",
                                                            .product(name: "KakinKit", package: "KakinKit"),
                                                            .product(name: "KakinKitSimulator", package: "KakinKit")]),
    ]
)

// libFuzzer targets (Fuzz/README.md): built only by `scripts/fuzz`, as libFuzzer supplies their `main`.
if Context.environment["KAKIN_FUZZ"] == "1" {
    package.targets.append(.executableTarget(name: "KakinFuzz", dependencies: ["KakinCore", "AppStoreSecurity", "KakinServer"], path: "Fuzz/KakinFuzz"))
}
