import Foundation
import GooglePlaySimulator
import KakinCore
import KakinService
import KakinSystem
import Testing
@testable import KakinServer

/// `apps[]` entries with `"store": "googlePlay"` (the contract's planned shape), validated with one line naming the key.
@Suite struct GooglePlayConfigTests {
    static func withAccountFile(_ body: (URL) throws -> Void) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-play-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let play = try GooglePlaySimulator(configuration: .demo(seed: 3), clock: SystemClock(), wall: SystemClock())
        try Data(play.serviceAccountFile(tokenURI: "https://oauth2.googleapis.com/token")).write(to: dir.appendingPathComponent("play.json"))
        try body(dir)
    }

    static let playApp: JSONValue = [
        "store": "googlePlay", "packageName": "com.example.video", "serviceAccountFile": "play.json",
        "rtdn": ["audience": "https://kakin.example.com/v1/notifications/googleplay", "serviceAccountEmail": "push@p.iam.gserviceaccount.com"],
        "products": [["productId": "coins_500", "type": "consumable", "coins": 500, "bonusCoins": 50],
                     ["productId": "premium", "type": "subscription", "groupId": "premium", "basePlans": ["monthly", "yearly"]]],
    ]
    static let appStoreApp: JSONValue = [
        "bundleId": "com.example.video", "environments": ["Sandbox"],
        "products": [["productId": "premium.monthly", "type": "autoRenewable", "groupId": "premium"]],
    ]

    static func parse(_ apps: [JSONValue], in dir: URL) throws(ConfigurationError) -> Configuration {
        try Configuration.parse(["apps": .array(apps)], baseDirectory: dir.path, environment: [:])
    }

    @Test func aPlayAppBesideTheAppStoreAppSharesItsGroups() throws {
        try Self.withAccountFile { dir in
            let c = try Self.parse([Self.appStoreApp, Self.playApp], in: dir)
            #expect(c.apps.map(\.bundleId) == ["com.example.video"])
            let play = try #require(c.googlePlayApps.first)
            #expect(play.packageName == "com.example.video" && play.apiRoot == "https://androidpublisher.googleapis.com/")
            #expect(play.catalog["coins_500"]?.coins == 500 && play.catalog["coins_500"]?.bonusCoins == 50)
            #expect(play.catalog["premium"]?.kind == .autoRenewable && play.catalog["premium"]?.groupId == "premium")
            #expect(play.rtdn?.certsURL == "https://www.googleapis.com/oauth2/v3/certs" && play.rtdn?.issuer == nil)
            #expect(play.serviceAccount.clientEmail.hasSuffix(".iam.gserviceaccount.com"))
            #expect(play.voidedPollIntervalMs == 6 * 3_600_000)
            var daily = Self.playApp.objectValue!
            daily["voidedPurchasesPollMinutes"] = 1440
            #expect(try Self.parse([Self.appStoreApp, .object(daily)], in: dir).googlePlayApps.first?.voidedPollIntervalMs == 86_400_000)
        }
    }

    @Test func aBadPlayEntryNamesItsKey() throws {
        try Self.withAccountFile { dir in
            func refusal(_ change: (inout [String: JSONValue]) -> Void) -> String {
                var app = Self.playApp.objectValue!
                change(&app)
                do {
                    _ = try Self.parse([Self.appStoreApp, .object(app)], in: dir)
                    return "accepted"
                } catch {
                    return error.description
                }
            }
            #expect(refusal { $0["store"] = "amazon" } == "apps[1].store: must be appStore or googlePlay")
            #expect(refusal { $0["bundleId"] = "x" }.hasPrefix("apps[1]"))
            #expect(refusal { $0["packageName"] = "nodots" }.hasPrefix("apps[1].packageName"))
            #expect(refusal { $0["serviceAccountFile"] = "missing.json" }.hasPrefix("apps[1].serviceAccountFile"))
            #expect(refusal { $0["apiRoot"] = "ftp://x" }.hasPrefix("apps[1].apiRoot"))
            #expect(refusal { $0["products"] = [["productId": "premium", "type": "subscription"]] } == "apps[1].products[0].groupId: is required for a subscription")
            #expect(refusal { $0["products"] = [["productId": "c", "type": "consumable"]] }.hasPrefix("apps[1].products[0].coins"))
            #expect(refusal { $0["rtdn"] = ["audience": "a"] } == "apps[1].rtdn.serviceAccountEmail: is required")
            #expect(refusal { $0["voidedPurchasesPollMinutes"] = 1441 }.hasPrefix("apps[1].voidedPurchasesPollMinutes"))
            #expect(refusal { $0["voidedPurchasesPollMinutes"] = 4 }.hasPrefix("apps[1].voidedPurchasesPollMinutes"))
            #expect(throws: ConfigurationError.self) { try Self.parse([Self.playApp, Self.playApp], in: dir) }
        }
    }
}
