import KakinCore

/// Money taken outside the App Store, as a provider reported it: a one-time purchase or one paid (or trial)
/// subscription period. `input` is the generic source's input, so a Stripe purchase takes the same path as one
/// the team's backend posts.
public struct ExternalPurchaseFact: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable {
        case oneTime
        case subscriptionPeriod
    }

    public var kind: Kind
    /// `provider` "stripe"; `externalId` the PaymentIntent (`pi_…`) of a Checkout payment, the Invoice (`in_…`) of a
    /// subscription period; price in minor units; `purchasedAt` when paid; `expiresAt` the period's end.
    public var input: ExternalPurchaseInput
    /// nil when the event did not carry the metadata (subscription events: the subscription's earlier events may).
    public var customerId: String?
    public var subscriptionId: String?
    public var checkoutSessionId: String?
    public var paymentIntentId: String?
    public var invoiceId: String?
    /// The period the payment covers (subscription periods).
    public var periodStartMs: Int64?
}

/// A refund as the provider reports it: Stripe's `charge.refunded` carries the charge's cumulative
/// `amount_refunded`, so applying it is "the refunded total is now X" (`ExternalRefundPlan.reportedTotal`).
public struct ExternalRefundFact: Sendable, Hashable {
    public var provider: String
    public var chargeId: String
    /// Find the purchase by these, in this order: the invoice (subscription periods), the PaymentIntent
    /// (Checkout payments). Newer Stripe API versions leave `invoice` off charges.
    public var invoiceId: String?
    public var paymentIntentId: String?
    /// Minor units charged and refunded so far (cumulative), in `currency`.
    public var amountCharged: Int64
    public var amountRefunded: Int64
    public var currency: CurrencyCode
    public var fullyRefunded: Bool
    /// From the charge's metadata when the team put it there (not needed to find the purchase).
    public var customerId: String?
    public var refundedAtMs: Int64
}

/// What one Stripe event means for Kakin, decided without storage: a purchase, a subscription's state, a refund —
/// or nothing (an event type Kakin does not handle, an unpaid session). Where each event's metadata is read:
///
/// | event | object | customer / product from |
/// |---|---|---|
/// | `checkout.session.completed` (payment) | Checkout Session | the session's `metadata` (required) |
/// | `checkout.session.completed` (subscription) | Checkout Session | the session's `metadata` (optional: links the subscription to the customer) |
/// | `invoice.paid` | Invoice | `parent.subscription_details.metadata` (API 2025-03-31+), else `subscription_details.metadata`, else the first line's `metadata` — Stripe's snapshot of the subscription's metadata |
/// | `customer.subscription.created/updated/deleted` | Subscription | the subscription's `metadata` |
/// | `charge.refunded` | Charge | not needed (the purchase is found by invoice or PaymentIntent); `metadata` if present |
///
/// A team creating Checkout Sessions sets the keys in `metadata` (payment mode) and in
/// `subscription_data.metadata` (subscription mode: Stripe copies those onto the subscription and its invoices).
public struct StripeEventFacts: Sendable, Hashable {
    public static let provider = "stripe"
    /// The event types Kakin acts on.
    public static let handledTypes: Set<String> = [
        "checkout.session.completed", "invoice.paid", "customer.subscription.created", "customer.subscription.updated",
        "customer.subscription.deleted", "charge.refunded",
    ]

    public var eventId: String
    public var eventType: String
    public var createdSeconds: Int64
    /// false for test-mode events.
    public var livemode: Bool
    public var purchase: ExternalPurchaseFact?
    public var subscription: ExternalSubscriptionObservation?
    public var refund: ExternalRefundFact?
    /// Why the event changes nothing (nil when it carries a fact).
    public var ignoredReason: String?

    /// - Throws: KKN-3058 for an object not of the documented shape, KKN-3059 when a payment-mode session lacks
    ///   the metadata keys. Unhandled event types are not errors: they come back with `ignoredReason`.
    public init(event: StripeEvent, configuration: StripeWebhookConfiguration, nowMs: Int64) throws(KakinError) {
        eventId = event.id
        eventType = event.type
        createdSeconds = event.createdSeconds
        livemode = event.livemode
        let keys = MetadataKeys(customer: configuration.customerIdMetadataKey, product: configuration.productIdMetadataKey)
        switch event.type {
        case "checkout.session.completed":
            try readCheckoutSession(event, keys: keys, nowMs: nowMs)
        case "invoice.paid":
            try readInvoice(event, keys: keys, nowMs: nowMs)
        case "customer.subscription.created", "customer.subscription.updated", "customer.subscription.deleted":
            try readSubscription(event, keys: keys)
        case "charge.refunded":
            try readCharge(event, keys: keys)
        default:
            ignoredReason = "Kakin does not act on \(event.type) events."
        }
        precondition(ignoredReason == nil || (purchase == nil && subscription == nil && refund == nil), "an ignored event carries no fact")
    }

    struct MetadataKeys {
        var customer: String
        var product: String

        func read(_ metadata: [String: String]) -> (customer: String?, product: String?) {
            (metadata[customer].flatMap(Self.valid), metadata[product].flatMap(Self.valid))
        }

        static func valid(_ s: String) -> String? { s.isEmpty || s.utf8.count > 255 ? nil : s }
    }

    var createdMs: Int64 { createdSeconds * 1000 }

    // MARK: checkout.session.completed

    mutating func readCheckoutSession(_ event: StripeEvent, keys: MetadataKeys, nowMs: Int64) throws(KakinError) {
        let s = try StripeObject(event.object, name: "Checkout Session", expected: "checkout.session")
        let sessionId = try s.id(prefix: "cs_")
        let mode = try s.requiredString("mode")
        let paymentStatus = try s.requiredString("payment_status")
        let (customer, product) = keys.read(StripeObject.metadata(s.json["metadata"]))
        switch mode {
        case "payment":
            guard paymentStatus == "paid" else {
                ignoredReason = "The Checkout Session is \(paymentStatus); an asynchronous payment is not handled until it is paid."
                return
            }
            guard let customer, let product else {
                throw KakinError(.stripeMetadataMissing,
                                 "The Checkout Session's metadata lacks \(customer == nil ? keys.customer : keys.product) (set it in metadata when creating the session).")
            }
            let paymentIntent = try s.reference("payment_intent", prefix: "pi_")
            let amount = try s.requiredInt("amount_total")
            let input = try Self.input(externalId: paymentIntent ?? sessionId, productId: product, price: amount,
                                       currency: try s.currency(), purchasedAtMs: createdMs, expiresAtMs: nil, nowMs: nowMs)
            purchase = ExternalPurchaseFact(kind: .oneTime, input: input, customerId: customer, subscriptionId: nil,
                                            checkoutSessionId: sessionId, paymentIntentId: paymentIntent, invoiceId: nil, periodStartMs: nil)
        case "subscription":
            guard let subscriptionId = try s.reference("subscription", prefix: "sub_") else {
                throw s.fail("subscription", "is missing in subscription mode")
            }
            // The money and the period come with the first invoice's invoice.paid; the session ties the
            // subscription to the customer and product named in its metadata.
            let paid = paymentStatus == "paid" || paymentStatus == "no_payment_required"
            subscription = ExternalSubscriptionObservation(
                provider: Self.provider, subscriptionId: subscriptionId, customerId: customer, productId: product,
                status: paid ? .active : .incomplete, observedAtSeconds: event.createdSeconds, eventId: event.id)
        default:
            ignoredReason = "A Checkout Session in \(mode) mode takes no payment."
        }
    }

    // MARK: invoice.paid

    mutating func readInvoice(_ event: StripeEvent, keys: MetadataKeys, nowMs: Int64) throws(KakinError) {
        let inv = try StripeObject(event.object, name: "Invoice", expected: "invoice")
        let invoiceId = try inv.id(prefix: "in_")
        let details = inv.json["parent"]?["subscription_details"]
        let subscriptionRef = details?["subscription"] ?? inv.json["subscription"]
        guard let subscriptionId = try inv.reference(subscriptionRef, prefix: "sub_", field: "subscription") else {
            ignoredReason = "The invoice belongs to no subscription."
            return
        }
        let lines = StripeObject.listData(inv.json["lines"])
        var metadata = StripeObject.metadata(details?["metadata"] ?? inv.json["subscription_details"]?["metadata"])
        if keys.read(metadata).customer == nil, let line = lines.first(where: { keys.read(StripeObject.metadata($0["metadata"])).customer != nil }) {
            metadata = StripeObject.metadata(line["metadata"])
        }
        let (customer, product) = keys.read(metadata)
        // The period paid: the latest line period (a proration line covers part of it).
        var start: Int64?
        var end: Int64?
        for (i, line) in lines.enumerated() {
            let fail = { (f: String, w: String) in KakinError(.stripeEventInvalid, "The Invoice's lines[\(i)].\(f) \(w).") }
            guard let s = try StripeObject.int(line["period"]?["start"], field: "period.start", fail: fail),
                  let e = try StripeObject.int(line["period"]?["end"], field: "period.end", fail: fail) else { continue }
            if end == nil || e > end! || (e == end! && s < start!) {
                start = s
                end = e
            }
        }
        guard let start, let end, end > start else { throw inv.fail("lines", "carry no subscription period") }
        let paidAt = (try StripeObject.int(inv.json["status_transitions"]?["paid_at"], field: "status_transitions.paid_at", fail: inv.fail)) ?? event.createdSeconds
        var paymentIntent = try inv.reference("payment_intent", prefix: "pi_")
        if paymentIntent == nil {
            for payment in StripeObject.listData(inv.json["payments"], max: 10) {
                if let pi = try inv.reference(payment["payment"]?["payment_intent"], prefix: "pi_", field: "payments.payment.payment_intent") {
                    paymentIntent = pi
                    break
                }
            }
        }
        if let product {
            let input = try Self.input(externalId: invoiceId, productId: product, price: try inv.requiredInt("amount_paid"),
                                       currency: try inv.currency(), purchasedAtMs: paidAt * 1000, expiresAtMs: end * 1000, nowMs: nowMs)
            purchase = ExternalPurchaseFact(kind: .subscriptionPeriod, input: input, customerId: customer, subscriptionId: subscriptionId,
                                            checkoutSessionId: nil, paymentIntentId: paymentIntent, invoiceId: invoiceId,
                                            periodStartMs: start * 1000)
        }
        subscription = ExternalSubscriptionObservation(
            provider: Self.provider, subscriptionId: subscriptionId, customerId: customer, productId: product, status: .active,
            currentPeriodStartMs: start * 1000, currentPeriodEndMs: end * 1000, observedAtSeconds: event.createdSeconds, eventId: event.id)
    }

    // MARK: customer.subscription.*

    mutating func readSubscription(_ event: StripeEvent, keys: MetadataKeys) throws(KakinError) {
        let sub = try StripeObject(event.object, name: "Subscription", expected: "subscription")
        let id = try sub.id(prefix: "sub_")
        let status = ExternalSubscriptionStatus(rawValue: try sub.requiredString("status"))
        // API 2025-03-31 moved the period onto the items; older versions keep it on the subscription.
        var start = try sub.int("current_period_start")
        var end = try sub.int("current_period_end")
        for (i, item) in StripeObject.listData(sub.json["items"]).enumerated() {
            let fail = { (f: String, w: String) in KakinError(.stripeEventInvalid, "The Subscription's items[\(i)].\(f) \(w).") }
            if let e = try StripeObject.int(item["current_period_end"], field: "current_period_end", fail: fail), e > (end ?? 0) {
                end = e
                start = try StripeObject.int(item["current_period_start"], field: "current_period_start", fail: fail) ?? start
            }
        }
        let (customer, product) = keys.read(StripeObject.metadata(sub.json["metadata"]))
        var endedAt = try sub.int("ended_at")
        if event.type == "customer.subscription.deleted", endedAt == nil { endedAt = try sub.int("canceled_at") ?? event.createdSeconds }
        subscription = ExternalSubscriptionObservation(
            provider: Self.provider, subscriptionId: id, customerId: customer, productId: product, status: status,
            currentPeriodStartMs: start.map { $0 * 1000 }, currentPeriodEndMs: end.map { $0 * 1000 },
            cancelAtPeriodEnd: try sub.bool("cancel_at_period_end") ?? false, endedAtMs: endedAt.map { $0 * 1000 },
            observedAtSeconds: event.createdSeconds, eventId: event.id)
    }

    // MARK: charge.refunded

    mutating func readCharge(_ event: StripeEvent, keys: MetadataKeys) throws(KakinError) {
        let ch = try StripeObject(event.object, name: "Charge", expected: "charge")
        let id = try ch.id(prefix: "ch_")
        let amount = try ch.requiredInt("amount")
        let refunded = try ch.requiredInt("amount_refunded")
        guard refunded <= amount else { throw ch.fail("amount_refunded", "exceeds amount") }
        let invoice = try ch.reference("invoice", prefix: "in_")
        let paymentIntent = try ch.reference("payment_intent", prefix: "pi_")
        guard invoice != nil || paymentIntent != nil else {
            ignoredReason = "The charge names neither an invoice nor a PaymentIntent, so it is no purchase Kakin recorded."
            return
        }
        refund = ExternalRefundFact(
            provider: Self.provider, chargeId: id, invoiceId: invoice, paymentIntentId: paymentIntent, amountCharged: amount,
            amountRefunded: refunded, currency: try ch.currency(), fullyRefunded: try ch.bool("refunded") ?? (refunded == amount),
            customerId: keys.read(StripeObject.metadata(ch.json["metadata"])).customer, refundedAtMs: createdMs)
    }

    static func input(externalId: String, productId: String, price: Int64, currency: CurrencyCode, purchasedAtMs: Int64,
                      expiresAtMs: Int64?, nowMs: Int64) throws(KakinError) -> ExternalPurchaseInput {
        var o: [String: JSONValue] = [
            "provider": .string(provider), "externalId": .string(externalId), "productId": .string(productId), "price": .int(price),
            "currency": .string(currency.code), "purchasedAt": .string(Timestamp.rfc3339(purchasedAtMs)),
        ]
        if let expiresAtMs { o["expiresAt"] = .string(Timestamp.rfc3339(expiresAtMs)) }
        do {
            return try ExternalPurchaseInput(json: .object(o), nowMs: nowMs)
        } catch {
            throw KakinError(.stripeEventInvalid, "The event's purchase is out of Kakin's limits: \(error.message)")
        }
    }
}
