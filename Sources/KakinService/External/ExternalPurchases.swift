import KakinCore
import KakinEvents
import KakinExternal
import KakinStorage

/// The answer of the generic source (`POST /v1/customers/{id}/external-purchases`, its refund): the contract's
/// `{"purchase", "grant"?, "customer"}`.
public struct ExternalPurchaseAnswer: Sendable {
    /// 201 first time, 409 for a known `provider` + `externalId`, 200 for a refund.
    public var status: Int
    public var purchase: JSONValue
    public var grant: JSONValue?
    public var customer: EvaluatedCustomer

    public var json: JSONValue {
        var o: [String: JSONValue] = ["purchase": purchase, "customer": customer.json]
        if let grant, !grant.isNull { o["grant"] = grant }
        return .object(o)
    }
}

/// What a Stripe webhook did: `applied`, `duplicate` (its event id was applied before) or `ignored` (with why).
public struct StripeWebhookAnswer: Sendable, Hashable {
    public var eventId: String
    public var outcome: String
    public var reason: String?

    public var json: JSONValue {
        var o: [String: JSONValue] = ["received": true, "eventId": .string(eventId), "outcome": .string(outcome)]
        if let reason { o["reason"] = .string(reason) }
        return .object(o)
    }
}

/// Purchases outside the App Store, as one more source into the same wallet, ledger, status and events: the generic
/// source (the team's backend reports a purchase it took through any provider, and its refunds), Stripe's webhooks
/// directly, and Apple's external purchase tokens (recorded with the customer; `ExternalPurchaseReporter` reports
/// them). Each request is verified and parsed first (KakinExternal's pure readers), then applied in ONE write that
/// credits coins exactly once (unique by `provider` + `externalId`, and by the provider's event id), refreshes the
/// entitlement the status engine merges with the App Store's, and records the customer's events.
public struct ExternalPurchases: Sendable {
    let store: any PurchaseRepository
    let apps: [String: AppSettings]
    let walletPolicy: WalletPolicy
    let events: CustomerEvents
    let statusReads: CustomerStatusReads
    /// The business clock (the simulator's in local mode).
    let clock: any Clock
    let metrics: Metrics
    let logger: Logger
    /// Reports Apple's external purchase tokens (woken when a token owes a report).
    public let reporter: ExternalPurchaseReporter

    var rules: ExternalWrite { ExternalWrite(apps: apps, walletPolicy: walletPolicy) }

    // MARK: The generic source

    /// `POST /v1/customers/{id}/external-purchases`: 201 the first time, 409 `already_processed` with the same fields
    /// for a known `provider` + `externalId` (whatever the `Idempotency-Key`).
    public func record(customerId: String, body: JSONValue) async throws(KakinError) -> ExternalPurchaseAnswer {
        let input = try ExternalPurchaseInput(json: body, nowMs: clock.nowMs())
        guard let app = apps.values.sorted(by: { $0.bundleId < $1.bundleId }).first(where: { $0.catalog[input.productId] != nil }),
              let product = app.catalog[input.productId] else {
            throw KakinError(.unknownProduct, "Product \(input.productId) is not in this server's catalog.")
        }
        switch product.kind {
        case .autoRenewable where input.expiresAtMs == nil:
            throw KakinError(.externalPurchaseInvalid, "expiresAt is required for a subscription period (the end of the period paid).")
        case .consumable where input.expiresAtMs != nil, .nonConsumable where input.expiresAtMs != nil:
            throw KakinError(.externalPurchaseInvalid, "expiresAt is only for subscription periods and passes.")
        default: break
        }
        if let token = input.externalPurchaseToken {
            try check(token, app: app)
            try token.checkActive(atMs: input.purchasedAtMs)
        }
        let rules = rules, events = events
        let (row, outcome, appended) = try await store.transaction { r in
            var facts = ExternalFacts()
            if let existing = try r.externalPurchase(provider: input.provider, externalId: input.externalId) {
                guard existing.customerId == customerId else {
                    throw KakinError(.belongsToAnotherCustomer, detail: "\(input.provider) \(input.externalId) was reported for another customer")
                }
                return (existing, 409, 0)
            }
            var row = Self.row(input, customerId: customerId, bundleId: app.bundleId, subscriptionId: nil, periodStartMs: nil, nowMs: r.nowMs)
            if product.kind == .autoRenewable {
                // The generic source names no subscription: its periods of one product chain from the first (like
                // Apple's original transaction).
                row.subscriptionId = try r.externalPurchases(customerId: customerId, limit: Records.externalRowsMax)
                    .last { $0.provider == input.provider && $0.productId == input.productId && $0.subscriptionId != nil }?.subscriptionId
                    ?? input.externalId
            }
            guard try r.insertExternalPurchase(row) else {
                // Reported at the same moment by another request (the unique key decided): the same 409.
                guard let existing = try r.externalPurchase(provider: input.provider, externalId: input.externalId),
                      existing.customerId == customerId else { throw KakinError(.belongsToAnotherCustomer) }
                return (existing, 409, 0)
            }
            try rules.attachToken(r, &row, named: input.externalPurchaseToken)
            try rules.apply(r, &row, product: product, facts: &facts)
            return (row, 201, try events.record(r, facts, bundleId: app.bundleId))
        }
        metrics.increment(outcome == 201 ? .purchasesApplied : .purchasesDuplicate)
        if appended > 0 { events.wake() }
        if row.externalPurchaseId != nil { reporter.worker.wake() }
        return ExternalPurchaseAnswer(status: outcome, purchase: Self.purchaseJSON(row), grant: row.grant, customer: try await statusReads.status(customerId))
    }

    /// `POST /v1/customers/{id}/external-purchases/{provider}/{externalId}/refund {"amount"?}` → 200: a partial refund
    /// in minor units, or (no amount) whatever remains; more than remains is refused with nothing changed.
    public func refund(customerId: String, provider: String, externalId: String, body: [UInt8]) async throws(KakinError) -> ExternalPurchaseAnswer {
        guard ExternalPurchaseInput.isProvider(provider), ExternalPurchaseInput.isExternalId(externalId) else {
            throw KakinError(.externalPurchaseNotFound)
        }
        let request = try ExternalRefundInput(body: body)
        let rules = rules, events = events
        let (row, appended) = try await store.transaction { r in
            guard var row = try r.externalPurchase(provider: provider, externalId: externalId), row.customerId == customerId else {
                throw KakinError(.externalPurchaseNotFound)
            }
            let plan = try ExternalRefundPlan.requested(request.amount, price: row.price, refundedSoFar: row.refundedTotal,
                                                        coins: ExternalWrite.creditedPaid(row))
            var facts = ExternalFacts()
            try rules.refund(r, &row, plan: plan, refundedAtMs: r.nowMs, facts: &facts)
            return (row, try events.record(r, facts, bundleId: row.bundleId))
        }
        if appended > 0 { events.wake() }
        if row.externalPurchaseId != nil { reporter.worker.wake() }
        return ExternalPurchaseAnswer(status: 200, purchase: Self.purchaseJSON(row), grant: row.grant, customer: try await statusReads.status(customerId))
    }

    // MARK: Stripe

    /// `POST /v1/webhooks/stripe/{bundleId}`: the `Stripe-Signature` header checked on the raw body, the event read,
    /// then applied once (by event id) in one write. Events Kakin does not act on answer 200 (`ignored`), so Stripe
    /// stops retrying them; a refund of a purchase not recorded yet answers 404, so Stripe retries it later.
    public func stripeWebhook(bundleId: String, signatureHeader: String?, body: [UInt8]) async throws(KakinError) -> StripeWebhookAnswer {
        guard let app = apps[bundleId], let configuration = app.external.stripe else { throw KakinError(.stripeNotConfigured) }
        _ = try StripeWebhookVerifier(configuration: configuration).verify(signatureHeader: signatureHeader, body: body, nowSeconds: clock.nowMs() / 1000)
        let event = try StripeEvent(body: body)
        let facts = try StripeEventFacts(event: event, configuration: configuration, nowMs: clock.nowMs())
        if let reason = facts.ignoredReason { return StripeWebhookAnswer(eventId: facts.eventId, outcome: "ignored", reason: reason) }
        if !facts.livemode, !app.environments.contains(.sandbox) {
            return StripeWebhookAnswer(eventId: facts.eventId, outcome: "ignored", reason: "A test-mode event, and this app does not accept Sandbox.")
        }
        for customer in [facts.purchase?.customerId, facts.subscription?.customerId, facts.refund?.customerId].compactMap({ $0 })
        where !CustomerID.isValid(customer) {
            throw KakinError(.stripeEventInvalid, "The metadata's customer ID is not 1 to 128 characters of A-Z a-z 0-9 . _ : @ -.")
        }
        let rules = rules, events = events
        let (outcome, tokens, appended) = try await store.transaction { r in
            guard try r.claimExternalEvent(provider: StripeEventFacts.provider, eventId: facts.eventId, bundleId: bundleId,
                                           eventType: facts.eventType, outcome: "applied") else { return ("duplicate", false, 0) }
            var fx = ExternalFacts()
            var tokens = false
            if let observation = facts.subscription {
                try Self.observe(r, observation, bundleId: bundleId, rules: rules, facts: &fx, tokens: &tokens)
            }
            if let purchase = facts.purchase {
                try Self.purchase(r, purchase, bundleId: bundleId, rules: rules, facts: &fx, tokens: &tokens)
            }
            if let refund = facts.refund {
                // By invoice (older API versions), else by PaymentIntent: a Checkout payment's own id, or an invoice's payment.
                guard var row = try refund.invoiceId.flatMap({ try r.externalPurchase(provider: refund.provider, externalId: $0) })
                        ?? refund.paymentIntentId.flatMap({ try r.externalPurchase(provider: refund.provider, externalId: $0) })
                        ?? refund.paymentIntentId.flatMap({ try r.externalPurchase(provider: refund.provider, paymentRef: $0) }) else {
                    throw KakinError(.externalPurchaseNotFound, detail: "charge \(refund.chargeId) refunds no recorded purchase (yet)")
                }
                let plan = ExternalRefundPlan.reportedTotal(min(refund.amountRefunded, row.price), price: row.price, refundedSoFar: row.refundedTotal,
                                                            coins: ExternalWrite.creditedPaid(row))
                try rules.refund(r, &row, plan: plan, refundedAtMs: refund.refundedAtMs, facts: &fx)
                tokens = tokens || row.externalPurchaseId != nil
            }
            try r.recordTimeline(customerId: fx.customers.first, kind: "stripe.event", reference: facts.eventId,
                                 detail: ["type": .string(facts.eventType), "bundleId": .string(bundleId)])
            return ("applied", tokens, try events.record(r, fx, bundleId: bundleId))
        }
        if appended > 0 { events.wake() }
        if tokens { reporter.worker.wake() }
        return StripeWebhookAnswer(eventId: facts.eventId, outcome: outcome, reason: nil)
    }

    /// One observation of a Stripe subscription: kept, merged with the others, and the subscription's periods that were
    /// waiting for its customer or product applied.
    static func observe(_ r: Records, _ o: ExternalSubscriptionObservation, bundleId: String, rules: ExternalWrite,
                        facts: inout ExternalFacts, tokens: inout Bool) throws {
        try r.addSubscriptionObservation(provider: o.provider, subscriptionId: o.subscriptionId, eventId: o.eventId, observation: o.json)
        let state = ExternalSubscriptionState.merge(
            try r.subscriptionObservations(provider: o.provider, subscriptionId: o.subscriptionId).compactMap(ExternalSubscriptionObservation.init(json:)))
        var row = try r.externalSubscription(provider: o.provider, subscriptionId: o.subscriptionId)
            ?? ExternalSubscriptionRow(provider: o.provider, subscriptionId: o.subscriptionId, bundleId: bundleId, customerId: nil, productId: nil, state: .null)
        // The first customer named keeps the subscription (metadata never moves it to another).
        row.customerId = row.customerId ?? state?.customerId
        row.productId = state?.productId ?? row.productId
        row.state = state?.json ?? .null
        try r.storeExternalSubscription(row)
        for var period in try r.externalPurchases(provider: o.provider, subscriptionId: o.subscriptionId) where !period.applied {
            period.customerId = period.customerId ?? row.customerId
            period.productId = period.productId ?? row.productId
            guard period.customerId != nil, let product = rules.product(period.bundleId, period.productId) else { continue }
            try rules.apply(r, &period, product: product, facts: &facts)
            tokens = tokens || period.externalPurchaseId != nil
        }
        try rules.refreshSubscription(r, provider: o.provider, subscriptionId: o.subscriptionId, bundleId: row.bundleId, facts: &facts)
    }

    /// A purchase Stripe reported: recorded once by its id; applied now if its customer and product are known,
    /// else when an observation of its subscription names them.
    static func purchase(_ r: Records, _ fact: ExternalPurchaseFact, bundleId: String, rules: ExternalWrite,
                         facts: inout ExternalFacts, tokens: inout Bool) throws {
        let input = fact.input
        guard try r.externalPurchase(provider: input.provider, externalId: input.externalId) == nil else { return }
        let subscription = try fact.subscriptionId.flatMap { try r.externalSubscription(provider: input.provider, subscriptionId: $0) }
        var row = row(input, customerId: fact.customerId ?? subscription?.customerId, bundleId: bundleId, subscriptionId: fact.subscriptionId,
                      periodStartMs: fact.periodStartMs, nowMs: r.nowMs)
        if let pi = fact.paymentIntentId, pi != input.externalId { row.paymentRef = pi }
        guard try r.insertExternalPurchase(row) else { return }
        guard row.customerId != nil, let product = rules.product(bundleId, row.productId) else { return }
        try rules.apply(r, &row, product: product, facts: &facts)
        tokens = tokens || row.externalPurchaseId != nil
        if let sub = fact.subscriptionId {
            try rules.refreshSubscription(r, provider: input.provider, subscriptionId: sub, bundleId: bundleId, facts: &facts)
        }
    }

    static func row(_ input: ExternalPurchaseInput, customerId: String?, bundleId: String, subscriptionId: String?, periodStartMs: Int64?,
                    nowMs: Int64) -> ExternalPurchaseRow {
        ExternalPurchaseRow(provider: input.provider, externalId: input.externalId, customerId: customerId, bundleId: bundleId,
                            productId: input.productId, productKind: nil, price: input.price, currency: input.currency.code,
                            purchasedAtMs: input.purchasedAtMs, expiresAtMs: input.expiresAtMs, periodStartMs: periodStartMs,
                            subscriptionId: subscriptionId, externalPurchaseId: nil, applied: false, createdAtMs: nowMs)
    }

    /// The contract's `purchase`.
    static func purchaseJSON(_ row: ExternalPurchaseRow) -> JSONValue {
        var o: [String: JSONValue] = [
            "provider": .string(row.provider), "externalId": .string(row.externalId), "productId": .string(row.productId),
            "price": .int(row.price), "currency": .string(row.currency), "purchasedAt": .string(Timestamp.rfc3339(row.purchasedAtMs)),
            "source": .string(row.provider), "refundedAmount": .int(row.refundedTotal),
        ]
        if let e = row.expiresAtMs { o["expiresAt"] = .string(Timestamp.rfc3339(e)) }
        if let s = row.subscriptionId { o["subscriptionId"] = .string(s) }
        if let t = row.externalPurchaseId { o["externalPurchaseId"] = .string(t) }
        return .object(o)
    }

    // MARK: Apple's external purchase tokens

    /// `POST /v1/customers/{id}/external-purchase-tokens {"token"}` → 201 `{"externalPurchaseId", "tokenType"?,
    /// "reportStatus"}`: the token checked against the app and recorded with the customer (once; a token recorded for
    /// another customer stays theirs). A token that leads to no purchase is reported NO_LINE_ITEM before Apple's deadline.
    public func recordToken(customerId: String, body: JSONValue) async throws(KakinError) -> JSONValue {
        let input = try ExternalPurchaseTokenInput(json: body)
        let token = input.token
        guard let app = apps[token.bundleId] else {
            throw KakinError(.externalPurchaseTokenWrongBundleID, detail: "no app \(token.bundleId) is configured")
        }
        try check(token, app: app)
        let events = events
        let (row, appended) = try await store.transaction { r in
            var facts = ExternalFacts()
            if try r.ensureCustomer(customerId).created { facts.add(customerId, EventDraft(type: .customerCreated)) }
            if try r.insertExternalToken(ExternalWrite.tokenRow(token, customerId: customerId, nowMs: r.nowMs)) {
                try r.recordTimeline(customerId: customerId, kind: "externalPurchaseToken.recorded", reference: token.externalPurchaseId,
                                     detail: ["tokenType": .string(token.tokenType?.rawValue)])
            }
            guard var row = try r.externalToken(token.externalPurchaseId) else { preconditionFailure("a token just recorded exists") }
            if row.customerId == nil {
                row.customerId = customerId
                try r.updateExternalToken(row)
            }
            return (row, try events.record(r, facts, bundleId: app.bundleId))
        }
        if appended > 0 { events.wake() }
        reporter.worker.wake()
        var o: [String: JSONValue] = ["externalPurchaseId": .string(row.externalPurchaseId), "reportStatus": .string(try await reporter.reportStatus(of: row))]
        if let type = row.tokenType { o["tokenType"] = .string(type) }
        return .object(o)
    }

    func check(_ token: ExternalPurchaseToken, app: AppSettings) throws(KakinError) {
        try token.check(bundleId: app.bundleId, appAppleId: app.appAppleId, environments: app.environments,
                        acceptedTypes: app.external.reporting?.acceptedTokenTypes)
    }
}

extension CustomerEvents {
    /// Records what an external purchase write decided, for every customer it touched.
    func record(_ r: Records, _ facts: ExternalFacts, bundleId: String) throws -> Int {
        var appended = 0
        for c in facts.customers {
            appended += try record(r, customerId: c, facts: facts.drafts[c] ?? [], bundleId: bundleId)
        }
        return appended
    }
}
