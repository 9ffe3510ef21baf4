import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import KakinExternal
@testable import KakinServer
import KakinService
import Testing

/// The routes of purchases outside the App Store over real HTTP, and the unused-balance report with coins sold both ways.
@Suite struct ExternalPurchaseRouteTests {
    static let secret = Array("whsec_route_test_0123456789abcdef".utf8)

    static func start() async throws -> TestKakin {
        try await TestKakin.start(configure: { c in
            c.apps[0].environments = [.sandbox, .production]
            c.apps[0].external.stripe = StripeWebhookConfiguration(webhookSecretEnv: "KAKIN_STRIPE_SECRET", secrets: [secret])
        })
    }

    func stripeBody(id: String, createdMs: Int64, paymentIntent: String, customer: String) -> [UInt8] {
        let event: JSONValue = [
            "id": .string(id), "object": "event", "created": .int(createdMs / 1000), "livemode": false, "type": "checkout.session.completed",
            "data": ["object": [
                "id": "cs_test_route", "object": "checkout.session", "mode": "payment", "payment_status": "paid", "amount_total": 120,
                "currency": "jpy", "payment_intent": .string(paymentIntent),
                "metadata": ["kakin_customer_id": .string(customer), "kakin_product_id": "coins.100"],
            ]],
        ]
        return event.serialized()
    }

    @Test func theRoutesAnswerAsTheContractSays() async throws {
        try await using(try await Self.start(), stop: { await $0.stop() }) { k in
            let now = k.clock.nowMs()
            // The generic source: 201, then 409 already_processed with the same fields; Idempotency-Key required.
            let body: JSONValue = ["provider": "web", "externalId": "ord_1", "productId": "coins.100", "price": 120, "currency": "JPY",
                                   "purchasedAt": .string(Timestamp.rfc3339(now))]
            #expect(try await k.request("POST", "/v1/customers/u1/external-purchases", json: body).errorId == "KKN-4002")
            let first = try await k.request("POST", "/v1/customers/u1/external-purchases", json: body, headers: ["Idempotency-Key": "a"])
            #expect(first.status == 201)
            #expect(first.json["grant"] == ["coins": ["paid": 100, "free": 0]])
            let again = try await k.request("POST", "/v1/customers/u1/external-purchases", json: body, headers: ["Idempotency-Key": "b"])
            #expect(again.status == 409 && again.errorCode == "already_processed")
            #expect(again.json["grant"] == first.json["grant"] && again.json["purchase"] == first.json["purchase"])
            guard case .object(var bad) = body else { return }
            bad["price"] = -1
            #expect(try await k.request("POST", "/v1/customers/u1/external-purchases", json: .object(bad), headers: ["Idempotency-Key": "c"]).errorId == "KKN-3050")
            // A refund of part, then more than remains (refused, nothing changed).
            let refund = try await k.request("POST", "/v1/customers/u1/external-purchases/web/ord_1/refund", json: ["amount": 60])
            #expect(refund.status == 200 && refund.json["purchase"]?["refundedAmount"] == 60)
            #expect(try await k.request("POST", "/v1/customers/u1/external-purchases/web/ord_1/refund", json: ["amount": 61]).errorId == "KKN-3051")
            #expect(try await k.request("POST", "/v1/customers/u1/external-purchases/web/nope/refund", json: [:]).errorId == "KKN-3052")
            #expect(try await k.wallet("u1") == WalletBalance(paid: 50, free: 0))
            let ledger = try await k.request("GET", "/v1/customers/u1/wallet/ledger").json["entries"]?.arrayValue ?? []
            #expect(ledger.map { $0["source"] } == ["web", "web"])

            // Stripe: the signature is the credential.
            let payload = stripeBody(id: "evt_route_1", createdMs: now, paymentIntent: "pi_route", customer: "u2")
            let unsigned = try await k.request("POST", "/v1/webhooks/stripe/\(TestAppStore.bundleId)", body: payload,
                                               headers: ["Stripe-Signature": "t=\(now / 1000),v1=" + String(repeating: "0", count: 64)])
            #expect(unsigned.status == 400 && unsigned.errorId == "KKN-3057")
            let header = TimestampedSignature.header(body: payload, timestamp: now / 1000, secrets: [Self.secret])
            let signed = try await k.request("POST", "/v1/webhooks/stripe/\(TestAppStore.bundleId)", body: payload, headers: ["Stripe-Signature": header])
            #expect(signed.status == 200 && signed.json["outcome"] == "applied")
            let duplicate = try await k.request("POST", "/v1/webhooks/stripe/\(TestAppStore.bundleId)", body: payload, headers: ["Stripe-Signature": header])
            #expect(duplicate.status == 200 && duplicate.json["outcome"] == "duplicate")
            #expect(try await k.request("POST", "/v1/webhooks/stripe/com.unknown", body: payload, headers: ["Stripe-Signature": header]).errorId == "KKN-3060")
            #expect(try await k.wallet("u2") == WalletBalance(paid: 100, free: 0))
            #expect(try await k.request("GET", "/v1/admin/external-purchase-reports?state=failed").json == ["reports": []])
            #expect(try await k.request("GET", "/v1/admin/external-purchase-reports?state=lost").errorId == "KKN-1002")
            #expect(try await k.ledgerCheckOK())
        }
    }

    @Test func unusedBalanceShowsCoinsSoldThroughTheAppStoreAndOutsideIt() async throws {
        try await using(try await Self.start(), stop: { await $0.stop() }) { k in
            let now = k.clock.nowMs()
            // The App Store: 500 coins for ¥600 to a.
            let tx = try k.appStore.transaction(productId: "coins.500", purchaseMs: now, extra: ["price": .int(600_000)])
            #expect(try await k.postTransaction("a", jws: tx.jws).status == 201)
            // The web shop (generic source): 100 coins for ¥120 to b; Stripe: 100 coins for ¥120 to c.
            let web: JSONValue = ["provider": "web", "externalId": "ord_9", "productId": "coins.100", "price": 120, "currency": "JPY",
                                  "purchasedAt": .string(Timestamp.rfc3339(now))]
            #expect(try await k.request("POST", "/v1/customers/b/external-purchases", json: web, headers: ["Idempotency-Key": "w"]).status == 201)
            let payload = stripeBody(id: "evt_ub", createdMs: now, paymentIntent: "pi_ub", customer: "c")
            let header = TimestampedSignature.header(body: payload, timestamp: now / 1000, secrets: [Self.secret])
            #expect(try await k.request("POST", "/v1/webhooks/stripe/\(TestAppStore.bundleId)", body: payload,
                                        headers: ["Stripe-Signature": header]).json["outcome"] == "applied")
            // b spends 40 of its web coins.
            #expect(try await k.spend("b", key: "s1", amount: 40).status == 201)

            let asOf = String(Timestamp.rfc3339(now + 9 * 3_600_000).prefix(10))  // the day in Tokyo
            let database = "sqlite:" + k.directory.appendingPathComponent("kakin.db").path
            let printed = try await KakinServerTests.UnusedBalanceReport.command(["unused-balance", "--as-of", asOf, "--database", database])
            #expect(printed.status == 0, "\(printed.errors)")
            let totals = try JSONParser.parse(printed.output)["totals"]
            let app = JSONValue.string(TestAppStore.bundleId)
            #expect(totals == [
                ["bundleId": app, "currency": "JPY", "unusedPaidCoins": 500, "value": 600, "customers": 1, "source": "appStore"],
                ["bundleId": app, "currency": "JPY", "unusedPaidCoins": 100, "value": 120, "customers": 1, "source": "stripe"],
                ["bundleId": app, "currency": "JPY", "unusedPaidCoins": 60, "value": 72, "customers": 1, "source": "web"],
            ])
            let csv = try await KakinServerTests.UnusedBalanceReport.command(["unused-balance", "--as-of", asOf, "--format", "csv", "--database", database])
            #expect(csv.output == """
                bundleId,currency,customerId,unusedPaidCoins,value,source
                \(TestAppStore.bundleId),JPY,a,500,600,appStore
                \(TestAppStore.bundleId),JPY,b,60,72,web
                \(TestAppStore.bundleId),JPY,c,100,120,stripe

                """)
        }
    }
}
