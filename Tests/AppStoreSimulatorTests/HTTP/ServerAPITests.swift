import AppStoreSecurity
@testable import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinCrypto
import KakinSystem
import Testing

@Suite struct ServerAPIOverHTTP {
    @Test func tokensAreCheckedLikeApple() async throws {
        let sim = try makeSimulator()
        let tid = (await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins"])).json["transactionId"]!.stringValue!
        let path = "/inApps/v1/transactions/\(tid)"
        let now = SystemClock().nowMs() / 1000
        let good = await call(sim, "GET", path, bearer: try apiToken(sim))
        #expect(good.status == 200)
        #expect(good.json["signedTransactionInfo"] != nil)
        // Also under /simulator/, where local mode mounts the simulator.
        #expect((await call(sim, "GET", "/simulator" + path, bearer: try apiToken(sim))).status == 200)
        // Local-mode Kakin signs its tokens on the simulator's clock.
        let simulated = try apiToken(sim, nowSeconds: sim.clock.nowMs() / 1000)
        #expect((await call(sim, "GET", path, bearer: simulated)).status == 200)
        let refused: [(String, String?)] = [
            ("no token", nil),
            ("garbage", "abc.def.ghi"),
            ("wrong bundle", try apiToken(sim, bundleId: "com.other.app")),
            ("wrong audience", try apiToken(sim, audience: "appstoreconnect-v2")),
            ("unknown key id", try apiToken(sim, keyId: "NOPE123456")),
            ("wrong key", try apiToken(sim, key: P256PrivateKey())),
            ("expired", try apiToken(sim, expiresIn: -30)),
            ("exp more than 60 minutes ahead", try apiToken(sim, expiresIn: 3_700)),
            ("iat to exp over 60 minutes", try apiToken(sim, issuedAt: now, expiresIn: 3_601)),
        ]
        for (name, token) in refused {
            let reply = await call(sim, "GET", path, bearer: token)
            #expect(reply.status == 401, "\(name)")
            #expect(reply.body.isEmpty, "\(name)")
        }
        // A registered outside key works (documented extension).
        let other = try P256PrivateKey()
        let pem = "-----BEGIN PUBLIC KEY-----\n" + Base64.encode(other.publicKey.spkiDER) + "\n-----END PUBLIC KEY-----\n"
        let registered = await call(sim, "POST", "/simulator/v1/api-keys", ["keyId": "OUTSIDE001", "publicKeyPEM": .string(pem)])
        #expect(registered.status == 201)
        #expect((await call(sim, "GET", path, bearer: try apiToken(sim, keyId: "OUTSIDE001", key: other))).status == 200)
    }

    @Test func appleErrorsUseApplesCodes() async throws {
        let sim = try makeSimulator()
        let token = try apiToken(sim)
        let bad = await call(sim, "GET", "/inApps/v1/transactions/abc", bearer: token)
        #expect(bad.status == 400)
        #expect(bad.json == ["errorCode": 4_000_006, "errorMessage": "Invalid transaction id."])
        let missing = await call(sim, "GET", "/inApps/v1/transactions/123", bearer: token)
        #expect(missing.status == 404)
        #expect(missing.json["errorCode"] == 4_040_010)
        let test = await call(sim, "POST", "/inApps/v1/notifications/test", bearer: token)
        #expect(test.json["errorCode"] == 4_040_007)
        let badBody = await call(sim, "POST", "/inApps/v1/notifications/history", bearer: token, rawBody: Array("nope".utf8))
        #expect(badBody.json["errorCode"] == 4_000_000)
    }

    @Test func aClientPagesThroughALongHistoryOverHTTP() async throws {
        let sim = try makeSimulator()
        var first = ""
        for i in 0..<120 {
            let r = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
            if i == 0 { first = r.json["transactionId"]!.stringValue! }
            if i % 10 == 0 { _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": 3_600]) }
        }
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(300 * 86_400)])
        let server = try serve(sim)
        defer { Task { await server.shutdown(gracePeriodSeconds: 1) } }
        let client = TestAPIClient(base: "http://127.0.0.1:\(server.port)", sim: sim)
        let v = try verifier(sim)
        func all(_ filters: [(String, String)]) async throws -> [String] {
            var ids: [String] = []
            var revision: String?
            for _ in 0..<30 {
                let page = try await client.get("/inApps/v2/history/\(first)", query: filters + (revision.map { [("revision", $0)] } ?? []))
                #expect(page.status == 200)
                let signed = page.json["signedTransactions"]?.arrayValue ?? []
                #expect(signed.count <= 20)
                for s in signed { ids.append(try v.verifyTransaction(s.stringValue!).transactionId) }
                revision = page.json["revision"]?.stringValue
                if page.json["hasMore"] != true { break }
            }
            return ids
        }
        let ascending = try await all([])
        // 120 coin packs; the subscription bought at +12 h and renewed 9 times in 300 days.
        #expect(ascending.count == 120 + 10)
        #expect(Set(ascending).count == ascending.count)
        let descending = try await all([("sort", "DESCENDING")])
        #expect(descending == ascending.reversed())
        #expect(try await all([("productType", "AUTO_RENEWABLE")]).count == 10)
        #expect(try await all([("productId", "coins"), ("sort", "DESCENDING")]).count == 120)
        let statuses = try await client.get("/inApps/v1/subscriptions/\(first)")
        #expect(statuses.json["data"]?.arrayValue?.first?["lastTransactions"]?.arrayValue?.first?["status"] == 1)
        let expired = try await client.get("/inApps/v2/history/\(first)", token: try apiToken(sim, expiresIn: -60))
        #expect(expired.status == 401)
        let wrong = try await client.get("/inApps/v2/history/\(first)", token: try apiToken(sim, key: P256PrivateKey()))
        #expect(wrong.status == 401)
        let badRevision = try await client.get("/inApps/v2/history/\(first)", query: [("revision", "bm9wZQ")])
        #expect(badRevision.json["errorCode"] == 4_000_005)
    }

    @Test func notificationsRefusedWithStatus500ArriveLaterByRetryAndShowInHistory() async throws {
        let receiver = try NotificationReceiver(statuses: [500, 500])
        defer { Task { await receiver.server.shutdown(gracePeriodSeconds: 1) } }
        let sim = try makeSimulator(sink: HTTPNotificationSink(url: receiver.url, timeoutSeconds: 30))
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        let tid = bought.json["transactionId"]!.stringValue!
        #expect(receiver.bodies.count == 1)
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": 1_800])
        #expect(receiver.bodies.count == 1)
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": 1_800])
        #expect(receiver.bodies.count == 2)
        _ = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": 43_200])
        #expect(receiver.bodies.count == 3)
        // Every attempt carried the same signed payload, so the same notificationUUID.
        #expect(Set(receiver.bodies).count == 1)
        let body = try JSONParser.parse(receiver.bodies[0])
        let note = try verifier(sim).verifyNotification(body["signedPayload"]!.stringValue!)
        #expect(note.notificationType == .oneTimeCharge)
        let history = await call(sim, "POST", "/inApps/v1/notifications/history",
                                 ["startDate": .int(startMs), "endDate": .int(startMs + .day), "transactionId": .string(tid)], bearer: try apiToken(sim))
        #expect(history.status == 200)
        let entry = history.json["notificationHistory"]?.arrayValue?.first
        #expect(entry?["signedPayload"] == body["signedPayload"])
        #expect(entry?["sendAttempts"] == [
            ["attemptDate": .int(startMs), "sendAttemptResult": "UNSUCCESSFUL_HTTP_RESPONSE_CODE"],
            ["attemptDate": .int(startMs + .hour), "sendAttemptResult": "UNSUCCESSFUL_HTTP_RESPONSE_CODE"],
            ["attemptDate": .int(startMs + 13 * .hour), "sendAttemptResult": "SUCCESS"],
        ])
        let failures = await call(sim, "POST", "/inApps/v1/notifications/history",
                                  ["startDate": .int(startMs), "endDate": .int(startMs + .day), "onlyFailures": true], bearer: try apiToken(sim))
        #expect(failures.json["notificationHistory"] == [])
    }

    @Test func anUnreachableReceiverIsRecordedAsNoResponse() async throws {
        let sim = try makeSimulator(sink: HTTPNotificationSink(url: URL(string: "http://127.0.0.1:9/none")!, timeoutSeconds: 2))
        _ = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins"])
        let attempts = sim.core.withLock { $0.engine.store.notifications[0].attempts }
        #expect(attempts.count == 1)
        #expect(attempts[0].sendAttemptResult != "SUCCESS")
    }

    @Test func testNotificationIsSentAndItsStatusReadable() async throws {
        let sink = ScriptedSink([.timedOut])
        let sim = try makeSimulator(sink: sink)
        let token = try apiToken(sim)
        let requested = await call(sim, "POST", "/inApps/v1/notifications/test", bearer: token)
        let testToken = try #require(requested.json["testNotificationToken"]?.stringValue)
        let status = await call(sim, "GET", "/inApps/v1/notifications/test/\(testToken)", bearer: token)
        #expect(status.json["sendAttempts"] == [["attemptDate": .int(startMs), "sendAttemptResult": "TIMED_OUT"]])
        #expect(try verifier(sim).verifyNotification(status.json["signedPayload"]!.stringValue!).notificationType == .test)
    }

    @Test func extendConsumptionAndOrderLookupOverHTTP() async throws {
        let sim = try makeSimulator(sink: ScriptedSink())
        let token = try apiToken(sim)
        let sub = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "B", "appAccountToken": .string(tokenA)])
        let otid = sub.json["originalTransactionId"]!.stringValue!
        let extended = await call(sim, "PUT", "/inApps/v1/subscriptions/extend/\(otid)",
                                  ["extendByDays": 3, "extendReasonCode": 1, "requestIdentifier": "e1"], bearer: token)
        #expect(extended.status == 200)
        #expect(extended.json["effectiveDate"] == .int(plus("P1M", startMs) + 3 * .day))
        let coins = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        let tid = coins.json["transactionId"]!.stringValue!
        let consumption = await call(sim, "PUT", "/inApps/v2/transactions/consumption/\(tid)",
                                     ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false], bearer: token)
        #expect(consumption.status == 202)
        #expect(consumption.body.isEmpty)
        let order = sim.core.withLock { $0.engine.store.transactions[tid]!.orderId! }
        let lookup = await call(sim, "GET", "/inApps/v1/lookup/\(order)", bearer: token)
        #expect(lookup.json["status"] == 0)
        #expect(lookup.json["signedTransactions"]?.arrayValue?.count == 1)
        let refunds = await call(sim, "GET", "/inApps/v2/refund/lookup/\(tid)", bearer: token)
        #expect(refunds.json == ["signedTransactions": [], "revision": refunds.json["revision"]!, "hasMore": false])
    }
}

/// `"notify": false`: a purchase made before the app's server was installed. The App Store knows it (the Server API
/// answers it) but sends no notification and keeps none in Notification History; later events notify as usual.
@Suite struct UnnotifiedPurchaseTests {
    @Test func aPurchaseWithNotifyFalseIsAnsweredButNeverNotified() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink)
        let bought = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA), "notify": false])
        #expect(bought.status == 201 && bought.json["notifications"] == [])
        let tid = try #require(bought.json["transactionId"]?.stringValue)
        let token = try apiToken(sim)
        #expect(await call(sim, "GET", "/inApps/v1/transactions/\(tid)", bearer: token).status == 200)
        #expect(await call(sim, "GET", "/inApps/v2/history/\(tid)", bearer: token).json["signedTransactions"]?.arrayValue?.count == 1)
        let now = sim.clock.nowMs()
        let history = await call(sim, "POST", "/inApps/v1/notifications/history",
                                 ["startDate": .int(now - 86_400_000), "endDate": .int(now + 1)], bearer: token)
        #expect(history.json["notificationHistory"] == [])
        #expect(sink.received.isEmpty)
        let told = await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "appAccountToken": .string(tokenA)])
        #expect(told.json["notifications"]?.arrayValue?.count == 1 && sink.received.count == 1)
        #expect(await call(sim, "POST", "/simulator/v1/purchases", ["productId": "coins", "notify": "no"]).status == 400)
    }
}
