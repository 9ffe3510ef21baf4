@testable import AppStoreSimulator
import KakinCore
import Testing

/// The App Store Server API's answers computed from the engine (the HTTP tests cover framing and auth).
@Suite struct ServerAPIAnswers {
    /// 110 consumables, a non-consumable, and a monthly subscription renewed for two years (25 transactions).
    func longHistory() throws -> (SimulatorState, String) {
        var s = makeState()
        let first = try s.buy("coins")
        for _ in 0..<109 {
            _ = try s.buy("coins")
            _ = s.advance(by: .hour)
        }
        _ = try s.buy("lifetime")
        _ = try s.buy("B")
        _ = s.advance(by: 730 * .day)
        return (s, first.transactionId!)
    }

    func page(_ s: SimulatorState, _ id: String, _ items: [(String, String)], revision: String?) throws -> JSONValue {
        try s.history(id, query: SimulatorState.HistoryQuery(items: items), revision: revision)
    }

    func all(_ s: SimulatorState, _ id: String, _ items: [(String, String)]) throws -> (ids: [String], pages: Int) {
        var ids: [String] = []
        var revision: String?
        var pages = 0
        repeat {
            let p = try page(s, id, items, revision: revision)
            pages += 1
            let signed = p["signedTransactions"]!.arrayValue!
            #expect(signed.count <= 20)
            ids += signed.map { decodeJWS($0.stringValue!)["transactionId"]!.stringValue! }
            revision = p["revision"]?.stringValue
            if p["hasMore"] == false { break }
        } while pages < 50
        return (ids, pages)
    }

    @Test func historyPagesThroughEveryTransactionInBothOrders() throws {
        let (s, id) = try longHistory()
        let total = s.store.transactionsByAccount[tokenA]!.count
        #expect(total == 110 + 1 + 25)
        let asc = try all(s, id, [])
        #expect(asc.ids.count == total)
        #expect(Set(asc.ids).count == total)
        #expect(asc.pages == (total + 19) / 20)
        let desc = try all(s, id, [("sort", "DESCENDING")])
        #expect(desc.ids == asc.ids.reversed())
        let first = try page(s, id, [], revision: nil)
        #expect(first["bundleId"] == "com.example.app")
        #expect(first["appAppleId"] == 1234)
        #expect(first["environment"] == "Sandbox")
        #expect(first["hasMore"] == true)
    }

    @Test func historyFiltersCombineLikeApple() throws {
        let (s, id) = try longHistory()
        #expect(try all(s, id, [("productType", "AUTO_RENEWABLE")]).ids.count == 25)
        #expect(try all(s, id, [("productType", "AUTO_RENEWABLE"), ("productType", "NON_CONSUMABLE")]).ids.count == 26)
        #expect(try all(s, id, [("productId", "coins"), ("productId", "lifetime")]).ids.count == 111)
        #expect(try all(s, id, [("subscriptionGroupIdentifier", "g")]).ids.count == 25)
        #expect(try all(s, id, [("productId", "coins"), ("productType", "AUTO_RENEWABLE")]).ids.isEmpty)
        #expect(try all(s, id, [("inAppOwnershipType", "FAMILY_SHARED")]).ids.isEmpty)
        // startDate ≤ purchaseDate < endDate
        let t10 = s.tx(s.store.transactionsByAccount[tokenA]![10])["purchaseDate"]!.int64Value!
        #expect(try all(s, id, [("startDate", String(t10)), ("endDate", String(t10 + 5 * .hour))]).ids.count == 5)
        #expect(try all(s, id, [("revoked", "True")]).ids.isEmpty)
        #expect(try all(s, id, [("revoked", "false")]).ids.count == 136)
    }

    @Test func historyRefusesBadParametersWithApplesCodes() throws {
        let (s, id) = try longHistory()
        #expect(throws: AppStoreAPIError.invalidSort) { try page(s, id, [("sort", "UP")], revision: nil) }
        #expect(throws: AppStoreAPIError.invalidProductType) { try page(s, id, [("productType", "GAME")], revision: nil) }
        #expect(throws: AppStoreAPIError.invalidInAppOwnershipType) { try page(s, id, [("inAppOwnershipType", "MINE")], revision: nil) }
        #expect(throws: AppStoreAPIError.invalidRevoked) { try page(s, id, [("revoked", "maybe")], revision: nil) }
        #expect(throws: AppStoreAPIError.invalidStartDate) { try page(s, id, [("startDate", "yesterday")], revision: nil) }
        #expect(throws: AppStoreAPIError.startDateAfterEndDate) { try page(s, id, [("startDate", "10"), ("endDate", "5")], revision: nil) }
        #expect(throws: AppStoreAPIError.invalidRequestRevision) { try page(s, id, [], revision: "garbage") }
        #expect(throws: AppStoreAPIError.invalidTransactionId) { try page(s, "12ab", [], revision: nil) }
        #expect(throws: AppStoreAPIError.transactionIdNotFound) { try page(s, "1", [], revision: nil) }
        // A revision only works with the filters it was issued for.
        let p = try page(s, id, [("productType", "CONSUMABLE")], revision: nil)
        #expect(throws: AppStoreAPIError.invalidRequestRevision) { try page(s, id, [], revision: p["revision"]!.stringValue) }
    }

    @Test func aTransactionModifiedWhilePagingComesBackLaterInAscendingOrder() throws {
        var (s, id) = try longHistory()
        let p1 = try page(s, id, [], revision: nil)
        let firstId = decodeJWS(p1["signedTransactions"]!.arrayValue![0].stringValue!)["transactionId"]!.stringValue!
        _ = try s.refund(transactionId: firstId)
        var revision = p1["revision"]?.stringValue
        var seen: [String] = []
        while let r = revision {
            let p = try page(s, id, [], revision: r)
            seen += p["signedTransactions"]!.arrayValue!.map { decodeJWS($0.stringValue!)["transactionId"]!.stringValue! }
            revision = p["hasMore"] == true ? p["revision"]?.stringValue : nil
        }
        #expect(seen.last == firstId)
    }

    @Test func v1HistoryLeavesOutConsumablesThatWereNotRefunded() throws {
        var (s, id) = try longHistory()
        _ = try s.refund(transactionId: id)
        let p = try s.history(id, query: SimulatorState.HistoryQuery(items: [("productType", "CONSUMABLE")]), revision: nil, version: 1)
        #expect(p["signedTransactions"]?.arrayValue?.count == 1)
    }

    @Test func statusesListEveryInstanceOfTheCustomerWithItsLatestTransaction() throws {
        var s = makeState()
        let a = try s.buy("B")
        _ = try s.buy("A", family: true)
        _ = try s.buy("coins")
        _ = try s.buy("B", token: tokenB)
        _ = s.advance(by: 40 * .day)
        let all = try s.statuses(a.transactionId!, statusFilter: [])
        let entries = all["data"]!.arrayValue!
        #expect(entries.count == 1)
        #expect(entries[0]["subscriptionGroupIdentifier"] == "g")
        let last = entries[0]["lastTransactions"]!.arrayValue!
        #expect(last.count == 2)
        #expect(last.allSatisfy { $0["status"] == 1 })
        let latest = last.first { $0["originalTransactionId"]?.stringValue == a.originalTransactionId }!
        #expect(decodeJWS(latest["signedTransactionInfo"]!.stringValue!)["purchaseDate"] == .int(plus("P1M", startMs)))
        #expect(try s.statuses(a.transactionId!, statusFilter: ["2", "5"])["data"] == [])
        #expect(throws: AppStoreAPIError.invalidStatus) { try s.statuses(a.transactionId!, statusFilter: ["9"]) }
    }

    @Test func orderLookupAndRefundHistory() throws {
        var s = makeState()
        let coins = try s.buy("coins")
        let order = s.store.transactions[coins.transactionId!]!.orderId!
        #expect(order.count == 10)
        let found = s.lookUpOrder(order)
        #expect(found["status"] == 0)
        #expect(found["signedTransactions"] == [.string(s.store.transactions[coins.transactionId!]!.jws)])
        #expect(s.lookUpOrder("NOPE000000")["status"] == 1)
        var refunded: [String] = []
        for _ in 0..<25 {
            let t = try s.buy("coins").transactionId!
            _ = s.advance(by: .hour)
            _ = try s.refund(transactionId: t)
            refunded.append(t)
        }
        let p1 = try s.refundHistory(coins.transactionId!, revision: nil)
        #expect(p1["hasMore"] == true)
        let p2 = try s.refundHistory(coins.transactionId!, revision: p1["revision"]!.stringValue)
        #expect(p2["hasMore"] == false)
        let ids = (p1["signedTransactions"]!.arrayValue! + p2["signedTransactions"]!.arrayValue!).map { decodeJWS($0.stringValue!)["transactionId"]!.stringValue! }
        #expect(ids == refunded)
        #expect(throws: AppStoreAPIError.invalidRequestRevision) { try s.refundHistory(coins.transactionId!, revision: "x") }
    }

    @Test func notificationHistoryFiltersAndPages() throws {
        var s = makeState(environment: .production)
        let a = try s.buy("B")
        for _ in 0..<25 { _ = try s.buy("coins", token: tokenB) }
        _ = s.advance(by: 29 * .day)
        _ = s.advance(by: 2 * .day)
        let range: [String: JSONValue] = ["startDate": .int(startMs), "endDate": .int(s.nowMs + 1)]
        let p1 = try s.notificationHistory(body: .object(range), paginationToken: nil)
        #expect(p1["hasMore"] == true)
        #expect(p1["notificationHistory"]?.arrayValue?.count == 20)
        let p2 = try s.notificationHistory(body: .object(range), paginationToken: p1["paginationToken"]!.stringValue)
        #expect(p2["notificationHistory"]?.arrayValue?.count == 7)
        #expect(p2["hasMore"] == false)
        var renew = range
        renew["notificationType"] = "DID_RENEW"
        #expect(try s.notificationHistory(body: .object(renew), paginationToken: nil)["notificationHistory"]?.arrayValue?.count == 1)
        var customer = range
        customer["transactionId"] = .string(a.transactionId!)
        #expect(try s.notificationHistory(body: .object(customer), paginationToken: nil)["notificationHistory"]?.arrayValue?.count == 2)
        var failures = range
        failures["onlyFailures"] = true
        #expect(try s.notificationHistory(body: .object(failures), paginationToken: nil)["notificationHistory"]?.arrayValue?.count == 20)
        var both = customer
        both["notificationType"] = "DID_RENEW"
        #expect(throws: AppStoreAPIError.multipleFiltersSupplied) { try s.notificationHistory(body: .object(both), paginationToken: nil) }
        var badPair = range
        badPair["notificationType"] = "REFUND"
        badPair["notificationSubtype"] = "UPGRADE"
        #expect(throws: AppStoreAPIError.invalidNotificationType) { try s.notificationHistory(body: .object(badPair), paginationToken: nil) }
        #expect(throws: AppStoreAPIError.invalidStartDate) { try s.notificationHistory(body: ["endDate": 5], paginationToken: nil) }
        #expect(throws: AppStoreAPIError.startDateTooFarInPast) {
            try s.notificationHistory(body: ["startDate": .int(s.nowMs - 181 * .day), "endDate": .int(s.nowMs)], paginationToken: nil)
        }
        #expect(throws: AppStoreAPIError.invalidPaginationToken) { try s.notificationHistory(body: .object(renew), paginationToken: p1["paginationToken"]!.stringValue) }
    }

    @Test func consumptionInformationIsValidatedLikeAppleAndRecorded() throws {
        var s = makeState()
        let coins = try s.buy("coins").transactionId!
        let sub = try s.buy("B").transactionId!
        let good: JSONValue = ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false,
                               "consumptionPercentage": 50_000, "refundPreference": "GRANT_PRORATED"]
        try s.recordConsumption(coins, body: good)
        #expect(s.store.consumption.count == 1)
        #expect(throws: AppStoreAPIError.invalidCustomerConsented) {
            try s.recordConsumption(coins, body: ["customerConsented": false, "deliveryStatus": "DELIVERED", "sampleContentProvided": false])
        }
        #expect(throws: AppStoreAPIError.invalidDeliveryStatus) {
            try s.recordConsumption(coins, body: ["customerConsented": true, "deliveryStatus": "LOST", "sampleContentProvided": false])
        }
        #expect(throws: AppStoreAPIError.invalidSampleContentProvided) {
            try s.recordConsumption(coins, body: ["customerConsented": true, "deliveryStatus": "DELIVERED"])
        }
        // Apple computes the consumption of auto-renewables itself and rejects a percentage for them.
        #expect(throws: AppStoreAPIError.generalBadRequest) { try s.recordConsumption(sub, body: good) }
        #expect(throws: AppStoreAPIError.transactionIdNotFound) { try s.recordConsumption("77", body: good) }
        #expect(s.store.consumption.count == 1)
    }
}
