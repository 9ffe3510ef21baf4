import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinService
@testable import KakinServer
import KakinStorage
import Testing

/// A customer asks Apple for a refund of coins; Apple sends CONSUMPTION_REQUEST; Kakin answers with Send
/// Consumption Information from its ledger, within 12 hours, once — here to the simulator, whose log shows
/// exactly what arrived. The background worker is stopped in these tests so each pass is the test's own.
@Suite(.serialized) struct ConsumptionRequests {
    static let consented = ConsumptionInformationPolicy(customerConsented: true)

    static func spend(_ k: SimulatedKakin, _ customer: String, _ amount: Int64, key: String) async throws {
        let spent = await k.kakin("POST", "/v1/customers/\(customer)/wallet/spend", ["amount": .int(amount), "item": "stamp.heart"],
                                  headers: [("Idempotency-Key", key)])
        #expect(spent.status == 201)
    }

    static func requestRefund(_ k: SimulatedKakin, _ transactionId: String) async throws {
        try await k.sim("POST", "/simulator/v1/transactions/\(transactionId)/actions", ["action": "requestRefund", "reason": "UNINTENDED_PURCHASE"])
    }

    /// The simulator's log of what Send Consumption Information delivered (read without touching Kakin).
    static func received(_ k: SimulatedKakin, _ transactionId: String) async throws -> [JSONValue] {
        let response = await k.simulator.handle(HTTPRequest(method: "GET", path: "/simulator/v1/consumption",
                                                            queryItems: [("transactionId", transactionId)], requestId: "test"))
        #expect(response.status == 200)
        return try JSONParser.parse(response.body)["consumption"]?.arrayValue ?? []
    }

    @Test func aPartlySpentCoinPurchaseIsAnsweredWithTheLedgersFigures() async throws {
        try await SimulatedKakin.with(consumption: Self.consented) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let first = try await k.buy("u1", "coins.100")["transactionId"]!.stringValue!
            try await k.advance(days: 3)
            let second = try await k.buy("u1", "coins.500")["transactionId"]!.stringValue!
            // 600 paid + 50 bonus coins; 250 spent: the 50 free ones first, then 200 paid, oldest first —
            // all 100 of the first purchase and 100 of the second's 500.
            try await Self.spend(k, "u1", 250, key: "s1")
            #expect(try await k.app.store.wallet("u1") == WalletBalance(paid: 400, free: 0))
            try await k.advance(days: 2)

            try await Self.requestRefund(k, second)
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
            let received = try await Self.received(k, second)
            #expect(received.count == 1)
            let request = try #require(received.first?["request"])
            print("Send Consumption Information received by the simulator:", request.jsonString)
            #expect(request == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false,
                                "consumptionPercentage": 20_000])
            #expect(received.first?["version"] == 2)
            // Within Apple's 12 hours: at once, on the simulated clock.
            #expect(received.first?["receivedAtMs"] == .int(k.nowMs))

            try await Self.requestRefund(k, first)
            await k.app.services.appStoreJobs.processDueConsumptionAnswers()
            #expect(try await Self.received(k, first).first?["request"]?["consumptionPercentage"] == 100_000)

            // Sent once: another pass and a duplicate of the notification change nothing.
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 0)
            let jobs = try await k.app.store.consumptionAnswers(transactionId: second)
            #expect(jobs.map(\.state) == [.sent])
            #expect(jobs.first?.reason == "UNINTENDED_PURCHASE")
            #expect(jobs.first?.customerId == "u1")
            #expect(k.app.metrics.value(.consumptionAnswersSent) == 2)
        }
    }

    /// The answer to Apple and the unused-balance report read one engine (`PaidCoinLots`): a refund reversed
    /// after some of the purchase's coins were spent gives back exactly what the refund took, so Apple hears
    /// that those coins are used, and the report values what is really held.
    @Test func aReversedRefundOfAPartlySpentPurchaseIsAnsweredAndReportedAlike() async throws {
        try await SimulatedKakin.with(consumption: Self.consented) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let small = try await k.buy("u1", "coins.100")["transactionId"]!.stringValue!   // 100 paid, ¥120
            _ = try await k.buy("u1", "coins.1200")                                            // 1,200 paid + 200 free, ¥1,400
            // The 200 free coins first, then 60 paid: the oldest, the small pack's.
            try await Self.spend(k, "u1", 260, key: "s1")
            // Refunded: its 40 left come back, and 60 more from the large pack (the small pack's were spent).
            try await k.sim("POST", "/simulator/v1/transactions/\(small)/actions", ["action": "refund"])
            #expect(try await k.app.store.wallet("u1") == WalletBalance(paid: 1140, free: 0))
            try await k.advance(days: 1)
            try await k.sim("POST", "/simulator/v1/transactions/\(small)/actions", ["action": "reverseRefund"])
            #expect(try await k.app.store.wallet("u1") == WalletBalance(paid: 1240, free: 0))

            try await Self.requestRefund(k, small)
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
            // 60 of its 100 coins were spent before the refund, and still are.
            #expect(try await Self.received(k, small).first?["request"]?["consumptionPercentage"] == 60_000)
            // Held: 40 of the small pack at ¥1.2 (¥48) and all 1,200 of the large one (¥1,400).
            let asOf = String(Timestamp.rfc3339(k.nowMs).prefix(10))
            let report = try await k.app.desk.unusedBalance(asOf: asOf).json
            #expect(report["totals"] == [["bundleId": .string(Catalog.demoBundleId), "currency": "JPY", "unusedPaidCoins": 1240,
                                               "value": 1448, "customers": 1, "source": "appStore"]])
        }
    }

    @Test func theDeprecatedV1BodyCarriesLifetimeFiguresAndAccountAge() async throws {
        let usd = Catalog([
            Product(productId: "gems.small", kind: .consumable, coins: 100, priceMilli: 4_990, currency: "USD"),
            Product(productId: "gems.large", kind: .consumable, coins: 1000, priceMilli: 49_990, currency: "USD"),
        ])
        try await SimulatedKakin.with(catalog: usd, consumption: ConsumptionInformationPolicy(customerConsented: true, sampleContentProvided: true,
                                                                                              version: 1)) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let token = try await k.token("u1")
            try await k.advance(days: 12)
            let small = try await k.buy("u1", "gems.small")["transactionId"]!.stringValue!
            try await k.sim("POST", "/simulator/v1/transactions/\(small)/refund")
            let large = try await k.buy("u1", "gems.large")["transactionId"]!.stringValue!
            try await Self.spend(k, "u1", 1000, key: "all")
            try await Self.requestRefund(k, large)
            await k.app.services.appStoreJobs.processDueConsumptionAnswers()
            let received = try #require(try await Self.received(k, large).first)
            #expect(received["version"] == 1)
            // Bought $4.99 + $49.99 (range 3: $50–99.99), refunded $4.99 (range 2), customer for 12 days (range 3),
            // the purchase fully used (the refund took back the small pack's own coins first).
            #expect(received["request"] == [
                "customerConsented": true, "consumptionStatus": 3, "platform": 1, "sampleContentProvided": true, "deliveryStatus": 0,
                "appAccountToken": .string(token), "accountTenure": 3, "playTime": 0, "lifetimeDollarsRefunded": 2,
                "lifetimeDollarsPurchased": 3, "userStatus": 0, "refundPreference": 0,
            ])
        }
    }

    @Test func aSubscriptionsRefundRequestIsAnsweredWithDeliveryOnly() async throws {
        try await SimulatedKakin.with(consumption: Self.consented) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.advance(days: 10)
            let paid = try #require(try await k.sim("GET", "/simulator/v1/subscriptions/\(ot)")["latestTransactionId"]?.stringValue)
            try await Self.requestRefund(k, paid)
            await k.app.services.appStoreJobs.processDueConsumptionAnswers()
            // Apple computes the consumption of auto-renewables itself and refuses a percentage for them.
            #expect(try await Self.received(k, paid).first?["request"]
                == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false])
        }
    }

    @Test func withoutConsentNothingIsSentAndTheRequestIsKept() async throws {
        try await SimulatedKakin.with { k in
            await k.app.services.appStoreJobs.worker.stop()
            let coins = try await k.buy("u1", "coins.100")["transactionId"]!.stringValue!
            try await Self.requestRefund(k, coins)
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 0)
            #expect(try await Self.received(k, coins).isEmpty)
            #expect(try await k.app.store.consumptionAnswers(transactionId: coins).map(\.state) == [.notConsented])
        }
    }

    @Test func anAnswerThatCannotGetThroughWithinTwelveHoursExpires() async throws {
        try await SimulatedKakin.with(consumption: Self.consented) { k in
            await k.app.services.appStoreJobs.worker.stop()
            let coins = try await k.buy("u1", "coins.100")["transactionId"]!.stringValue!
            try await Self.requestRefund(k, coins)
            try await k.advance(to: k.nowMs + ConsumptionInformation.answerWindowMs)
            #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
            #expect(try await Self.received(k, coins).isEmpty)
            let job = try #require(try await k.app.store.consumptionAnswers(transactionId: coins).first)
            #expect(job.state == .expired)
            #expect(k.app.metrics.value(.consumptionAnswersNotSent) == 1)
        }
    }

    @Test func aPendingAnswerSurvivesARestartAndIsSentOnce() async throws {
        let k = try await SimulatedKakin.start(consumption: Self.consented)
        await k.app.services.appStoreJobs.worker.stop()
        // The App Store Server API is unreachable for now: the attempt fails and is kept for later.
        k.app.services.appStore.swap(nil)
        let coins = try await k.buy("u1", "coins.500")["transactionId"]!.stringValue!
        try await Self.spend(k, "u1", 100, key: "s1")
        try await Self.requestRefund(k, coins)
        #expect(await k.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
        let waiting = try #require(try await k.app.store.consumptionAnswers(transactionId: coins).first)
        #expect(waiting.state == .pending)
        #expect(waiting.attempts == 1)
        #expect(waiting.requestBody != nil)
        await k.runtime.shutdown(gracePeriodSeconds: 5)

        // A new process on the same database: its worker picks the answer up when it is due.
        let restarted = try await KakinRuntime.start(k.local.runtimeOptions())
        try await k.local.attach(to: restarted)
        await restarted.app.services.appStoreJobs.worker.stop()
        try await restarted.app.store.database.write { db in
            _ = try db.execute("UPDATE consumption_requests SET next_attempt_ms = 0", [])
        }
        #expect(await restarted.app.services.appStoreJobs.processDueConsumptionAnswers() == 1)
        #expect(await restarted.app.services.appStoreJobs.processDueConsumptionAnswers() == 0)
        let received = try await Self.received(k, coins)
        #expect(received.count == 1)
        // The body computed before the restart, unchanged: 50 of 500 paid coins used (the 50 bonus coins went first).
        #expect(received.first?["request"]?["consumptionPercentage"] == 10_000)
        #expect(try await restarted.app.store.consumptionAnswers(transactionId: coins).map(\.state) == [.sent])
        await restarted.shutdown(gracePeriodSeconds: 5)
        try? FileManager.default.removeItem(at: k.directory)
    }
}
