import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// The unused paid-coin balance, end to end: purchases, spends, grants, refunds and a reversal on both sides of
/// the base date go through the real server, and the report (HTTP and `kakin report unused-balance`) gives the
/// figure computed by hand below.
@Suite struct UnusedBalanceReport {
    static func at(_ s: String) -> Int64 { Timestamp.parseRFC3339(s)! }

    /// Base date 2027-03-31 in Asia/Tokyo ends at 2027-03-31T15:00:00Z.
    ///
    /// | customer | before the end of March 31 (JST)                                                        | unused on 03-31 | on 04-01 |
    /// |---|---|---|---|
    /// | a | 500 @ ¥600, 100 @ ¥100 (a sale), spend 550 (50 free + 500 paid: all of the first), 500 @ ¥600 at 23:59:59 | 100 ¥100 + 500 ¥600 | + 100 @ ¥120 at 00:00 April 1 |
    /// | b | 500 @ ¥600, spend 200 (50 free + 150 paid), refund of the 500 (350 back, 150 owed), 100 @ ¥120 (pays 100 of the debt) | 0 | + 500 @ ¥600 (50 owed, 450 left: ¥540) |
    /// | c | 3 × 100 @ ¥360, grant 1,000 free, spend 1,100 (1,000 free + 100 paid)                    | 200 ¥240 | refunded: 0 |
    /// | d | 100 @ ¥120, refunded, refund reversed                                                      | 100 ¥120 | 100 ¥120 |
    static let expectedMarch31: JSONValue = [
        "asOf": "2027-03-31", "timeZone": "Asia/Tokyo",
        "totals": [["bundleId": .string(TestAppStore.bundleId), "currency": "JPY", "unusedPaidCoins": 900, "value": 1060, "customers": 3, "source": "appStore"]],
    ]
    static let expectedApril1: JSONValue = [
        "asOf": "2027-04-01", "timeZone": "Asia/Tokyo",
        "totals": [["bundleId": .string(TestAppStore.bundleId), "currency": "JPY", "unusedPaidCoins": 1250, "value": 1480, "customers": 3, "source": "appStore"]],
    ]

    @Test func knownPurchasesSpendsAndRefundsAcrossTheBaseDateGiveTheExpectedYen() async throws {
        try await TestKakin.with { k in
            let store = k.appStore
            func set(_ s: String) { k.clock.now.withLock { $0 = Self.at(s) } }
            func buy(_ customer: String, _ product: String, quantity: Int = 1, yen: Int64, at s: String) async throws -> (id: String, jws: String) {
                set(s)
                let tx = try store.transaction(productId: product, quantity: quantity, purchaseMs: Self.at(s), extra: ["price": .int(yen * 1000)])
                let r = try await k.postTransaction(customer, jws: tx.jws)
                #expect(r.status == 201, "\(customer) \(product): \(r.status)")
                return tx
            }
            func spend(_ customer: String, _ amount: Int64, at s: String) async throws {
                set(s)
                #expect(try await k.spend(customer, key: "\(customer)-\(s)", amount: amount).status == 201)
            }
            func refund(_ tx: (id: String, jws: String), _ product: String, quantity: Int = 1, yen: Int64, purchased: String, at s: String,
                        reversed: Bool = false) async throws {
                set(s)
                let copy = try store.transaction(id: tx.id, productId: product, quantity: quantity, purchaseMs: Self.at(purchased),
                                                 signedMs: Self.at(s), revokedMs: reversed ? nil : Self.at(s), extra: ["price": .int(yen * 1000)])
                try await k.deliver([try store.notification(reversed ? "REFUND_REVERSED" : "REFUND", nil, transaction: copy.jws, signedMs: Self.at(s))])
            }

            // a
            _ = try await buy("a", "coins.500", yen: 600, at: "2027-03-01T01:00:00Z")
            _ = try await buy("a", "coins.100", yen: 100, at: "2027-03-10T01:00:00Z")
            try await spend("a", 550, at: "2027-03-20T01:00:00Z")
            _ = try await buy("a", "coins.500", yen: 600, at: "2027-03-31T14:59:59Z")
            _ = try await buy("a", "coins.100", yen: 120, at: "2027-03-31T15:00:00Z")
            // b
            let b1 = try await buy("b", "coins.500", yen: 600, at: "2027-03-02T01:00:00Z")
            try await spend("b", 200, at: "2027-03-03T01:00:00Z")
            try await refund(b1, "coins.500", yen: 600, purchased: "2027-03-02T01:00:00Z", at: "2027-03-04T01:00:00Z")
            _ = try await buy("b", "coins.100", yen: 120, at: "2027-03-05T01:00:00Z")
            _ = try await buy("b", "coins.500", yen: 600, at: "2027-04-01T06:00:00Z")
            // c
            let c1 = try await buy("c", "coins.100", quantity: 3, yen: 360, at: "2027-03-06T01:00:00Z")
            set("2027-03-07T01:00:00Z")
            #expect(try await k.request("POST", "/v1/customers/c/wallet/grants", json: ["amount": 1000, "reason": "campaign:spring"],
                                        headers: ["Idempotency-Key": "g1"]).status == 201)
            try await spend("c", 1100, at: "2027-03-08T01:00:00Z")
            try await refund(c1, "coins.100", quantity: 3, yen: 360, purchased: "2027-03-06T01:00:00Z", at: "2027-04-01T07:00:00Z")
            // d
            let d1 = try await buy("d", "coins.100", yen: 120, at: "2027-03-09T01:00:00Z")
            try await refund(d1, "coins.100", yen: 120, purchased: "2027-03-09T01:00:00Z", at: "2027-03-10T01:00:00Z")
            try await refund(d1, "coins.100", yen: 120, purchased: "2027-03-09T01:00:00Z", at: "2027-03-11T01:00:00Z", reversed: true)

            #expect(try await k.wallet("b").paid == 450)   // -150 + 100 + 500
            #expect(try await k.wallet("c").paid == -100)  // 200 left, 300 refunded after the base date
            #expect(try await k.ledgerCheckOK())

            let march = try await k.request("GET", "/v1/admin/reports/unused-balance?asOf=2027-03-31")
            #expect(march.status == 200)
            #expect(march.json == Self.expectedMarch31)
            #expect(try await k.request("GET", "/v1/admin/reports/unused-balance?asOf=2027-04-01").json == Self.expectedApril1)
            #expect(try await k.request("GET", "/v1/admin/reports/unused-balance?asOf=2027-3-31").errorId == "KKN-9006")

            let csv = String(decoding: try await k.request("GET", "/v1/admin/reports/unused-balance?asOf=2027-03-31&format=csv").body, as: UTF8.self)
            #expect(csv == """
                bundleId,currency,customerId,unusedPaidCoins,value,source
                \(TestAppStore.bundleId),JPY,a,600,700,appStore
                \(TestAppStore.bundleId),JPY,c,200,240,appStore
                \(TestAppStore.bundleId),JPY,d,100,120,appStore

                """)

            // The command prints the same figure, reading the same database while the server runs.
            let database = "sqlite:" + k.directory.appendingPathComponent("kakin.db").path
            let printed = try await Self.command(["unused-balance", "--as-of", "2027-03-31", "--database", database])
            #expect(printed.status == 0, "\(printed.errors)")
            #expect(try JSONParser.parse(printed.output) == Self.expectedMarch31)
            let lines = try await Self.command(["unused-balance", "--as-of", "2027-03-31", "--format", "csv", "--database", database])
            #expect(lines.output == csv)
            #expect(try await Self.command(["unused-balance", "--as-of", "March 31"]).status == 2)
        }
    }

    @Test func theAdminPageShowsTheFigureAndTheThreshold() async throws {
        try await TestKakin.with { k in
            k.clock.now.withLock { $0 = Self.at("2027-03-01T00:00:00Z") }
            let tx = try k.appStore.transaction(productId: "coins.500", purchaseMs: k.clock.nowMs(), extra: ["price": .int(600_000)])
            #expect(try await k.postTransaction("u1", jws: tx.jws).status == 201)
            let page = String(decoding: try await k.request("GET", "/admin/reports/unused-balance?asOf=2027-03-31").body, as: UTF8.self)
            #expect(page.contains("<td class=\"num big\">600</td>"))
            #expect(page.contains("under ¥10,000,000"))
            #expect(page.contains("/admin/reports/unused-balance.csv?asOf=2027-03-31"))
        }
    }

    struct Printed {
        var status: Int32
        var output: String
        var errors: String
    }

    static func command(_ arguments: [String]) async throws -> Printed {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = open(dir.appendingPathComponent("out").path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let err = open(dir.appendingPathComponent("err").path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let status = await ReportCommand.run(arguments: arguments, output: out, errorOutput: err)
        close(out)
        close(err)
        return Printed(status: status,
                       output: String(decoding: FileManager.default.contents(atPath: dir.appendingPathComponent("out").path) ?? Data(), as: UTF8.self),
                       errors: String(decoding: FileManager.default.contents(atPath: dir.appendingPathComponent("err").path) ?? Data(), as: UTF8.self))
    }
}
