import Foundation
import KakinCore
import KakinService
import KakinServer
import Testing

/// The mission's first requirement, end to end over real HTTP and SQLite: a verified purchase is credited
/// exactly once, whatever arrives twice or at once.
@Suite(.serialized) struct PurchaseFlow {
    @Test func firstPostAnswers201WithGrantAndCustomerStatus() async throws {
        try await TestKakin.with { k in
            let tx = try k.appStore.transaction(productId: "coins.500", quantity: 2, purchaseMs: k.clock.nowMs())
            let r = try await k.postTransaction("u1", jws: tx.jws, processId: "user-1234")
            #expect(r.status == 201)
            #expect(r.json["transaction"]?["transactionId"]?.stringValue == tx.id)
            #expect(r.json["grant"] == ["coins": ["paid": 1000, "free": 100]])
            #expect(r.json["customer"]?["wallet"] == ["paid": 1000, "free": 100, "total": 1100])
            #expect(r.json["customer"]?["status"] == "new")
            #expect(r.headers["x-request-id"] != nil)
            #expect(try await k.wallet("u1") == WalletBalance(paid: 1000, free: 100))
        }
    }

    @Test func retryOfGrantedConsumableAnswers409WithTheSameFields() async throws {
        try await TestKakin.with { k in
            let tx = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
            let first = try await k.postTransaction("u1", jws: tx.jws)
            let second = try await k.postTransaction("u1", jws: tx.jws)
            #expect(first.status == 201)
            #expect(second.status == 409)
            #expect(second.errorCode == "already_processed")
            #expect(second.errorId == "KKN-3001")
            #expect(second.json["grant"] == first.json["grant"])
            #expect(second.json["transaction"] == first.json["transaction"])
            #expect(second.json["customer"]?["wallet"]?["total"] == 100)
        }
    }

    @Test func sixtyFourConcurrentPostsOfOneTransactionCreditOnce() async throws {
        try await TestKakin.with { k in
            let tx = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<64 { group.addTask { try await k.postTransaction("u1", jws: tx.jws).status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 1)
            #expect(statuses.filter { $0 == 409 }.count == 63)
            #expect(try await k.wallet("u1") == WalletBalance(paid: 100, free: 0))
            #expect(try await k.ledgerCheckOK())
        }
    }

    @Test func manyCustomersAndTransactionsSentTwiceAtOnceEndWithExactBalances() async throws {
        try await TestKakin.with { k in
            let customers = (0..<20).map { "c\($0)" }
            var work: [(String, String)] = []
            for (i, c) in customers.enumerated() {
                for j in 0...(i % 4) {
                    let product = j % 2 == 0 ? "coins.100" : "coins.500"
                    work.append((c, try k.appStore.transaction(productId: product, purchaseMs: k.clock.nowMs()).jws))
                }
            }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for (c, jws) in work + work {
                    group.addTask { try await k.postTransaction(c, jws: jws).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == work.count)
            #expect(statuses.filter { $0 == 409 }.count == work.count)
            for (i, c) in customers.enumerated() {
                var paid: Int64 = 0
                var free: Int64 = 0
                for j in 0...(i % 4) {
                    if j % 2 == 0 { paid += 100 } else { paid += 500; free += 50 }
                }
                #expect(try await k.wallet(c) == WalletBalance(paid: paid, free: free), "customer \(c)")
            }
            #expect(try await k.ledgerCheckOK())
        }
    }

    @Test func transactionOfAnotherCustomersAccountIsRefusedWith403() async throws {
        try await TestKakin.with { k in
            let alice = try await k.request("GET", "/v1/customers/alice")
            let token = try #require(alice.json["appAccountToken"]?.stringValue)
            let tx = try k.appStore.transaction(appAccountToken: token, purchaseMs: k.clock.nowMs())
            let r = try await k.postTransaction("bob", jws: tx.jws)
            #expect(r.status == 403)
            #expect(r.errorCode == "belongs_to_another_customer")
            #expect(try await k.wallet("bob").total == 0)
            #expect(try await k.postTransaction("alice", jws: tx.jws).status == 201)
        }
    }

    @Test func revokedTransactionIsRefusedWith422() async throws {
        try await TestKakin.with { k in
            let now = k.clock.nowMs()
            let tx = try k.appStore.transaction(purchaseMs: now - 1000, signedMs: now, revokedMs: now - 10)
            let r = try await k.postTransaction("u1", jws: tx.jws)
            #expect(r.status == 422)
            #expect(r.errorCode == "transaction_revoked")
            #expect(try await k.wallet("u1").total == 0)
        }
    }

    @Test func nonConsumableGrantsAnEntitlementAndMakesTheCustomerActive() async throws {
        try await TestKakin.with { k in
            let tx = try k.appStore.transaction(productId: "noads", type: "Non-Consumable", purchaseMs: k.clock.nowMs())
            let r = try await k.postTransaction("u1", jws: tx.jws)
            #expect(r.status == 201)
            #expect(r.json["grant"]?["entitlement"]?["productId"] == "noads")
            #expect(r.json["customer"]?["status"] == "active")
            #expect(r.json["customer"]?["nonConsumables"]?.arrayValue?.count == 1)
        }
    }
}

/// Bad input never crashes, never changes state, and always gets the documented 4xx with its error ID.
@Suite(.serialized) struct BadInput {
    @Test func everyKindOfBadRequestGetsItsDocumentedErrorAndChangesNothing() async throws {
        try await TestKakin.with { k in
            let good = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
            #expect(try await k.postTransaction("u1", jws: good.jws).status == 201)
            let parts = good.jws.split(separator: ".").map(String.init)
            let tamperedPayload = parts[0] + "." + Base64.urlEncode(Array(#"{"transactionId":"1"}"#.utf8)) + "." + parts[2]
            let unknownProduct = try k.appStore.transaction(productId: "coins.999", purchaseMs: k.clock.nowMs())
            let otherApp = try k.appStore.transaction(purchaseMs: k.clock.nowMs(), bundleId: "com.example.other")
            let production = try k.appStore.transaction(purchaseMs: k.clock.nowMs(), environment: "Production")
            let path = "/v1/customers/u1/transactions"
            let cases: [(String, TestKakin.Response, Int, String)] = [
                ("malformed JSON", try await k.request("POST", path, body: Array("{\"signedTransaction\":".utf8), headers: ["Content-Type": "application/json"]), 400, "KKN-1001"),
                ("wrong content type", try await k.request("POST", path, body: Array("{}".utf8), headers: ["Content-Type": "text/plain"]), 415, "KKN-1003"),
                ("no field", try await k.request("POST", path, json: [:]), 400, "KKN-1002"),
                ("two fields", try await k.request("POST", path, json: ["signedTransaction": "a.b.c", "transactionId": "1"]), 400, "KKN-1002"),
                ("unknown field", try await k.request("POST", path, json: ["signedTransaction": "a.b.c", "x": 1]), 400, "KKN-1002"),
                ("wrong type", try await k.request("POST", path, json: ["signedTransaction": 5]), 400, "KKN-1002"),
                ("truncated JWS", try await k.postTransaction("u1", jws: String(good.jws.prefix(good.jws.count / 2))), 422, "KKN-2001"),
                ("tampered payload", try await k.postTransaction("u1", jws: tamperedPayload), 422, "KKN-2004"),
                ("garbage", try await k.postTransaction("u1", jws: "not a jws"), 422, "KKN-2001"),
                ("unknown product", try await k.postTransaction("u1", jws: unknownProduct.jws), 422, "KKN-3002"),
                ("other app", try await k.postTransaction("u1", jws: otherApp.jws), 422, "KKN-2005"),
                ("environment not accepted", try await k.postTransaction("u1", jws: production.jws), 422, "KKN-2007"),
                ("invalid customer id", try await k.request("POST", "/v1/customers/bad%20id/transactions", json: ["signedTransaction": .string(good.jws)]), 400, "KKN-1007"),
                ("customer id too long", try await k.request("GET", "/v1/customers/" + String(repeating: "a", count: 129)), 400, "KKN-1007"),
                ("unknown route", try await k.request("GET", "/v1/nothing"), 404, "KKN-1005"),
                ("wrong method", try await k.request("DELETE", "/v1/customers/u1/wallet"), 405, "KKN-1006"),
                ("spend without key", try await k.request("POST", "/v1/customers/u1/wallet/spend", json: ["amount": 1, "item": "x"]), 400, "KKN-4002"),
                ("zero amount", try await k.spend("u1", key: "z", amount: 0), 400, "KKN-4004"),
                ("huge amount", try await k.spend("u1", key: "h", amount: 1_000_000_000_000), 400, "KKN-4004"),
                ("ledger limit", try await k.request("GET", "/v1/customers/u1/wallet/ledger?limit=0"), 400, "KKN-1002"),
                ("ledger cursor", try await k.request("GET", "/v1/customers/u1/wallet/ledger?cursor=zzz"), 400, "KKN-1013"),
                ("deep JSON", try await k.request("POST", path, body: Array((String(repeating: "[", count: 200) + String(repeating: "]", count: 200)).utf8), headers: ["Content-Type": "application/json"]), 400, "KKN-1001"),
            ]
            for (name, r, status, id) in cases {
                #expect(r.status == status, "\(name): status \(r.status)")
                #expect(r.errorId == id, "\(name): id \(r.errorId ?? "none")")
                #expect(r.json["error"]?["requestId"]?.stringValue == r.headers["x-request-id"], "\(name): requestId")
                #expect(r.json["error"]?["message"]?.stringValue?.isEmpty == false, "\(name): message")
            }
            #expect(try await k.wallet("u1") == WalletBalance(paid: 100, free: 0))
            #expect(try await k.ledgerCheckOK())
            #expect(try await k.request("GET", "/healthz").status == 200)
        }
    }

    @Test func bodyOverTheLimitIsRefusedWith413AndTheServerKeepsServing() async throws {
        try await TestKakin.with { k in
            let big = Array(("{\"signedTransaction\":\"" + String(repeating: "a", count: 1 << 20) + "\"}").utf8)
            let r = try await k.request("POST", "/v1/customers/u1/transactions", body: big, headers: ["Content-Type": "application/json"])
            #expect(r.status == 413)
            #expect(r.errorId == "KKN-1004")
            #expect(try await k.request("GET", "/healthz").status == 200)
        }
    }
}
