import Foundation
import KakinCore
import KakinService
import KakinServer
import Testing

@Suite(.serialized) struct WalletOverHTTP {
    func fund(_ k: TestKakin, _ customer: String, free: Int64 = 0) async throws {
        let tx = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
        #expect(try await k.postTransaction(customer, jws: tx.jws).status == 201)
        if free > 0 {
            let g = try await k.request("POST", "/v1/customers/\(customer)/wallet/grants", json: ["amount": .int(free), "reason": "campaign:xmas"],
                                        headers: ["Idempotency-Key": "grant-\(customer)"])
            #expect(g.status == 201)
        }
    }

    @Test func spendReplaysWithTheSameKeyAndRefusesAnotherBody() async throws {
        try await TestKakin.with { k in
            try await fund(k, "u1", free: 30)
            let first = try await k.spend("u1", key: "s1", amount: 50)
            #expect(first.status == 201)
            #expect(first.json["paidUsed"] == 20)
            #expect(first.json["freeUsed"] == 30)
            #expect(first.json["wallet"] == ["paid": 80, "free": 0, "total": 80])
            let replay = try await k.spend("u1", key: "s1", amount: 50)
            #expect(replay.status == 201)
            #expect(replay.body == first.body)
            #expect(replay.headers["idempotent-replayed"] == "true")
            let reused = try await k.spend("u1", key: "s1", amount: 51)
            #expect(reused.status == 422)
            #expect(reused.errorCode == "idempotency_key_reused")
            #expect(try await k.wallet("u1") == WalletBalance(paid: 80, free: 0))
        }
    }

    @Test func insufficientBalanceIs409AndSpendsNothing() async throws {
        try await TestKakin.with { k in
            try await fund(k, "u1")
            let r = try await k.spend("u1", key: "big", amount: 101)
            #expect(r.status == 409)
            #expect(r.errorCode == "insufficient_balance")
            #expect(try await k.wallet("u1").total == 100)
            let replay = try await k.spend("u1", key: "big", amount: 101)
            #expect(replay.status == 409)
            #expect(replay.headers["idempotent-replayed"] == "true")
        }
    }

    @Test func paidFirstOrderSpendsPaidCoinsFirst() async throws {
        try await TestKakin.with(wallet: WalletPolicy(spendOrder: .paidFirst)) { k in
            try await fund(k, "u1", free: 30)
            let r = try await k.spend("u1", key: "s", amount: 110)
            #expect(r.json["paidUsed"] == 100)
            #expect(r.json["freeUsed"] == 10)
        }
    }

    @Test func concurrentSpendsNeverOverdraw() async throws {
        try await TestKakin.with { k in
            try await fund(k, "u1")
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<30 { group.addTask { try await k.spend("u1", key: "k\(i)", amount: 7).status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 201 }.count == 14)
            #expect(statuses.filter { $0 == 409 }.count == 16)
            #expect(try await k.wallet("u1").total == 2)
            #expect(try await k.ledgerCheckOK())
        }
    }

    @Test func ledgerListsEveryMovementNewestFirstWithACursor() async throws {
        try await TestKakin.with { k in
            try await fund(k, "u1", free: 30)
            for i in 0..<3 { #expect(try await k.spend("u1", key: "s\(i)", amount: 10).status == 201) }
            let p1 = try await k.request("GET", "/v1/customers/u1/wallet/ledger?limit=3")
            let entries = try #require(p1.json["entries"]?.arrayValue)
            #expect(entries.map { $0["kind"]?.stringValue } == ["spend", "spend", "spend"])
            #expect(entries[0]["balanceAfter"]?["total"] == 100)
            #expect(entries.map { $0["free"] } == [-10, -10, -10])
            #expect(entries.map { $0["paid"] } == [0, 0, 0])
            let cursor = try #require(p1.json["nextCursor"]?.stringValue)
            let p2 = try await k.request("GET", "/v1/customers/u1/wallet/ledger?limit=3&cursor=\(cursor)")
            #expect(p2.json["entries"]?.arrayValue?.map { $0["kind"]?.stringValue } == ["grant", "purchase"])
            #expect(p2.json["nextCursor"] == .null)
        }
    }

    @Test func recipientSupportTotalsAndTopSupporters() async throws {
        try await TestKakin.with { k in
            for c in ["a", "b"] { try await fund(k, c) }
            _ = try await k.spend("a", key: "1", amount: 60, recipient: "performer:7")
            _ = try await k.spend("b", key: "1", amount: 40, recipient: "performer:7")
            _ = try await k.spend("b", key: "2", amount: 30, recipient: "performer:8")
            let r = try await k.request("GET", "/v1/recipients/performer:7/support")
            #expect(r.status == 200)
            #expect(r.json["coins"] == 100)
            #expect(r.json["supporters"] == 2)
            #expect(r.json["topSupporters"]?.arrayValue?.first?["customerId"] == "a")
        }
    }

    @Test func grantsNeedAnIdempotencyKeyAndReplay() async throws {
        try await TestKakin.with { k in
            let path = "/v1/customers/u9/wallet/grants"
            #expect(try await k.request("POST", path, json: ["amount": 5, "reason": "x"]).errorId == "KKN-4002")
            let a = try await k.request("POST", path, json: ["amount": 5, "reason": "x"], headers: ["Idempotency-Key": "g"])
            let b = try await k.request("POST", path, json: ["amount": 5, "reason": "x"], headers: ["Idempotency-Key": "g"])
            #expect(a.status == 201 && b.status == 201 && a.body == b.body)
            #expect(try await k.wallet("u9") == WalletBalance(paid: 0, free: 5))
        }
    }
}

@Suite struct ErrorCatalogueDocs {
    @Test func docsErrorsMarkdownIsGeneratedFromTheCatalogue() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let file = try String(contentsOf: root.appendingPathComponent("docs/errors.md"), encoding: .utf8)
        #expect(file == ErrorKind.markdownCatalogue(), "docs/errors.md is stale: run `swift run kakin errors --markdown > docs/errors.md`")
    }

    @Test func idsAreUniqueAndWellFormed() {
        let ids = ErrorKind.allCases.map(\.id)
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.hasPrefix("KKN-") && $0.count == 8 })
        #expect(ErrorKind.allCases.allSatisfy { !$0.code.isEmpty && $0.code == $0.code.lowercased() })
    }
}
