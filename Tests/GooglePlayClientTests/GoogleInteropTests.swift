import Foundation
import GooglePlaySecurity
@testable import GooglePlaySimulator
import KakinCore
import Testing

/// Google's own Python libraries against the Play simulator (issue 25's first check): google-api-python-client with
/// google-auth's service-account credentials, through the simulator's OAuth token endpoint, reads a subscription
/// (subscriptionsv2) and a one-time purchase (productsv2), acknowledges, consumes and lists voided purchases; and
/// google-auth verifies a push token the simulator signed. The libraries live in `<package root>/.venv`
/// (`scripts/setup --with-python`); `KAKIN_SKIP_INTEROP=1` skips this.
@Suite(.serialized) struct GoogleInteropTests {
    static let python = Fixtures.packageRoot.appendingPathComponent(".venv/bin/python3")
    static let script = Fixtures.packageRoot.appendingPathComponent("Tests/GooglePlayClientTests/Interop/google_interop.py")
    static let skipped = ProcessInfo.processInfo.environment["KAKIN_SKIP_INTEROP"] == "1"

    @Test(.enabled(if: !skipped, "KAKIN_SKIP_INTEROP=1"))
    func googlesLibrariesReadAcknowledgeConsumeAndListThroughTheSimulatorAndVerifyItsPushToken() async throws {
        guard FileManager.default.isExecutableFile(atPath: Self.python.path) else {
            Issue.record("Google's Python libraries are needed: ./scripts/setup --with-python (or set KAKIN_SKIP_INTEROP=1 to skip)")
            return
        }
        let receiver = try PushReceiver()
        let play = try PlayServer(push: .init(sink: HTTPPlayPushSink(url: URL(string: receiver.url)!), audience: receiver.url))
        defer { Task { await play.stop(); await receiver.stop() } }

        let account = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        let sub = try await play.control("POST", "/v1/purchases", ["productId": "premium", "basePlanId": "monthly", "offerId": "free-trial",
                                                                    "obfuscatedAccountId": .string(account)])
        let coins = try await play.control("POST", "/v1/purchases", ["productId": "coins_500", "obfuscatedAccountId": .string(account), "test": true])
        let refunded = try await play.control("POST", "/v1/purchases", ["productId": "coins_1200", "quantity": 3])
        _ = try await play.control("POST", "/v1/orders/\(refunded["orderId"]!.stringValue!)/refund", ["quantity": 1])
        let authorization = try #require(receiver.record.pushes.withLock { $0.first?.authorization })
        #expect(authorization.hasPrefix("Bearer "))

        let request: JSONValue = [
            "serviceAccountURL": .string(play.base + "/play-simulator/v1/service-account.json"), "apiEndpoint": .string(play.apiRoot),
            "packageName": "dev.kakin.demo", "subscriptionToken": sub["purchaseToken"]!, "subscriptionId": "premium",
            "productToken": coins["purchaseToken"]!, "productId": "coins_500", "pushToken": .string(String(authorization.dropFirst(7))),
            "refundedOrderId": refunded["orderId"]!, "audience": .string(receiver.url), "certsURL": .string(play.base + "/play-simulator/oauth2/v3/certs"),
        ]
        let answer = try await Self.runPython(request)

        #expect(answer["tokenURI"]?.stringValue == play.base + "/play-simulator/token")
        let subscription = try SubscriptionPurchaseV2(json: try #require(answer["subscription"]))
        #expect(subscription.subscriptionState == .active && subscription.acknowledgementState == .pending)
        #expect(subscription.lineItems.first?.offerPhase == "freeTrial" && subscription.lineItems.first?.basePlanId == "monthly")
        #expect(subscription.externalAccountIdentifiers.obfuscatedExternalAccountId == account)
        let acknowledged = try SubscriptionPurchaseV2(json: try #require(answer["subscriptionAfterAcknowledge"]))
        #expect(acknowledged.acknowledgementState == .acknowledged)
        let product = try ProductPurchaseV2(json: try #require(answer["product"]))
        #expect(product.purchaseState == .purchased && product.isTestPurchase && product.lineItems.first?.productId == "coins_500")
        let consumed = try ProductPurchase(json: try #require(answer["productAfterConsume"]))
        #expect(consumed.consumptionState == 1 && consumed.acknowledgementState == 1 && consumed.purchaseType == 0)
        let voided = try VoidedPurchasesPage(json: try #require(answer["voided"]))
        #expect(voided.voidedPurchases.map(\.purchaseToken) == [refunded["purchaseToken"]!.stringValue!])
        #expect(voided.voidedPurchases.first?.voidedQuantity == 1)
        // orders.get of the 3 × 9.99 USD order one unit of which was refunded: Google's Order, Money as Google writes it.
        let order = try PlayOrder(json: try #require(answer["order"]))
        #expect(order.orderId == refunded["orderId"]?.stringValue && order.totalMilli == 29_970 && order.currency == "USD")
        #expect(order.raw["state"] == "PARTIALLY_REFUNDED" && order.raw["developerRevenueInBuyerCurrency"]?["units"] == "25", "\(order.raw)")
        #expect(answer["unknownToken"]?["status"] == 400)
        #expect(answer["pushClaims"]?["email"]?.stringValue == play.simulator.pushSettings.serviceAccountEmail)
        #expect(answer["pushClaims"]?["aud"]?.stringValue == receiver.url)
        #expect(answer["wrongAudienceAccepted"] == false)
        print("""
            google-api-python-client + google-auth against the Play simulator:
              token_uri \(answer["tokenURI"]?.stringValue ?? "?")
              subscriptionsv2.get: \(subscription.subscriptionState) \(subscription.acknowledgementState), after acknowledge: \(acknowledged.acknowledgementState)
              productsv2.get: \(product.purchaseState) test=\(product.isTestPurchase); after acknowledge + consume: consumptionState \(consumed.consumptionState)
              orders.get: total \(order.totalMilli) milli \(order.currency), state \(order.raw["state"]?.stringValue ?? "?")
              voidedpurchases.list: \(voided.voidedPurchases.count) voided, voidedQuantity \(voided.voidedPurchases.first?.voidedQuantity ?? 0)
              unknown token: HTTP \(answer["unknownToken"]?["status"]?.intValue ?? 0) \(answer["unknownToken"]?["reason"]?.stringValue ?? "")
              id_token.verify_token: iss \(answer["pushClaims"]?["iss"]?.stringValue ?? "?"), email \(answer["pushClaims"]?["email"]?.stringValue ?? "?"); wrong audience refused: \(answer["wrongAudienceAccepted"] == false)
            """)
    }

    /// Runs the script on a thread of its own: it calls the simulator and the push receiver served in this process,
    /// so waiting for it on Swift's cooperative pool (two threads on two cores) could starve them and never end.
    static func runPython(_ request: JSONValue) async throws -> JSONValue {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-google-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let requestURL = directory.appendingPathComponent("request.json"), answerURL = directory.appendingPathComponent("answer.json")
        try Data(request.serialized()).write(to: requestURL)
        let (status, errorText) = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<(Int32, String), any Error>) in
            Thread {
                do {
                    let process = Process()
                    process.executableURL = python
                    process.arguments = [script.path, requestURL.path, answerURL.path]
                    let errors = Pipe()
                    process.standardError = errors
                    try process.run()
                    let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                    process.waitUntilExit()
                    continuation.resume(returning: (process.terminationStatus, errorText))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
        guard status == 0, let data = FileManager.default.contents(atPath: answerURL.path) else {
            Issue.record("google_interop.py failed (\(status)): \(errorText)")
            throw CancellationError()
        }
        return try JSONParser.parse([UInt8](data), depthMax: 32)
    }
}
