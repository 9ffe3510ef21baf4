import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService
import Testing

/// Seed 004 (proactive restore), end to end: the simulated App Store sells, renews, fails, refunds; its
/// notifications reach Kakin; the app's launch-time `GET /v1/customers/{id}` classifies the customer.
@Suite(.serialized) struct ProactiveRestore {
    static let day: Int64 = 86_400_000

    @Test func noHistoryIsNew() async throws {
        try await SimulatedKakin.with { k in
            let s = try await k.status("nobody")
            #expect(s["status"] == "new")
            #expect(s["subscriptions"] == [])
            #expect(s["eligibility"]?["introductoryOffer"]?["premium"] == true)
        }
    }

    @Test func activeMonthlyIsActive() async throws {
        try await SimulatedKakin.with { k in
            let bought = try await k.buy("u1", "premium.monthly")
            try await k.advance(days: 20)
            let s = try await k.status("u1")
            #expect(s["status"] == "active")
            let sub = try #require(s["subscriptions"]?.arrayValue?.first)
            #expect(sub["state"] == "subscribed")
            #expect(sub["originalTransactionId"] == bought["originalTransactionId"])
            // Trial (1 week) then the first paid month, renewed on the trial's end.
            let trialEnd = ISOPeriod(weeks: 1).added(to: SimulatedKakin.start2026)
            #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(ISOPeriod(months: 1).added(to: trialEnd))))
            #expect(s["eligibility"]?["introductoryOffer"]?["premium"] == false)
        }
    }

    @Test func inGracePeriodIsStillActive() async throws {
        try await SimulatedKakin.with(gracePeriodDays: 16) { k in
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.action(ot, "failBilling")
            try await k.advance(days: 10)
            let sub = try await k.subscription("u1")
            #expect(try await k.status("u1")["status"] == "active")
            #expect(sub["state"] == "inGracePeriod")
            let trialEnd = ISOPeriod(weeks: 1).added(to: SimulatedKakin.start2026)
            #expect(sub["gracePeriodExpiresAt"] == .string(Timestamp.rfc3339(trialEnd + 16 * Self.day)))
        }
    }

    @Test func inBillingRetryIsInactiveButRecoverable() async throws {
        try await SimulatedKakin.with { k in
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.action(ot, "failBilling")
            try await k.advance(days: 10)
            #expect(try await k.status("u1")["status"] == "inactive")
            #expect(try await k.subscription("u1")["state"] == "inBillingRetryPeriod")
            try await k.action(ot, "recoverBilling")
            #expect(try await k.status("u1")["status"] == "active")
        }
    }

    @Test func expiredVoluntarilyIsInactive() async throws {
        try await SimulatedKakin.with { k in
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.action(ot, "disableAutoRenew")
            #expect(try await k.status("u1")["status"] == "active")
            #expect(try await k.subscription("u1")["willAutoRenew"] == false)
            try await k.advance(days: 8)
            let sub = try await k.subscription("u1")
            #expect(try await k.status("u1")["status"] == "inactive")
            #expect(sub["state"] == "expired")
            #expect(sub["expirationReason"] == "voluntary")
        }
    }

    @Test func refundedIsInactive() async throws {
        try await SimulatedKakin.with { k in
            let ot = try await k.buy("u1", "premium.monthly")["originalTransactionId"]!.stringValue!
            try await k.advance(days: 10)
            try await k.action(ot, "refund")
            #expect(try await k.status("u1")["status"] == "inactive")
            #expect(try await k.subscription("u1")["state"] == "revoked")
        }
    }

    @Test func familySharingRemovedIsInactive() async throws {
        try await SimulatedKakin.with { k in
            // A family member's copy carries no app account token: the member's app presents it.
            let copy = try await k.buy("member", "premium.monthly", familyShared: true)
            let jws = copy["signedTransaction"]!.stringValue!
            let post = try await TestHTTP.post(k, "/v1/customers/member/transactions", ["signedTransaction": .string(jws)])
            #expect(post.status == 201)
            #expect(try await k.status("member")["status"] == "active")
            #expect(try await k.subscription("member")["ownership"] == "familyShared")
            try await k.action(copy["originalTransactionId"]!.stringValue!, "revokeFamilySharing")
            #expect(try await k.status("member")["status"] == "inactive")
            #expect(try await k.subscription("member")["state"] == "revoked")
        }
    }

    @Test func nonConsumableOwnedIsActive() async throws {
        try await SimulatedKakin.with { k in
            try await k.buy("u1", "noads")
            try await k.advance(days: 400)
            let s = try await k.status("u1")
            #expect(s["status"] == "active")
            #expect(s["nonConsumables"]?.arrayValue?.first?["productId"] == "noads")
        }
    }

    @Test func nonRenewingPassIsActiveUntilItsLengthEnds() async throws {
        try await SimulatedKakin.with { k in
            try await k.buy("u1", "season.pass")
            try await k.advance(days: 89)
            var s = try await k.status("u1")
            #expect(s["status"] == "active")
            #expect(s["nonRenewing"]?.arrayValue?.first?["expiresAt"] == .string(Timestamp.rfc3339(SimulatedKakin.start2026 + 90 * Self.day)))
            #expect(s["nonRenewing"]?.arrayValue?.first?["active"] == true)
            try await k.advance(days: 2)
            s = try await k.status("u1")
            #expect(s["status"] == "inactive")
            #expect(s["nonRenewing"]?.arrayValue?.first?["active"] == false)
        }
    }

    @Test func consumablesAloneLeaveTheCustomerNewWithCoins() async throws {
        try await SimulatedKakin.with { k in
            try await k.buy("u1", "coins.500")
            let s = try await k.status("u1")
            #expect(s["status"] == "new")
            #expect(s["wallet"] == ["paid": 500, "free": 50, "total": 550])
        }
    }
}

/// Minimal HTTP for tests that go through the socket.
enum TestHTTP {
    static func post(_ k: SimulatedKakin, _ path: String, _ json: JSONValue) async throws -> (status: Int, body: JSONValue) {
        var req = URLRequest(url: URL(string: "http://127.0.0.1:\(k.runtime.port)\(path)")!)
        req.httpMethod = "POST"
        req.httpBody = Data(json.serialized())
        req.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await TestKakin.session.data(for: req)
        return ((response as! HTTPURLResponse).statusCode, (try? JSONParser.parse([UInt8](data))) ?? .null)
    }
}
