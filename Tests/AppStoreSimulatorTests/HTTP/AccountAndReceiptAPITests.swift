import AppStoreSecurity
@testable import AppStoreSimulator
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// The simulator's account-level Server API (V1 consumption, Set App Account Token, App Transaction Info),
/// the legacy receipt it hands apps, and the consumption log it exposes.
@Suite struct AccountAndReceiptAPITests {
    @Test func receiptsListTheAccountsPurchasesAndVerifyAgainstTheSimulatorsRoot() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let sub = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        let coins = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA), "quantity": 2])
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenB)])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(40 * 86_400)])
        let root = try X509Certificate(der: sim.rootCertificateDER)
        for encoding in ["appStore", "xcode"] {
            let answer = await call(sim, "GET", "/simulator/v1/receipt", query: [("appAccountToken", tokenA.uppercased()), ("encoding", encoding)])
            #expect(answer.status == 200)
            let der = try AppReceipt.der(fromBase64: try #require(answer.json["appReceipt"]?.stringValue))
            let receipt = try AppReceipt.parse(der: der, trustedRoots: [root], nowMs: startMs)
            #expect(receipt.bundleId == "com.example.app")
            #expect(receipt.receiptType == (encoding == "xcode" ? "Xcode" : "ProductionSandbox"))
            #expect(receipt.creationDateMs == startMs + 40 * .day)
            // The subscription renewed once in 40 days: both periods are listed, then the coins.
            #expect(receipt.inApp.map(\.productId) == ["B", "coins", "B"])
            #expect(receipt.inApp[0].transactionId == sub.json["transactionId"]?.stringValue)
            #expect(receipt.inApp[2].originalTransactionId == sub.json["originalTransactionId"]?.stringValue)
            #expect(receipt.inApp[1].transactionId == coins.json["transactionId"]?.stringValue)
            #expect(receipt.inApp[1].quantity == 2)
            #expect(answer.json["transactionIds"]?.arrayValue?.count == 3)
        }
        let none = await call(sim, "GET", "/simulator/v1/receipt", query: [("appAccountToken", "1d2e5a4c-0000-4000-8000-000000000000")])
        #expect(try AppReceipt.parse(base64: try #require(none.json["appReceipt"]?.stringValue)).inApp.isEmpty)
        #expect(await call(sim, "GET", "/simulator/v1/receipt", query: [("encoding", "pdf")]).status == 400)
        #expect(await call(sim, "GET", "/simulator/v1/receipt", query: [("appAccountToken", "nope")]).status == 400)
    }

    @Test func deprecatedV1ConsumptionIsValidatedLikeAppleAndLoggedWithTheCurrentOnes() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let token = try apiToken(sim)
        let coins = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        let tid = try #require(coins.json["transactionId"]?.stringValue)
        let v1: JSONValue = ["customerConsented": true, "consumptionStatus": 2, "platform": 1, "sampleContentProvided": false,
                             "deliveryStatus": 0, "appAccountToken": .string(tokenA), "accountTenure": 3, "playTime": 0,
                             "lifetimeDollarsRefunded": 1, "lifetimeDollarsPurchased": 2, "userStatus": 0, "refundPreference": 0]
        #expect(await call(sim, "PUT", "/inApps/v1/transactions/consumption/\(tid)", v1, bearer: token).status == 202)
        var bad = v1.objectValue!
        bad["accountTenure"] = 8
        #expect(await call(sim, "PUT", "/inApps/v1/transactions/consumption/\(tid)", .object(bad), bearer: token).json["errorCode"] == 4_000_032)
        bad = v1.objectValue!
        bad["customerConsented"] = false
        #expect(await call(sim, "PUT", "/inApps/v1/transactions/consumption/\(tid)", .object(bad), bearer: token).json["errorCode"] == 4_000_035)
        let sub = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        let subTid = try #require(sub.json["transactionId"]?.stringValue)
        #expect(await call(sim, "PUT", "/inApps/v1/transactions/consumption/\(subTid)", v1, bearer: token).json["errorCode"] == 4_000_043)
        let v2: JSONValue = ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false, "consumptionPercentage": 25_000]
        #expect(await call(sim, "PUT", "/inApps/v2/transactions/consumption/\(tid)", v2, bearer: token).status == 202)

        let log = await call(sim, "GET", "/simulator/v1/consumption", query: [("transactionId", tid)])
        let records = try #require(log.json["consumption"]?.arrayValue)
        #expect(records.map { $0["version"] } == [1, 2])
        #expect(records[0]["request"] == v1)
        #expect(records[1]["request"] == v2)
        #expect(records[1]["transactionId"] == .string(tid))
        #expect(await call(sim, "GET", "/simulator/v1/consumption", query: [("limit", "1")]).json["consumption"]?.arrayValue?.count == 1)
        #expect(await call(sim, "GET", "/simulator/v1/consumption", query: [("limit", "0")]).status == 400)
    }

    @Test func setAppAccountTokenResignsThePurchaseChainAndFutureRenewals() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let token = try apiToken(sim)
        let sub = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B"])
        let otid = try #require(sub.json["originalTransactionId"]?.stringValue)
        #expect(decodeJWS(sub.json["signedTransaction"]!.stringValue!)["appAccountToken"] == nil)
        let set = await call(sim, "PUT", "/inApps/v1/transactions/\(otid)/appAccountToken", ["appAccountToken": .string(tokenB.uppercased())],
                             bearer: token)
        #expect(set.status == 200)
        #expect(set.body.isEmpty)
        let info = await call(sim, "GET", "/inApps/v1/transactions/\(otid)", bearer: token)
        let tx = try verifier(sim).verifyTransaction(try #require(info.json["signedTransactionInfo"]?.stringValue))
        #expect(tx.appAccountToken == tokenB)
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(32 * 86_400)])
        let statuses = await call(sim, "GET", "/inApps/v1/subscriptions/\(otid)", bearer: token)
        let last = try #require(statuses.json["data"]?.arrayValue?.first?["lastTransactions"]?.arrayValue?.first)
        let renewed = try verifier(sim).verifyTransaction(last["signedTransactionInfo"]!.stringValue!)
        #expect(renewed.transactionId != otid)
        #expect(renewed.appAccountToken == tokenB)
        #expect(try verifier(sim).verifyRenewalInfo(last["signedRenewalInfo"]!.stringValue!).appAccountToken == tokenB)

        func refusal(_ id: String, _ body: JSONValue) async -> JSONValue? {
            await call(sim, "PUT", "/inApps/v1/transactions/\(id)/appAccountToken", body, bearer: token).json["errorCode"]
        }
        #expect(await refusal(otid, ["appAccountToken": "not-a-uuid"]) == 4_000_183)
        #expect(await refusal(renewed.transactionId, ["appAccountToken": .string(tokenA)]) == 4_000_187)
        #expect(await refusal("999999", ["appAccountToken": .string(tokenA)]) == 4_040_010)
        let family = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "lifetime", "familyShared": true])
        #expect(await refusal(family.json["originalTransactionId"]!.stringValue!, ["appAccountToken": .string(tokenA)]) == 4_000_185)
    }

    @Test func appTransactionInfoIsSignedForTheCustomersAccount() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let token = try apiToken(sim)
        let coins = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        let tx = decodeJWS(coins.json["signedTransaction"]!.stringValue!)
        let answer = await call(sim, "GET", "/inApps/v1/transactions/appTransactions/\(coins.json["transactionId"]!.stringValue!)", bearer: token)
        #expect(answer.status == 200)
        let app = try verifier(sim).verifyAppTransaction(try #require(answer.json["signedAppTransactionInfo"]?.stringValue))
        #expect(app.bundleId == "com.example.app")
        #expect(app.receiptType == .sandbox)
        #expect(app.raw["appTransactionId"] == tx["appTransactionId"])
        #expect(app.raw["originalPurchaseDate"] == 1_375_340_400_000)
        let byAppTransactionId = await call(sim, "GET", "/inApps/v1/transactions/appTransactions/\(tx["appTransactionId"]!.stringValue!)",
                                            bearer: token)
        #expect(byAppTransactionId.status == 200)
        #expect(await call(sim, "GET", "/inApps/v1/transactions/appTransactions/42", bearer: token).json["errorCode"] == 4_040_019)
        #expect(await call(sim, "GET", "/inApps/v1/transactions/appTransactions/x1", bearer: token).json["errorCode"] == 4_000_006)
    }
}
