import Foundation
@testable import GooglePlaySimulator
import GooglePlaySecurity
import HTTPServer
import KakinCore
import KakinService
import KakinStorage
import KakinTestPostgres
import Testing
@testable import KakinServer

/// Google Play purchases handed to Kakin by the app (`POST /v1/customers/{id}/transactions` with `"store": "googlePlay"`),
/// in local mode against the Play simulator: read from the Developer API, applied once through the one apply,
/// acknowledged after the commit.
@Suite struct GooglePlayPurchaseTests {
    static let package = "dev.kakin.demo"

    /// The Play simulator's control API, in-process.
    static func play(_ k: SimulatedKakin, _ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        let full = "/play-simulator" + path
        let request = HTTPRequest(method: method, path: full, rawPath: full, queryItems: [], headers: headers,
                                  body: body?.serialized() ?? [], requestId: "test", remoteAddress: nil)
        let response = await k.local.playSimulator.handle(request)
        guard (200..<300).contains(response.status) else {
            throw SimulatedKakin.SimulatorRefused(status: response.status, body: String(decoding: response.body, as: UTF8.self))
        }
        return (try? JSONParser.parse(response.body)) ?? .null
    }

    /// Buys on Play as `customer` (its appAccountToken as obfuscatedAccountId); answers the purchase token and order.
    static func buy(_ k: SimulatedKakin, _ customer: String, _ productId: String, extra: [String: JSONValue] = [:]) async throws -> (token: String, order: String) {
        var body = extra
        body["productId"] = .string(productId)
        body["obfuscatedAccountId"] = .string(try await k.token(customer))
        let bought = try await play(k, "POST", "/v1/purchases", .object(body))
        return (try #require(bought["purchaseToken"]?.stringValue), try #require(bought["orderId"]?.stringValue))
    }

    static func present(_ k: SimulatedKakin, _ customer: String, _ productId: String, _ token: String) async -> (status: Int, json: JSONValue) {
        await k.kakin("POST", "/v1/customers/\(customer)/transactions",
                      ["store": "googlePlay", "packageName": .string(package), "productId": .string(productId), "purchaseToken": .string(token)])
    }

    /// Cuts the simulator's pushes to Kakin (they wait in the simulator, as while Kakin is down) and records each one
    /// delivered after `restore`, so a test can send it again.
    final class PushTap: PlayPushSink, @unchecked Sendable {
        let inner: any PlayPushSink
        let lock = NSLock()
        var up = true
        var sent: [(body: [UInt8], authorization: String)] = []
        init(_ inner: any PlayPushSink) { self.inner = inner }
        func push(body: [UInt8], authorization: String) async -> Int {
            guard lock.withLock({ up }) else { return 503 }
            let status = await inner.push(body: body, authorization: authorization)
            lock.withLock { sent.append((body, authorization)) }
            return status
        }
        func set(up: Bool) { lock.withLock { self.up = up } }
        var pushes: [(body: [UInt8], authorization: String)] { lock.withLock { sent } }
    }

    static func tap(_ k: SimulatedKakin) -> PushTap {
        var settings = k.local.playSimulator.pushSettings
        let tap = PushTap(settings.sink!)
        settings.sink = tap
        k.local.playSimulator.setPush(settings)
        return tap
    }

    static func pushRaw(_ k: SimulatedKakin, body: [UInt8], authorization: String?) async -> Int {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        if let authorization { headers.add("Authorization", authorization) }
        let path = "/v1/notifications/googleplay"
        return await k.app.handle(HTTPRequest(method: "POST", path: path, rawPath: path, queryItems: [], headers: headers, body: body,
                                              requestId: "test", remoteAddress: nil)).status
    }

    static func waitUntil(_ condition: () async throws -> Bool) async throws {
        if try await !eventually(timeoutSeconds: 60, condition) { Issue.record("condition never held") }
    }

    static func ledger(_ k: SimulatedKakin, _ customer: String) async -> [JSONValue] {
        await k.kakin("GET", "/v1/customers/\(customer)/wallet/ledger").json["entries"]?.arrayValue ?? []
    }

    static func wallet(_ k: SimulatedKakin, _ customer: String) async throws -> WalletBalance {
        try await k.app.services.statusReads.status(customer).wallet
    }

    @Test func aPlayCoinPurchaseIsCreditedOnceThenAnswered409AndConsumedAfterTheCommit() async throws {
        try await SimulatedKakin.with { k in
            _ = try await k.token("u1")
            let tap = Self.tap(k)
            tap.set(up: false)
            let (token, order) = try await Self.buy(k, "u1", "coins_500", extra: ["quantity": 2])
            let first = await Self.present(k, "u1", "coins_500", token)
            #expect(first.status == 201, "\(first.json)")
            #expect(first.json["grant"] == ["coins": ["paid": 1000, "free": 100]])
            #expect(first.json["transaction"]?["store"] == "googlePlay" && first.json["transaction"]?["orderId"]?.stringValue == order)
            #expect(first.json["transaction"]?["purchaseToken"]?.stringValue == token)
            #expect(first.json["customer"]?["wallet"] == ["paid": 1000, "free": 100, "total": 1100])
            let again = await Self.present(k, "u1", "coins_500", token)
            #expect(again.status == 409 && again.json["error"]?["code"] == "already_processed")
            #expect(again.json["grant"] == first.json["grant"] && again.json["transaction"] == first.json["transaction"])
            // The ledger names Play and the order.
            let ledger = await Self.ledger(k, "u1")
            #expect(ledger.count == 1 && ledger.first?["source"] == "googlePlay" && ledger.first?["reference"]?.stringValue == order)
            // After the commit Kakin consumes it (a consumable), so Play will not refund it after three days.
            try await Self.waitUntil { try await k.app.store.playAcknowledgementState(token) == .done }
            // The RTDN that waited arrives later: applied, nothing credited twice.
            tap.set(up: true)
            try await k.advance(days: 4)
            try await Self.waitUntil { try await k.app.store.playNotificationCounts()["applied"] == 1 }
            #expect(try await Self.wallet(k, "u1") == WalletBalance(paid: 1000, free: 100))
            let sent = try await Self.play(k, "GET", "/v1/notifications")
            #expect(!(sent["notifications"]?.arrayValue ?? []).contains { $0["type"] == "VOIDED_PURCHASE" })
        }
    }

    @Test func aPurchaseWhoseAccountIdNamesAnotherCustomerIsRefused403AndNothingCredited() async throws {
        try await SimulatedKakin.with { k in
            _ = try await k.token("u2")
            Self.tap(k).set(up: false)
            let (token, _) = try await Self.buy(k, "u1", "coins_500")
            let refused = await Self.present(k, "u2", "coins_500", token)
            #expect(refused.status == 403 && refused.json["error"]?["code"] == "belongs_to_another_customer")
            #expect(try await Self.wallet(k, "u2") == WalletBalance(paid: 0, free: 0))
            #expect(try await k.app.store.playAcknowledgementState(token) == nil)
            // The buyer still gets it.
            #expect(await Self.present(k, "u1", "coins_500", token).status == 201)
        }
    }

    @Test func wrongPackageProductOrTokenAreRefusedWithTheirErrors() async throws {
        try await SimulatedKakin.with { k in
            let (token, _) = try await Self.buy(k, "u1", "coins_500")
            let unknownPackage = await k.kakin("POST", "/v1/customers/u1/transactions",
                                               ["store": "googlePlay", "packageName": "com.other.app", "productId": "coins_500", "purchaseToken": .string(token)])
            #expect(unknownPackage.status == 422 && unknownPackage.json["error"]?["id"] == "KKN-3302")
            #expect(await Self.present(k, "u1", "coins_9", token).json["error"]?["code"] == "unknown_product")
            #expect(await Self.present(k, "u1", "coins_1200", token).json["error"]?["code"] == "product_mismatch")
            #expect(await Self.present(k, "u1", "coins_500", "no-such-token").json["error"]?["code"] == "purchase_not_found")
        }
    }

    /// The same token sent by the app 64 times at once and by RTDN twice (a redelivery, and the same notification under
    /// another message id) credits once: one 201, the rest 409, one ledger entry.
    static func exactlyOnce(_ k: SimulatedKakin) async throws {
        _ = try await k.token("u1")
        let tap = Self.tap(k)
        tap.set(up: false)
        let (token, _) = try await Self.buy(k, "u1", "coins_500")
        let statuses = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<64 { group.addTask { await Self.present(k, "u1", "coins_500", token).status } }
            return await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.filter { $0 == 201 }.count == 1 && statuses.filter { $0 == 409 }.count == 63, "\(statuses.sorted())")
        tap.set(up: true)
        try await k.advance(days: 1)
        try await Self.waitUntil { tap.pushes.count == 1 }
        let push = try #require(tap.pushes.first)
        // Pub/Sub redelivers with a fresh token (the first one's hour has passed on the simulated clock).
        let settings = k.local.playSimulator.pushSettings
        let fresh = "Bearer " + (try k.local.playSimulator.core.withLock { $0.keys.pushSigner() }
            .sign(audience: settings.audience, email: settings.serviceAccountEmail, subject: "1", nowSeconds: k.nowMs / 1000))
        #expect(await Self.pushRaw(k, body: push.body, authorization: fresh) == 200)
        var envelope = try JSONParser.parse(push.body)
        if case .object(var o) = envelope, case .object(var m) = o["message"] {
            m["messageId"] = "another-message"
            o["message"] = .object(m)
            envelope = .object(o)
        }
        #expect(await Self.pushRaw(k, body: envelope.serialized(), authorization: fresh) == 200)
        try await Self.waitUntil { try await k.app.store.playNotificationCounts()["applied"] == 2 }
        #expect(try await Self.wallet(k, "u1") == WalletBalance(paid: 500, free: 50))
        #expect(await Self.ledger(k, "u1").count == 1)
    }

    @Test func theSameTokenSent64TimesAtOnceAndByRTDNTwiceCreditsOnceOnSQLite() async throws {
        try await SimulatedKakin.with { k in try await Self.exactlyOnce(k) }
    }

    @Test(.postgreSQL)
    func theSameTokenSent64TimesAtOnceAndByRTDNTwiceCreditsOnceOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in
            try await SimulatedKakin.with(database: .postgresql(url: schema.url)) { k in try await Self.exactlyOnce(k) }
        }
    }

    @Test func forgedExpiredOrWrongAudiencePushTokensAre401AndNothingIsStored() async throws {
        try await SimulatedKakin.with { k in
            let tap = Self.tap(k)
            tap.set(up: false)
            let play = k.local.playSimulator
            let settings = play.pushSettings
            let signer = play.core.withLock { $0.keys.pushSigner() }
            let body = PubSubPushMessage.envelope(data: Array(#"{"version":"1.0","packageName":"dev.kakin.demo","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#.utf8),
                                                  messageId: "m1", publishTimeMs: k.nowMs, subscription: "projects/p/subscriptions/s").serialized()
            let now = k.nowMs / 1000
            func token(audience: String? = nil, email: String? = nil, at seconds: Int64? = nil) throws -> String {
                try signer.sign(audience: audience ?? settings.audience, email: email ?? settings.serviceAccountEmail, subject: "1",
                                nowSeconds: seconds ?? now)
            }
            let valid = try token()
            var parts = valid.split(separator: ".").map(String.init)
            parts[1] = Base64.urlEncode(Array(#"{"iss":"https://accounts.google.com","aud":"x","email":"y","email_verified":true,"iat":1,"exp":9999999999}"#.utf8))
            let forged = parts.joined(separator: ".")
            #expect(await Self.pushRaw(k, body: body, authorization: nil) == 401)
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + forged) == 401)
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + (try token(at: now - 7200))) == 401)
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + (try token(audience: "https://elsewhere.example/push"))) == 401)
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + (try token(email: "someone@else.iam.gserviceaccount.com"))) == 401)
            #expect(try await k.app.store.playNotificationCounts().isEmpty)
            // Another package, well signed: refused, nothing stored.
            let other = PubSubPushMessage.envelope(data: Array(#"{"version":"1.0","packageName":"com.other.app","eventTimeMillis":"1","testNotification":{"version":"1.0"}}"#.utf8),
                                                   messageId: "m2", publishTimeMs: k.nowMs, subscription: "projects/p/subscriptions/s").serialized()
            #expect(await Self.pushRaw(k, body: other, authorization: "Bearer " + valid) == 422)
            #expect(try await k.app.store.playNotificationCounts().isEmpty)
            // A test notification: recorded and answered.
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + valid) == 200)
            #expect(await Self.pushRaw(k, body: body, authorization: "Bearer " + valid) == 200)
            try await Self.waitUntil { try await k.app.store.playNotificationCounts() == ["ignored": 1] }
        }
    }

    @Test func aPurchaseNeverAcknowledgedIsRefundedByPlayAfterThreeDaysAndTheLedgerShowsTheClawback() async throws {
        try await SimulatedKakin.with { k in
            // Kakin's acknowledgements never reach Play (its worker is down); its notifications still arrive.
            await k.app.services.googlePlay.stop()
            _ = try await k.token("u1")
            let (token, order) = try await Self.buy(k, "u1", "coins_500")
            #expect(await Self.present(k, "u1", "coins_500", token).status == 409)  // the RTDN credited it first
            #expect(try await Self.wallet(k, "u1") == WalletBalance(paid: 500, free: 50))
            try await k.advance(days: 4)
            let sent = try await Self.play(k, "GET", "/v1/notifications")
            #expect((sent["notifications"]?.arrayValue ?? []).contains { $0["type"] == "VOIDED_PURCHASE" })
            try await Self.waitUntil { try await Self.wallet(k, "u1") == WalletBalance(paid: 0, free: 0) }
            let ledger = await Self.ledger(k, "u1")
            let refund = try #require(ledger.first { $0["kind"] == "refund" })
            #expect(refund["paid"] == -500 && refund["free"] == -50 && refund["source"] == "googlePlay" && refund["reference"]?.stringValue == order)
        }
    }

    @Test func aPlaySubscriptionIsActiveOnIOSTooThroughGraceHoldAndRecovery() async throws {
        try await SimulatedKakin.with { k in
            let (token, order) = try await Self.buy(k, "u1", "premium", extra: ["basePlanId": "monthly", "offerId": "free-trial"])
            let answer = await Self.present(k, "u1", "premium", token)
            #expect(answer.status == 201 || answer.status == 409, "\(answer.json)")
            func item() async throws -> JSONValue { try #require(try await k.status("u1")["subscriptions"]?.arrayValue?.first) }
            #expect(try await k.status("u1")["status"] == "active")
            var sub = try await item()
            #expect(sub["source"] == "googlePlay" && sub["groupId"] == "premium" && sub["state"] == "subscribed")
            #expect(sub["originalTransactionId"]?.stringValue == PlayPurchaseFacts.orderBase(order))
            try await Self.waitUntil { try await k.app.store.playAcknowledgementState(token) == .done }
            // The trial ends and the first month renews (order ..0): one chain, still served.
            try await k.advance(days: 10)
            sub = try await item()
            #expect(sub["state"] == "subscribed" && sub["originalTransactionId"]?.stringValue == PlayPurchaseFacts.orderBase(order))
            // Billing fails: grace (served), then hold (not served), then recovered.
            try await Self.play(k, "POST", "/v1/subscriptions/\(token)/actions", ["action": "failBilling"])
            try await k.advance(days: 30)
            #expect(try await item()["state"] == "inGracePeriod")
            #expect(try await k.status("u1")["status"] == "active")
            try await k.advance(days: 7)
            #expect(try await item()["state"] == "inBillingRetryPeriod")
            #expect(try await k.status("u1")["status"] == "inactive")
            try await Self.play(k, "POST", "/v1/subscriptions/\(token)/actions", ["action": "recover"])
            #expect(try await item()["state"] == "subscribed")
            #expect((try await k.status("u1")["subscriptions"]?.arrayValue ?? []).count == 1)
        }
    }
}
