import AppStoreClient
import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
@testable import KakinServer
import KakinService
import Testing

/// Apple's 2026 additions where they meet the server's configuration and local mode, without Kakin's
/// routes (the lead wires `serverFinish` and Get Retention Message into the ingest path).
@Suite struct Apple2026ConfigTests {
    let parse = AppStoreOperationsConfig()

    static func app(_ extra: String) -> String {
        #"{"bundleId": "dev.kakin.demo", "environments": ["Sandbox"], "products": [{"productId": "premium.monthly", "type": "autoRenewable", "groupId": "premium", "period": "P1M", "level": 2, "offers": [{"id": "promo.3m.half", "type": "promotional", "mode": "payAsYouGo", "period": "P1M", "numberOfPeriods": 3, "price": 490}]}, {"productId": "premium.yearly", "type": "autoRenewable", "groupId": "premium", "period": "P1Y", "level": 2, "monthlyBillingWithCommitment": true}]\#(extra)}"#
    }

    /// `appStoreServerAPI` with a key file (the config only reads it; nothing is signed here).
    static func withAPI(_ apps: String, _ body: (String) throws -> Void) throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-apple2026-\(UUID().uuidString).p8")
        try Data("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n".utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        try body(#"{"apps": [\#(apps)], "appStoreServerAPI": {"issuerId": "i", "keyId": "k", "privateKeyFile": "\#(keyFile.path)"}}"#)
    }

    @Test func retentionMessagingAndServerFinishAreReadPerApp() throws {
        let none = try parse.parse(#"{"apps": [\#(Self.app(""))]}"#)
        #expect(none.apple2026.isEmpty)
        #expect(none.apple2026Settings(bundleId: "dev.kakin.demo").serverFinish == nil)
        #expect(none.apps[0].catalog["premium.yearly"]?.monthlyBillingWithCommitment == true)
        var parsed: Configuration?
        try Self.withAPI(Self.app(#", "serverFinish": {"afterSeconds": 600}, "retentionMessaging": {"rules": [{"productIds": ["premium.monthly"], "messageId": "6B6D5E2A-1C3F-4D7E-9A0B-2F4C6E8A0D1B", "offerId": "promo.3m.half"}, {"alternateProductId": "premium.monthly"}], "defaultMessageId": "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"}"#)) {
            parsed = try parse.parse($0)
        }
        let c = try #require(parsed)
        #expect(c.apple2026Settings(bundleId: "dev.kakin.demo").serverFinish == ServerFinishPolicy(afterSeconds: 600))
        #expect(c.apple2026Settings(bundleId: "dev.kakin.demo").retentionMessaging == RetentionMessagingConfig(rules: [
            .init(productIds: ["premium.monthly"], messageId: "6b6d5e2a-1c3f-4d7e-9a0b-2f4c6e8a0d1b", offerId: "promo.3m.half"),
            .init(alternateProductId: "premium.monthly"),
        ], defaultMessageId: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"))
    }

    @Test func badSettingsNameTheirKey() {
        func error(_ extra: String) -> String { parse.error(#"{"apps": [\#(Self.app(extra))]}"#) }
        #expect(error(#", "serverFinish": {}"#).hasPrefix("apps[0].serverFinish.afterSeconds: is required"))
        #expect(error(#", "serverFinish": {"afterSeconds": 5}"#).hasPrefix("apps[0].serverFinish.afterSeconds"))
        #expect(error(#", "serverFinish": {"afterSeconds": 600, "x": 1}"#) == "apps[0].serverFinish.x: unknown key")
        #expect(error(#", "retentionMessaging": {"rules": [{"productIds": ["premium.monthly"]}]}"#)
            == "apps[0].retentionMessaging.rules[0]: needs messageId, offerId or alternateProductId")
        #expect(error(#", "retentionMessaging": {"rules": [{"offerId": "promo.none"}]}"#).hasPrefix("apps[0].retentionMessaging.rules[0].offerId"))
        #expect(error(#", "retentionMessaging": {"rules": [{"messageId": "hello"}]}"#).hasPrefix("apps[0].retentionMessaging.rules[0].messageId"))
        #expect(error(#", "retentionMessaging": {"rules": [], "other": 1}"#) == "apps[0].retentionMessaging.other: unknown key")
        // What they need from the rest of the file.
        #expect(error(#", "serverFinish": {"afterSeconds": 600}"#)
            == "apps[0].serverFinish: needs appStoreServerAPI (Finish Transaction is an App Store Server API call)")
        #expect(error(#", "retentionMessaging": {"rules": [{"offerId": "promo.3m.half"}]}"#)
            == "apps[0].retentionMessaging: offers a promotional offer: needs offerSigning (with issuerId) or appStoreServerAPI to sign it")
        #expect(error(#", "retentionMessaging": {"rules": [{"messageId": "6b6d5e2a-1c3f-4d7e-9a0b-2f4c6e8a0d1b"}]}"#) == "no error")
    }

    @Test func localModeDemoAppHasTheContractsSettings() {
        let config = LocalMode.configuration()
        let app = config.apps[0]
        let settings = config.apple2026Settings(bundleId: app.bundleId)
        #expect(settings.serverFinish?.afterSeconds == 600)
        #expect(settings.retentionMessaging?.rules.first?.offerId == "promo.3m.half")
        #expect(settings.retentionMessaging?.rules.first?.productIds == ["premium.monthly"])
        #expect(app.catalog["premium.yearly"]?.monthlyBillingWithCommitment == true)
        #expect((try? settings.retentionMessaging?.validate(catalog: app.catalog, path: "apps[0].retentionMessaging")) != nil)
    }
}

/// Seed 000's worst case, closed by Finish Transaction: the app paid and was killed before it reached Kakin;
/// the App Store's notification credited the coins; the server finished the transaction at the App Store
/// (here the `AppStoreClient` call the lead's `serverFinish` job makes); the device's queue follows.
@Suite struct ServerFinishTests {
    @Test func aTransactionTheServerFinishedLeavesTheDevicesQueueAndIsCreditedOnce() async throws {
        try await SimulatedKakin.with { sk in
            let device = KakinAppTests.deviceDirectory(sk)
            let buy = try await KakinAppTests.app(sk, device, ["buy", "coins.500", "--fail-at", "send"])
            #expect(buy.status == 1, "\(buy)")
            let waiting = try await KakinAppTests.app(sk, device, ["unfinished"])
            #expect(waiting.stdout.hasSuffix(" coins.500\n"), "\(waiting)")
            let transactionId = String(waiting.stdout.split(separator: " ")[0])

            // The notification credited it; ten minutes pass with no word from the app.
            #expect(await KakinAppTests.settledWallet(sk).purchases == 1)
            try await sk.advance(to: sk.nowMs + 601_000)
            let key = sk.simulator.apiKey
            var configuration = AppStoreServerAPIConfiguration(
                issuerId: key.issuerId, keyId: key.keyId, privateKey: try P256PrivateKey(pemPKCS8: key.privateKeyPEM),
                bundleId: Catalog.demoBundleId, server: .baseURL("http://127.0.0.1:\(sk.runtime.port)/simulator", environment: .sandbox))
            configuration.retriesMax = 0
            let client = try AppStoreServerAPIClient(configuration: configuration, clock: sk.simulator.clock)
            try await client.finishTransaction(transactionId: transactionId, environment: .sandbox)

            let after = try await KakinAppTests.app(sk, device, ["unfinished"])
            #expect(after.stdout == "none\n", "\(after)")
            // The next launch has nothing to retry, and the coins were credited once.
            let launch = try await KakinAppTests.app(sk, device, ["launch"])
            #expect(launch.status == 0, "\(launch)")
            #expect(!launch.stdout.contains("retry \(transactionId)"), "\(launch)")
            let settled = await KakinAppTests.settledWallet(sk)
            #expect(settled.paid == 500 && settled.free == 50 && settled.purchases == 1)
        }
    }
}

/// `apps[].consumptionInformation.refundPreference`: Kakin states the refund its ledger argues for in the V2 body.
@Suite(.serialized) struct RefundPreferenceConfigTests {
    let parse = AppStoreOperationsConfig()

    @Test func refundPreferenceIsReadAndCheckedPerApp() throws {
        func policy(_ extra: String) throws -> ConsumptionInformationPolicy? {
            try parse.parse(#"{"apps": [\#(AppStoreOperationsConfig.app(#", "consumptionInformation": {"customerConsented": true\#(extra)}"#))]}"#)
                .apps[0].consumptionInformation
        }
        #expect(try policy("")?.refundPreference == ConsumptionInformation.RefundPreferencePolicy.none)
        #expect(try policy(#", "refundPreference": "fromUsage""#)?.refundPreference == .fromUsage)
        func error(_ extra: String) -> String {
            parse.error(#"{"apps": [\#(AppStoreOperationsConfig.app(#", "consumptionInformation": {"customerConsented": true\#(extra)}"#))]}"#)
        }
        #expect(error(#", "refundPreference": "always""#) == "apps[0].consumptionInformation.refundPreference: must be none or fromUsage")
        #expect(error(#", "version": 1, "refundPreference": "fromUsage""#)
            == "apps[0].consumptionInformation.refundPreference: is sent with the current (version 2) body only")
    }

    @Test func aPartlySpentPackIsAnsweredWithGrantProratedWhenTheAppAsks() async throws {
        var policy = ConsumptionInformationPolicy(customerConsented: true)
        policy.refundPreference = .fromUsage
        try await SimulatedKakin.with(consumption: policy) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let bought = try await k.buy("u1", "coins.500")["transactionId"]!.stringValue!
            try await ConsumptionRequests.spend(k, "u1", 150, key: "s1")   // 50 free, then 100 of the 500 paid: 20% used
            try await ConsumptionRequests.requestRefund(k, bought)
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
            let request = try #require(try await ConsumptionRequests.received(k, bought).first?["request"])
            print("Send Consumption Information with refundPreference fromUsage:", request.jsonString)
            #expect(request == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false,
                                "consumptionPercentage": 20_000, "refundPreference": "GRANT_PRORATED"])
        }
    }
}
