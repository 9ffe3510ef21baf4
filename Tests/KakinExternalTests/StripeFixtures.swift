import Foundation
import KakinCore
@testable import KakinExternal

/// Stripe-shaped test events, field for field as Stripe's API reference documents the Event, Checkout Session,
/// Invoice, Subscription and Charge objects (trimmed to what a webhook carries; unread fields kept so the
/// parser is shown to ignore them).
enum StripeFixtures {
    static let customerKey = "kakin_customer_id"
    static let productKey = "kakin_product_id"
    static let secret = "whsec_test_5f0c1e8b7a2d4c6e9f1a3b5c7d9e0f12"
    static let basil = "2025-03-31.basil"
    static let acacia = "2024-06-20"

    static var configuration: StripeWebhookConfiguration {
        StripeWebhookConfiguration(webhookSecretEnv: "KAKIN_STRIPE_SECRET", secrets: [Array(secret.utf8)])
    }

    static func event(_ type: String, id: String, created: Int64, object: JSONValue, apiVersion: String = basil,
                      previous: JSONValue? = nil) -> JSONValue {
        var data: [String: JSONValue] = ["object": object]
        if let previous { data["previous_attributes"] = previous }
        return [
            "id": .string(id), "object": "event", "api_version": .string(apiVersion), "created": .int(created),
            "data": .object(data), "livemode": false, "pending_webhooks": 1,
            "request": ["id": .null, "idempotency_key": .null], "type": .string(type),
        ]
    }

    static func metadata(customer: String?, product: String?) -> JSONValue {
        var o: [String: JSONValue] = [:]
        if let customer { o[customerKey] = .string(customer) }
        if let product { o[productKey] = .string(product) }
        return .object(o)
    }

    static func checkoutSessionPayment(id: String = "cs_test_a1b2c3", paymentIntent: String = "pi_3PabcDEF", amount: Int64 = 120,
                                       currency: String = "jpy", customer: String? = "u1", product: String? = "coins.100",
                                       paymentStatus: String = "paid", created: Int64 = 1_780_000_000) -> JSONValue {
        [
            "id": .string(id), "object": "checkout.session", "amount_subtotal": .int(amount), "amount_total": .int(amount),
            "client_reference_id": .null, "created": .int(created - 30), "currency": .string(currency), "customer": "cus_QxYz123",
            "livemode": false, "metadata": metadata(customer: customer, product: product), "mode": "payment",
            "payment_intent": .string(paymentIntent), "payment_status": .string(paymentStatus), "status": "complete",
            "subscription": .null, "invoice": .null, "success_url": "https://example.com/ok",
            "total_details": ["amount_discount": 0, "amount_shipping": 0, "amount_tax": 0],
        ]
    }

    static func checkoutSessionSubscription(id: String = "cs_test_sub1", subscription: String = "sub_1PqR", invoice: String = "in_1First",
                                            customer: String? = "u1", product: String? = "premium.monthly", created: Int64) -> JSONValue {
        [
            "id": .string(id), "object": "checkout.session", "amount_subtotal": 980, "amount_total": 980, "created": .int(created - 20),
            "currency": "jpy", "customer": "cus_QxYz123", "livemode": false, "metadata": metadata(customer: customer, product: product),
            "mode": "subscription", "payment_intent": .null, "payment_status": "paid", "status": "complete",
            "subscription": .string(subscription), "invoice": .string(invoice),
        ]
    }

    /// An Invoice of a subscription period. `basilShape`: API 2025-03-31 (`parent.subscription_details`, line
    /// `parent`); otherwise the older top-level `subscription` and `subscription_details`.
    static func invoice(id: String, subscription: String = "sub_1PqR", amountPaid: Int64 = 980, periodStart: Int64, periodEnd: Int64,
                        billingReason: String = "subscription_cycle", customer: String? = "u1", product: String? = "premium.monthly",
                        basilShape: Bool = true, paymentIntent: String? = nil) -> JSONValue {
        let md = metadata(customer: customer, product: product)
        var line: [String: JSONValue] = [
            "id": .string("il_" + id.dropFirst(3)), "object": "line_item", "amount": .int(amountPaid), "currency": "jpy",
            "description": "1 × Premium (at ¥980 / month)", "metadata": md,
            "period": ["start": .int(periodStart), "end": .int(periodEnd)], "quantity": 1,
        ]
        var o: [String: JSONValue] = [
            "id": .string(id), "object": "invoice", "amount_due": .int(amountPaid), "amount_paid": .int(amountPaid), "amount_remaining": 0,
            "billing_reason": .string(billingReason), "created": .int(periodStart), "currency": "jpy", "customer": "cus_QxYz123",
            "livemode": false, "metadata": [:], "paid": true, "status": "paid",
            "period_start": .int(periodStart - 2_592_000), "period_end": .int(periodStart),
            "status_transitions": ["finalized_at": .int(periodStart), "paid_at": .int(periodStart + 5)],
        ]
        if basilShape {
            line["parent"] = ["type": "subscription_item_details",
                              "subscription_item_details": ["subscription": .string(subscription), "subscription_item": "si_Abc"]]
            o["parent"] = ["type": "subscription_details",
                           "subscription_details": ["metadata": md, "subscription": .string(subscription)]]
        } else {
            line["type"] = "subscription"
            line["subscription"] = .string(subscription)
            o["subscription"] = .string(subscription)
            o["subscription_details"] = ["metadata": md]
            o["payment_intent"] = paymentIntent.map(JSONValue.string) ?? .null
        }
        o["lines"] = ["object": "list", "data": [.object(line)], "has_more": false, "total_count": 1, "url": "/v1/invoices/x/lines"]
        return .object(o)
    }

    static func subscription(id: String = "sub_1PqR", status: String, periodStart: Int64, periodEnd: Int64, cancelAtPeriodEnd: Bool = false,
                             canceledAt: Int64? = nil, endedAt: Int64? = nil, customer: String? = "u1", product: String? = "premium.monthly",
                             basilShape: Bool = true) -> JSONValue {
        var item: [String: JSONValue] = [
            "id": "si_Abc", "object": "subscription_item", "quantity": 1,
            "price": ["id": "price_1Monthly", "object": "price", "currency": "jpy", "unit_amount": 980,
                      "recurring": ["interval": "month", "interval_count": 1]],
        ]
        var o: [String: JSONValue] = [
            "id": .string(id), "object": "subscription", "cancel_at": cancelAtPeriodEnd ? .int(periodEnd) : .null,
            "cancel_at_period_end": .bool(cancelAtPeriodEnd), "canceled_at": canceledAt.map(JSONValue.int) ?? .null,
            "created": .int(periodStart), "currency": "jpy", "customer": "cus_QxYz123",
            "ended_at": endedAt.map(JSONValue.int) ?? .null, "latest_invoice": "in_x", "livemode": false,
            "metadata": metadata(customer: customer, product: product), "start_date": .int(periodStart), "status": .string(status),
        ]
        if basilShape {
            item["current_period_start"] = .int(periodStart)
            item["current_period_end"] = .int(periodEnd)
        } else {
            o["current_period_start"] = .int(periodStart)
            o["current_period_end"] = .int(periodEnd)
        }
        o["items"] = ["object": "list", "data": [.object(item)], "has_more": false, "total_count": 1]
        return .object(o)
    }

    static func charge(id: String = "ch_3PabcDEF", amount: Int64 = 120, refunded amountRefunded: Int64, paymentIntent: String? = "pi_3PabcDEF",
                       invoice: String? = nil) -> JSONValue {
        [
            "id": .string(id), "object": "charge", "amount": .int(amount), "amount_captured": .int(amount),
            "amount_refunded": .int(amountRefunded), "captured": true, "created": 1_780_000_000, "currency": "jpy",
            "customer": "cus_QxYz123", "invoice": invoice.map(JSONValue.string) ?? .null, "livemode": false, "metadata": [:],
            "paid": true, "payment_intent": paymentIntent.map(JSONValue.string) ?? .null, "refunded": .bool(amountRefunded == amount),
            "status": "succeeded",
        ]
    }

    static func facts(_ event: JSONValue, nowMs: Int64 = 1_800_000_000_000) throws -> StripeEventFacts {
        try StripeEventFacts(event: try StripeEvent(body: event.serialized()), configuration: configuration, nowMs: nowMs)
    }
}
