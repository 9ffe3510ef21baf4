import Foundation
import HTTPServer
import KakinCore
import KakinTestPostgres
import Testing
@testable import KakinServer

/// Play's `linkedPurchaseToken` chains end to end in local mode: an upgrade and a downgrade with replacement modes, a
/// cancel and a resubscribe before lapse, renewals of the newest token. Through all of it the customer has one status
/// item for the chain, owned by them, entitled by the newest token only; each order is told once and the chain is
/// granted once.
@Suite struct GooglePlayChainTests {
    typealias Play = GooglePlayPurchaseTests

    /// The Developer API's read of a subscription token, as Kakin makes it (a bearer from the simulator's token endpoint).
    static func read(_ k: SimulatedKakin, _ token: String) async throws -> JSONValue {
        let access = try #require(try await Play.play(k, "GET", "/v1/access-token")["accessToken"]?.stringValue)
        var headers = HTTPHeaders()
        headers.add("Authorization", "Bearer " + access)
        let path = "/play-simulator/androidpublisher/v3/applications/\(Play.package)/purchases/subscriptionsv2/tokens/\(token)"
        let response = await k.local.playSimulator.handle(HTTPRequest(method: "GET", path: path, rawPath: path, queryItems: [], headers: headers,
                                                                      body: [], requestId: "test", remoteAddress: nil))
        try #require(response.status == 200, "\(String(decoding: response.body, as: UTF8.self))")
        return try JSONParser.parse(response.body)
    }

    /// Changes the plan of `token` in Play; answers the new token (linked to `token`) once Kakin acknowledged it.
    static func changePlan(_ k: SimulatedKakin, _ token: String, to basePlan: String, mode: String) async throws -> String {
        let answer = try await Play.play(k, "POST", "/v1/subscriptions/\(token)/actions",
                                         ["action": "changePlan", "basePlanId": .string(basePlan), "replacementMode": .string(mode)])
        #expect(answer["linkedPurchaseToken"]?.stringValue == token)
        let new = try #require(answer["purchaseToken"]?.stringValue)
        try await Play.waitUntil { try await k.app.store.playAcknowledgementState(new) == .done }
        return new
    }

    /// u1 has one status item: the chain, from Play, served as `state`, with the newest token and that token's expiry;
    /// every token of the chain (`tokens`, the newest last) is kept in the chain, for u1.
    static func expectOneItem(_ k: SimulatedKakin, chain: String, tokens: [String], state: String = "subscribed",
                              willAutoRenew: Bool = true) async throws {
        let token = try #require(tokens.last)
        let items = try await k.status("u1")["subscriptions"]?.arrayValue ?? []
        #expect(items.count == 1, "\(items)")
        let item = try #require(items.first)
        #expect(item["source"] == "googlePlay" && item["groupId"] == "premium" && item["originalTransactionId"]?.stringValue == chain)
        #expect(item["purchaseToken"]?.stringValue == token, "the status names another token than the newest")
        #expect(item["state"]?.stringValue == state && item["willAutoRenew"]?.boolValue == willAutoRenew, "\(item)")
        let expiry = try await read(k, token)["lineItems"]?.arrayValue?.first?["expiryTime"]?.stringValue
        #expect(item["expiresAt"]?.stringValue.flatMap(Timestamp.parseRFC3339) == expiry.flatMap(Timestamp.parseRFC3339), "\(item), Play: \(expiry ?? "-")")
        for t in tokens {
            let row = try #require(try await k.app.store.playTokenRow(t))
            #expect(row.chainId == chain && row.customerId == "u1", "token of another chain or owner: \(row.chainId) \(row.customerId ?? "-")")
        }
    }

    static func chains(_ k: SimulatedKakin) async throws {
        let (first, order) = try await Play.buy(k, "u1", "premium", extra: ["basePlanId": "monthly"])
        let chain = PlayPurchaseFacts.orderBase(order)
        #expect([201, 409].contains(await Play.present(k, "u1", "premium", first).status))
        try await Play.waitUntil { try await k.app.store.playAcknowledgementState(first) == .done }
        try await expectOneItem(k, chain: chain, tokens: [first])

        // Ten days in, an upgrade to the yearly plan with time proration: a new token, the same chain.
        try await k.advance(days: 10)
        let upgraded = try await changePlan(k, first, to: "yearly", mode: "WITH_TIME_PRORATION")
        #expect(await Play.present(k, "u1", "premium", upgraded).status == 409)  // its RTDN got there first
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded])
        // The replaced token, presented again (an old device): already applied, and it entitles nothing any more.
        #expect(await Play.present(k, "u1", "premium", first).status == 409)
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded])

        // A downgrade to monthly at the end of the paid year (deferred), then a cancel: served until then, not renewing.
        let downgraded = try await changePlan(k, upgraded, to: "monthly", mode: "DEFERRED")
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded, downgraded])
        try await Play.play(k, "POST", "/v1/subscriptions/\(downgraded)/actions", ["action": "cancel"])
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded, downgraded], willAutoRenew: false)

        // Resubscribed before the lapse: Play links the new token to the cancelled one; still one item, renewing again.
        let (resubscribed, _) = try await Play.buy(k, "u1", "premium", extra: ["basePlanId": "monthly"])
        #expect(try await read(k, resubscribed)["linkedPurchaseToken"]?.stringValue == downgraded)
        #expect(await Play.present(k, "u1", "premium", resubscribed).status == 409)
        try await Play.waitUntil { try await k.app.store.playAcknowledgementState(resubscribed) == .done }
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded, downgraded, resubscribed])

        // Past its expiry and two renewals (orders ..0, ..1 of the newest token): the same item, renewed.
        let expiry = try #require(Timestamp.parseRFC3339(try await read(k, resubscribed)["lineItems"]?.arrayValue?.first?["expiryTime"]?.stringValue ?? ""))
        try await k.advance(to: expiry + 40 * 86_400_000)
        try await expectOneItem(k, chain: chain, tokens: [first, upgraded, downgraded, resubscribed])

        // The events: started and granted once for the whole chain, never revoked or expired; every order told once.
        let events = await k.kakin("GET", "/v1/customers/u1/events?afterSequence=0").json["events"]?.arrayValue ?? []
        func count(_ type: String) -> Int { events.filter { $0["type"]?.stringValue == type }.count }
        #expect(count("subscription.started") == 1 && count("entitlement.granted") == 1, "\(events.map { $0["type"] ?? .null })")
        #expect(count("entitlement.revoked") == 0 && count("subscription.expired") == 0 && count("subscription.revoked") == 0)
        let renewed = events.filter { $0["type"] == "subscription.renewed" }.compactMap { $0["data"]?["transactionId"]?.stringValue }
        #expect(Set(renewed).count == renewed.count, "an order told twice: \(renewed)")
        let resubscribedOrder = try #require(try await read(k, resubscribed)["lineItems"]?.arrayValue?.first?["latestSuccessfulOrderId"]?.stringValue)
        #expect(resubscribedOrder.hasSuffix("..1") && renewed.last == resubscribedOrder, "\(renewed)")
        #expect(renewed.contains(PlayPurchaseFacts.orderBase(resubscribedOrder) + "..0"))
        #expect(events.allSatisfy { $0["data"]?["originalTransactionId"].map { $0.stringValue == chain } ?? true })
        // A subscription credits no coins: the ledger stays empty.
        #expect(await Play.ledger(k, "u1").isEmpty)
    }

    @Test func upgradesDowngradesAndAResubscribeKeepOneItemEntitledByTheNewestTokenOnSQLite() async throws {
        try await SimulatedKakin.with { k in try await Self.chains(k) }
    }

    @Test(.postgreSQL)
    func upgradesDowngradesAndAResubscribeKeepOneItemEntitledByTheNewestTokenOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in
            try await SimulatedKakin.with(database: .postgresql(url: schema.url)) { k in try await Self.chains(k) }
        }
    }
}
