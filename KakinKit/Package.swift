// swift-tools-version:6.0
import PackageDescription

// KakinKit: the app side of Kakin. Its own package so that an iOS/macOS app adds it without the server's
// C libraries (libmicrohttpd, OpenSSL, SQLite) and at the app's own deployment target. Nothing here depends
// on the root package (the root depends on this one, for `kakin app`), so Kakin's JSON is decoded here.
let package = Package(
    name: "KakinKit",
    platforms: [.iOS(.v16), .macOS(.v13)],
    products: [
        .library(name: "KakinKit", targets: ["KakinKit"]),
        .library(name: "KakinKitStoreKit", targets: ["KakinKitStoreKit"]),
        .library(name: "KakinKitSimulator", targets: ["KakinKitSimulator"]),
    ],
    targets: [
        // The store-agnostic core: PurchaseCoordinator over the Store and Backend protocols, Kakin's HTTP API.
        .target(name: "KakinKit"),
        // StoreKit 2 as a Store. On Linux it compiles against StoreKitStandIn (same signatures), so CI type-checks it.
        .target(name: "KakinKitStoreKit", dependencies: [
            "KakinKit",
            .target(name: "StoreKitStandIn", condition: .when(platforms: [.linux])),
        ]),
        // Linux only: StoreKit's declarations the adapter uses, backed by a scriptable in-memory App Store.
        // Its sources are wrapped in `#if os(Linux)`, and its module name is not `StoreKit`: on Apple
        // platforms it is an empty module that can never shadow the real framework.
        .target(name: "StoreKitStandIn"),
        // Kakin's App Store simulator (`/simulator/v1/…`) and Google Play simulator (`/play-simulator/v1/…`) as Stores, with a
        // device-side queue in a directory.
        .target(name: "KakinKitSimulator", dependencies: ["KakinKit"]),

        // The coordinator against in-memory fakes of the App Store and Kakin; on Linux also the StoreKit
        // adapter against the stand-in.
        .testTarget(name: "KakinKitTests", dependencies: [
            "KakinKit", "KakinKitStoreKit",
            .target(name: "StoreKitStandIn", condition: .when(platforms: [.linux])),
        ]),
    ]
)
