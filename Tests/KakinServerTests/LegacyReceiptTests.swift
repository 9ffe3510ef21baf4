import AppStoreSecurity
import AppStoreSimulator
import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

/// Apps that sold with the original StoreKit send their app receipt. Kakin reads its transaction IDs and
/// restores through the App Store Server API, here the simulator's over HTTP. The simulator writes the
/// receipt for purchases it really made (Apple's own Xcode receipts name transaction "0", which no Server
/// API knows; `AppStoreSecurityTests` reads those). Notifications are cut, so everything Kakin learns
/// comes from the receipt and the Server API.
@Suite(.serialized) struct LegacyReceipts {
    static func withoutNotifications(_ body: (SimulatedKakin) async throws -> Void) async throws {
        try await SimulatedKakin.with(deliveries: { inner in
            let s = NotificationSwitch(inner)
            s.set(reachable: false)
            return s
        }, body)
    }

    /// The receipt the simulator writes for the anonymous Apple account (a StoreKit 1 app sets no token).
    static func receipt(_ k: SimulatedKakin, encoding: String) async throws -> String {
        let answer = try await k.sim("GET", "/simulator/v1/receipt?encoding=\(encoding)")
        return try #require(answer["appReceipt"]?.stringValue)
    }

    @Test func anXcodeReceiptRestoresTheCustomersPurchasesThroughTheServerAPI() async throws {
        try await Self.withoutNotifications { k in
            let sub = try await k.buy("u1", "premium.monthly", withToken: false)
            try await k.buy("u1", "noads", withToken: false)
            try await k.buy("u1", "coins.500", withToken: false)
            try await k.advance(days: 40)
            #expect(try await k.status("u1")["status"] == "new")

            let base64 = try await Self.receipt(k, encoding: "xcode")
            let receipt = try AppReceipt.parse(base64: base64)
            #expect(receipt.receiptType == "Xcode")
            // The free week, then two paid months (renewed on day 7 and day 38): every period is an in-app entry.
            #expect(receipt.inApp.map(\.productId) == ["premium.monthly", "noads", "coins.500", "premium.monthly", "premium.monthly"])

            let restored = await k.kakin("POST", "/v1/customers/u1/restore", ["appReceipt": .string(base64)])
            #expect(restored.status == 200)
            #expect(restored.json["status"] == "active")
            let subscription = try #require(restored.json["subscriptions"]?.arrayValue?.first)
            #expect(subscription["state"] == "subscribed")
            #expect(subscription["originalTransactionId"] == sub["originalTransactionId"])
            #expect(subscription["expiresAt"] == (try await k.sim("GET", "/simulator/v1/subscriptions/\(sub["originalTransactionId"]!.stringValue!)"))["expiresDate"])
            #expect(restored.json["nonConsumables"]?.arrayValue?.map { $0["productId"] } == ["noads"])
            #expect(restored.json["wallet"] == ["paid": 500, "free": 50, "total": 550])
            // Restoring with the same receipt again changes nothing.
            #expect(await k.kakin("POST", "/v1/customers/u1/restore", ["appReceipt": .string(base64)]).json == restored.json)
        }
    }

    @Test func aReceiptPostedAfterAPurchaseCreditsItOnceAndAnswersForTheNewestPurchase() async throws {
        try await Self.withoutNotifications { k in
            try await k.buy("u2", "noads", withToken: false)
            try await k.advance(days: 1)
            let coins = try await k.buy("u2", "coins.100", withToken: false)
            let base64 = try await Self.receipt(k, encoding: "appStore")
            let first = await k.kakin("POST", "/v1/customers/u2/transactions", ["appReceipt": .string(base64)])
            #expect(first.status == 201)
            #expect(first.json["transaction"]?["transactionId"] == coins["transactionId"])
            #expect(first.json["grant"] == ["coins": ["paid": 100, "free": 0]])
            // The older purchase in the receipt was looked up and applied too.
            #expect(first.json["customer"]?["nonConsumables"]?.arrayValue?.map { $0["productId"] } == ["noads"])
            let again = await k.kakin("POST", "/v1/customers/u2/transactions", ["appReceipt": .string(base64)])
            #expect(again.status == 409)
            #expect(again.json["error"]?["code"] == "already_processed")
            #expect(again.json["grant"] == first.json["grant"])
            #expect(try await k.app.store.wallet("u2") == WalletBalance(paid: 100, free: 0))
        }
    }

    @Test func receiptsKakinCannotUseAreRefusedWithTheirOwnCodes() async throws {
        try await Self.withoutNotifications { k in
            let none = await k.kakin("POST", "/v1/customers/u3/transactions", ["appReceipt": .string(try await Self.receipt(k, encoding: "appStore"))])
            #expect(none.status == 422)
            #expect(none.json["error"]?["code"] == "receipt_without_purchases")
            #expect(none.json["error"]?["id"] == "KKN-3012")
            // A receipt without purchases restores what the customer already has (nothing here).
            #expect(await k.kakin("POST", "/v1/customers/u3/restore", ["appReceipt": .string(try await Self.receipt(k, encoding: "xcode"))]).status == 200)

            try await k.buy("u3", "coins.100", withToken: false)
            let good = try AppReceipt.der(fromBase64: try await Self.receipt(k, encoding: "appStore"))
            for bad in ["not a receipt", Base64.encode(Array(good.prefix(good.count - 10))), Base64.encode(Array("hello".utf8))] {
                let answer = await k.kakin("POST", "/v1/customers/u3/transactions", ["appReceipt": .string(bad)])
                #expect(answer.status == 400)
                #expect(answer.json["error"]?["code"] == "invalid_receipt")
                #expect(answer.json["error"]?["id"] == "KKN-3010")
            }
            // A changed digit in the transaction id still reads, but the signature no longer verifies.
            var tampered = good
            let id = try #require(try AppReceipt.parse(der: good).inApp.first?.transactionId)
            let needle = Array(id.utf8)
            let at = try #require((0...(tampered.count - needle.count)).first { Array(tampered[$0..<($0 + needle.count)]) == needle })
            tampered[at + needle.count - 1] = tampered[at + needle.count - 1] == UInt8(ascii: "9") ? UInt8(ascii: "8") : UInt8(ascii: "9")
            let forged = await k.kakin("POST", "/v1/customers/u3/restore", ["appReceipt": .string(Base64.encode(tampered))])
            #expect(forged.status == 422)
            #expect(forged.json["error"]?["code"] == "untrusted_receipt")
            // Apple's own Xcode receipt is signed by Xcode's StoreKit certificate, which local mode does not trust.
            let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Fixtures/apple-testdata/xcode/xcode-app-receipt-with-transaction")
            let xcode = String(decoding: try Data(contentsOf: fixture), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(await k.kakin("POST", "/v1/customers/u3/transactions", ["appReceipt": .string(xcode)]).json["error"]?["code"] == "untrusted_receipt")
            let both = await k.kakin("POST", "/v1/customers/u3/restore", ["appReceipt": .string(Base64.encode(good)), "transactionId": "1"])
            #expect(both.status == 400)
        }
    }
}
