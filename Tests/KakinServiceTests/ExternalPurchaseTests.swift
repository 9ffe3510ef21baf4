import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinExternal
@testable import KakinService
import KakinStorage
import KakinTestPostgres
import Testing

/// Purchases outside the App Store through the one write of `ExternalPurchases`, on both engines: each test asserts
/// the balances, the ledger (with `source`), the status (with `source`) and the customer's events.
@Suite struct ExternalPurchaseTests {
    static let secret = Array("whsec_test_5f0c1e8b7a2d4c6e9f1a3b5c7d9e0f12".utf8)
    static let monthly = Product(productId: "premium.monthly", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1))
    static let catalog = Catalog([coins100, monthly])
    static let day: Int64 = 86_400_000

    struct World {
        let store: KakinStore
        let clock: TestClock
        let external: ExternalPurchases
        let ingest: Ingest

        var nowMs: Int64 { clock.nowMs() }
        func set(_ ms: Int64) { clock.now.withLock { $0 = ms } }

        /// Delivers a Stripe event signed now, as Stripe would.
        @discardableResult
        func stripe(_ type: String, id: String, createdMs: Int64? = nil, _ object: JSONValue) async throws -> StripeWebhookAnswer {
            let event: JSONValue = [
                "id": .string(id), "object": "event", "api_version": "2025-03-31.basil", "created": .int((createdMs ?? nowMs) / 1000),
                "data": ["object": object], "livemode": false, "pending_webhooks": 1, "type": .string(type),
            ]
            let body = event.serialized()
            let header = TimestampedSignature.header(body: body, timestamp: nowMs / 1000, secrets: [ExternalPurchaseTests.secret])
            return try await external.stripeWebhook(bundleId: "com.example", signatureHeader: header, body: body)
        }

        func wallet(_ c: String) async throws -> WalletBalance { try await store.wallet(c) }

        func ledger(_ c: String) async throws -> [LedgerEntry] { try await store.ledger(customerId: c, limit: 50, cursor: nil).entries.reversed() }

        func eventTypes(_ c: String) async throws -> [String] {
            try await store.customerEvents(customerId: c, afterSequence: 0, limit: 100).map(\.type)
        }

        func status(_ c: String) async throws -> JSONValue { try await external.statusReads.status(c).json }
    }

    static func withWorld(_ backend: Backend, wallet: WalletPolicy = WalletPolicy(), _ body: (World) async throws -> Void) async throws {
        let clock = TestClock()
        try await withStore(backend, clock: clock) { store in
            var app = AppSettings(bundleId: "com.example", appAppleId: 1_234_567_890, environments: [.sandbox, .production], catalog: catalog)
            app.external.stripe = StripeWebhookConfiguration(webhookSecretEnv: "KAKIN_STRIPE_SECRET", secrets: [secret])
            let events = CustomerEvents(catalog: catalog, wake: {})
            let statusReads = CustomerStatusReads(store: store, catalog: catalog, clock: clock, events: events)
            let reporter = ExternalPurchaseReporter(store: store, access: AppStoreAccess(), apps: ["com.example": app], clock: clock,
                                                    metrics: Metrics(), logger: Logger(minimum: .error), events: events)
            let external = ExternalPurchases(store: store, apps: ["com.example": app], walletPolicy: wallet, events: events, statusReads: statusReads,
                                             clock: clock, metrics: Metrics(), logger: Logger(minimum: .error), reporter: reporter)
            let ingest = Ingest(store: store, verifier: unusedVerifier, catalogs: ["com.example": catalog], walletPolicy: wallet,
                                transferPolicy: .keepFirstOwner, metrics: Metrics(), setsAppAccountTokens: { _ in false }, wakeAppStoreJobs: {},
                                events: events,
                                apple2026: Apple2026Ingest(store: store, verifier: unusedVerifier, apps: [:], events: events, metrics: Metrics()))
            try await body(World(store: store, clock: clock, external: external, ingest: ingest))
        }
    }

    static func metadata(_ customer: String?, _ product: String?) -> JSONValue {
        var o: [String: JSONValue] = [:]
        if let customer { o["kakin_customer_id"] = .string(customer) }
        if let product { o["kakin_product_id"] = .string(product) }
        return .object(o)
    }

    // MARK: A coin pack through Stripe

    @Test(arguments: Backend.available) func aStripeCoinPackItsDuplicateWebhookThenItsRefund(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { w in
            let session: JSONValue = [
                "id": "cs_test_a1", "object": "checkout.session", "mode": "payment", "payment_status": "paid", "status": "complete",
                "amount_total": 120, "currency": "jpy", "payment_intent": "pi_A1", "metadata": Self.metadata("u1", "coins.100"),
            ]
            let first = try await w.stripe("checkout.session.completed", id: "evt_1", session)
            #expect(first.outcome == "applied")
            #expect(try await w.wallet("u1") == WalletBalance(paid: 100, free: 10))
            let credited = try await w.ledger("u1")
            #expect(credited.map(\.kind) == ["purchase"])
            #expect(credited[0].source == "stripe" && credited[0].reference == "pi_A1" && credited[0].json["source"] == "stripe")
            #expect(try await w.eventTypes("u1") == ["customer.created", "coins.credited"])
            #expect(try await w.status("u1")["status"] == "new")

            // Stripe delivers the same event again: nothing moves, nothing is told.
            let again = try await w.stripe("checkout.session.completed", id: "evt_1", session)
            #expect(again.outcome == "duplicate")
            #expect(try await w.wallet("u1") == WalletBalance(paid: 100, free: 10))
            #expect(try await w.ledger("u1").count == 1)
            #expect(try await w.eventTypes("u1").count == 2)

            // The charge is refunded in full: the coins go back (paid and the bonus), once, however often Stripe says so.
            let charge: JSONValue = [
                "id": "ch_A1", "object": "charge", "amount": 120, "amount_refunded": 120, "refunded": true, "currency": "jpy",
                "payment_intent": "pi_A1", "invoice": .null, "metadata": [:],
            ]
            #expect(try await w.stripe("charge.refunded", id: "evt_2", charge).outcome == "applied")
            #expect(try await w.stripe("charge.refunded", id: "evt_3", charge).outcome == "applied")
            #expect(try await w.wallet("u1") == WalletBalance(paid: 0, free: 0))
            let after = try await w.ledger("u1")
            #expect(after.map(\.kind) == ["purchase", "refund"])
            #expect(after[1].paid == -100 && after[1].free == -10 && after[1].source == "stripe")
            #expect(try await w.eventTypes("u1") == ["customer.created", "coins.credited", "coins.clawed_back", "purchase.refunded"])
            #expect(try await w.store.checkLedger().ok)
        }
    }

    @Test(arguments: Backend.available) func aPartialRefundTakesBackPaidCoinsInProportionAndFloorsAtZeroUnderThePolicy(_ backend: Backend) async throws {
        try await Self.withWorld(backend, wallet: WalletPolicy(allowNegativeBalance: false)) { w in
            let body: JSONValue = ["provider": "web", "externalId": "ord_1", "productId": "coins.100", "price": 120, "currency": "JPY",
                                   "purchasedAt": .string(Timestamp.rfc3339(w.nowMs))]
            let first = try await w.external.record(customerId: "u1", body: body)
            #expect(first.status == 201 && first.grant == ["coins": ["paid": 100, "free": 10]])
            #expect(first.purchase["source"] == "web")
            let again = try await w.external.record(customerId: "u1", body: body)
            #expect(again.status == 409 && again.grant == first.grant)
            let half = try await w.external.refund(customerId: "u1", provider: "web", externalId: "ord_1", body: Array(#"{"amount": 60}"#.utf8))
            #expect(half.status == 200)
            #expect(try await w.wallet("u1") == WalletBalance(paid: 50, free: 10))
            // The customer spends what is left, then the rest is refunded: the balance stops at zero (policy), the shortfall noted.
            let spent = try await wallets(w.store).spend(
                SpendRequest(customerId: "u1", idempotencyKey: "k", canonicalRequest: "{}", amount: 60, item: "stamp", recipient: nil), requestId: "r")
            #expect(spent.status == 201)
            _ = try await w.external.refund(customerId: "u1", provider: "web", externalId: "ord_1", body: [])
            #expect(try await w.wallet("u1") == WalletBalance(paid: 0, free: 0))
            await #expect(throws: KakinError.self) {
                try await w.external.refund(customerId: "u1", provider: "web", externalId: "ord_1", body: [])
            }
            // The second refund found nothing left to take: its entry moves nothing and records the shortfall.
            let entries = try await w.ledger("u1")
            #expect(entries.map(\.kind) == ["purchase", "refund", "spend", "refund"])
            #expect(entries[1].paid == -50 && entries[1].free == 0 && entries[3].paid == 0 && entries[3].free == 0)
            #expect(try await w.eventTypes("u1") == ["customer.created", "coins.credited", "coins.clawed_back", "purchase.refunded",
                                                       "coins.spent", "coins.clawed_back", "purchase.refunded"])
            #expect(try await w.store.checkLedger().ok)
        }
    }

    // MARK: A web subscription, its webhooks out of order

    @Test(arguments: Backend.available) func aWebSubscriptionCreatedRenewedTwiceThenCancelledWithWebhooksOutOfOrder(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { w in
            let t0 = w.nowMs
            let month = 30 * Self.day
            let md = Self.metadata("u1", "premium.monthly")
            func invoice(_ id: String, _ n: Int64) -> JSONValue {
                let start = (t0 + n * month) / 1000, end = (t0 + (n + 1) * month) / 1000
                return ["id": .string(id), "object": "invoice", "amount_paid": 980, "currency": "jpy", "billing_reason": "subscription_cycle",
                        "status_transitions": ["paid_at": .int(start + 5)],
                        "parent": ["type": "subscription_details", "subscription_details": ["metadata": md, "subscription": "sub_W"]],
                        "lines": ["object": "list", "data": [["id": "il_1", "object": "line_item", "amount": 980, "metadata": md,
                                                              "period": ["start": .int(start), "end": .int(end)]]]]]
            }
            func subscription(_ status: String, _ n: Int64, cancel: Bool = false, endedAt: Int64? = nil) -> JSONValue {
                ["id": "sub_W", "object": "subscription", "status": .string(status), "cancel_at_period_end": .bool(cancel),
                 "ended_at": endedAt.map { .int($0 / 1000) } ?? .null, "canceled_at": endedAt.map { .int($0 / 1000) } ?? .null, "metadata": md,
                 "items": ["object": "list", "data": [["id": "si_1", "object": "subscription_item",
                                                       "current_period_start": .int((t0 + n * month) / 1000),
                                                       "current_period_end": .int((t0 + (n + 1) * month) / 1000)]]]]
            }
            let checkout: JSONValue = ["id": "cs_sub", "object": "checkout.session", "mode": "subscription", "payment_status": "paid",
                                       "status": "complete", "subscription": "sub_W", "metadata": md]
            func state() async throws -> JSONValue { try await w.status("u1")["subscriptions"]?.arrayValue?.first ?? .null }

            // Created: the first invoice arrives before the checkout and the subscription's creation.
            w.set(t0 + 3_600_000)
            try await w.stripe("invoice.paid", id: "evt_in1", createdMs: t0, invoice("in_1", 0))
            try await w.stripe("checkout.session.completed", id: "evt_cs", createdMs: t0 - 1000, checkout)
            try await w.stripe("customer.subscription.created", id: "evt_c", createdMs: t0, subscription("active", 0))
            #expect(try await w.status("u1")["status"] == "active")
            #expect(try await state()["source"] == "stripe")
            #expect(try await state()["originalTransactionId"] == "sub_W")
            #expect(try await state()["expiresAt"] == .string(Timestamp.rfc3339(t0 + month)))

            // Renewed: the subscription's update comes before its invoice.
            w.set(t0 + month + 3_600_000)
            try await w.stripe("customer.subscription.updated", id: "evt_u1", createdMs: t0 + month, subscription("active", 1))
            try await w.stripe("invoice.paid", id: "evt_in2", createdMs: t0 + month, invoice("in_2", 1))
            // Renewed again, and a stale copy of the creation delivered late.
            w.set(t0 + 2 * month + 3_600_000)
            try await w.stripe("invoice.paid", id: "evt_in3", createdMs: t0 + 2 * month, invoice("in_3", 2))
            try await w.stripe("customer.subscription.created", id: "evt_c", createdMs: t0, subscription("active", 0))
            try await w.stripe("customer.subscription.updated", id: "evt_old", createdMs: t0 + month, subscription("active", 1))
            #expect(try await state()["expiresAt"] == .string(Timestamp.rfc3339(t0 + 3 * month)))
            #expect(try await state()["state"] == "subscribed")

            // Cancelled: the deletion arrives before the customer's cancel-at-period-end update.
            w.set(t0 + 3 * month + 3_600_000)
            try await w.stripe("customer.subscription.deleted", id: "evt_del", createdMs: t0 + 3 * month,
                               subscription("canceled", 2, cancel: true, endedAt: t0 + 3 * month))
            try await w.stripe("customer.subscription.updated", id: "evt_cancel", createdMs: t0 + 2 * month + 10 * Self.day,
                               subscription("active", 2, cancel: true))
            try await w.stripe("invoice.paid", id: "evt_in2", createdMs: t0 + month, invoice("in_2", 1))
            #expect(try await w.status("u1")["status"] == "inactive")
            #expect(try await state()["state"] == "expired")
            #expect(try await state()["expirationReason"] == "voluntary")
            #expect(try await state()["expiresAt"] == .string(Timestamp.rfc3339(t0 + 3 * month)))

            // The deletion told Kakin both that auto-renew was off and that it ended.
            #expect(try await w.eventTypes("u1") == ["customer.created", "subscription.started", "entitlement.granted", "subscription.renewed",
                                                       "subscription.renewed", "subscription.auto_renew_changed", "subscription.expired",
                                                       "entitlement.revoked"])
            // A subscription moves no coins: the ledger stays empty, the money is in the purchases.
            #expect(try await w.wallet("u1") == WalletBalance())
            #expect(try await w.ledger("u1").isEmpty)
            let periods = try await w.store.snapshot { r in try r.externalPurchases(provider: "stripe", subscriptionId: "sub_W") }
            #expect(periods.map(\.externalId) == ["in_1", "in_2", "in_3"] && periods.allSatisfy(\.applied))
        }
    }

    @Test(arguments: Backend.available) func aSubscriptionPeriodRefundedThroughItsPaymentIntentIsRevoked(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { w in
            let t0 = w.nowMs
            let md = Self.metadata("u1", "premium.monthly")
            // API 2025-03-31: the invoice names its PaymentIntent in `payments`, the charge names no invoice.
            let invoice: JSONValue = [
                "id": "in_R", "object": "invoice", "amount_paid": 980, "currency": "jpy", "status_transitions": ["paid_at": .int(t0 / 1000)],
                "parent": ["type": "subscription_details", "subscription_details": ["metadata": md, "subscription": "sub_R"]],
                "payments": ["object": "list", "data": [["object": "invoice_payment", "payment": ["type": "payment_intent", "payment_intent": "pi_R"]]]],
                "lines": ["object": "list", "data": [["id": "il_R", "object": "line_item", "amount": 980, "metadata": md,
                                                      "period": ["start": .int(t0 / 1000), "end": .int((t0 + 30 * Self.day) / 1000)]]]],
            ]
            try await w.stripe("invoice.paid", id: "evt_r1", invoice)
            #expect(try await w.status("u1")["subscriptions"]?.arrayValue?.first?["state"] == "subscribed")
            let charge: JSONValue = ["id": "ch_R", "object": "charge", "amount": 980, "amount_refunded": 980, "refunded": true, "currency": "jpy",
                                     "payment_intent": "pi_R", "metadata": [:]]
            #expect(try await w.stripe("charge.refunded", id: "evt_r2", charge).outcome == "applied")
            #expect(try await w.status("u1")["subscriptions"]?.arrayValue?.first?["state"] == "revoked")
            #expect(try await w.status("u1")["status"] == "inactive")
            // The refund's fact first, then the transitions the status shows (as for an App Store revocation).
            #expect(try await w.eventTypes("u1") == ["customer.created", "subscription.started", "entitlement.granted", "purchase.refunded",
                                                       "subscription.auto_renew_changed", "subscription.revoked", "entitlement.revoked"])
            // A refund of a charge Kakin has not recorded yet is refused, so Stripe delivers it again later.
            let unknown: JSONValue = ["id": "ch_X", "object": "charge", "amount": 120, "amount_refunded": 120, "currency": "jpy", "payment_intent": "pi_X"]
            await #expect(throws: KakinError.self) { try await w.stripe("charge.refunded", id: "evt_r3", unknown) }
            #expect(try await w.stripe("charge.refunded", id: "evt_r3", charge).outcome == "applied")
            #expect(try await w.ledger("u1").isEmpty)
            #expect(try await w.store.checkLedger().ok)
        }
    }

    // MARK: Two sources, one entitlement

    @Test(arguments: Backend.available) func anAppStoreAndAWebSubscriptionToOneEntitlementStayActiveUntilBothEnded(_ backend: Backend) async throws {
        try await Self.withWorld(backend) { w in
            let t0 = w.nowMs
            // The App Store subscription ends in 10 days.
            let tx = try TransactionPayload(json: [
                "transactionId": "5000", "originalTransactionId": "5000", "bundleId": "com.example", "productId": "premium.monthly",
                "purchaseDate": .int(t0 - 20 * Self.day), "expiresDate": .int(t0 + 10 * Self.day), "quantity": 1, "type": "Auto-Renewable Subscription",
                "inAppOwnershipType": "PURCHASED", "signedDate": .int(t0), "environment": "Sandbox", "price": 980000, "currency": "JPY",
                "subscriptionGroupIdentifier": "21000001",
            ])
            try await w.ingest.present("u1", tx)
            // The web subscription (the team's backend through the generic source) runs 30 days.
            let web = try await w.external.record(customerId: "u1", body: [
                "provider": "web", "externalId": "websub_1", "productId": "premium.monthly", "price": 980, "currency": "JPY",
                "purchasedAt": .string(Timestamp.rfc3339(t0)), "expiresAt": .string(Timestamp.rfc3339(t0 + 30 * Self.day)),
            ])
            #expect(web.status == 201)
            func sources() async throws -> [String: String] {
                var out: [String: String] = [:]
                for s in try await w.status("u1")["subscriptions"]?.arrayValue ?? [] { out[s["source"]?.stringValue ?? "?"] = s["state"]?.stringValue }
                return out
            }
            #expect(try await w.status("u1")["status"] == "active")
            #expect(try await sources() == ["appStore": "subscribed", "web": "subscribed"])
            // Introductory offers are the App Store's: the web subscription does not count for them.
            #expect(try await w.status("u1")["eligibility"]?["introductoryOffer"]?["premium"] == false)

            w.set(t0 + 15 * Self.day)
            #expect(try await w.status("u1")["status"] == "active")
            #expect(try await sources() == ["appStore": "expired", "web": "subscribed"])

            // Renewed on the web for another period: still active after the first period.
            w.set(t0 + 29 * Self.day)
            _ = try await w.external.record(customerId: "u1", body: [
                "provider": "web", "externalId": "websub_2", "productId": "premium.monthly", "price": 980, "currency": "JPY",
                "purchasedAt": .string(Timestamp.rfc3339(t0 + 29 * Self.day)),
                "expiresAt": .string(Timestamp.rfc3339(t0 + 60 * Self.day)),
            ])
            w.set(t0 + 45 * Self.day)
            #expect(try await w.status("u1")["status"] == "active")
            #expect(try await w.status("u1")["subscriptions"]?.arrayValue?.count == 2)

            w.set(t0 + 61 * Self.day)
            #expect(try await w.status("u1")["status"] == "inactive")
            #expect(try await sources() == ["appStore": "expired", "web": "expired"])
            // Told as they happened: the App Store's start and the group granted, the web's start (with its source; the group
            // was served already), the App Store's expiry (told with the web renewal's write), the web renewal. The web's
            // end, which no write told yet, revokes the group with the next change.
            let events = try await w.store.customerEvents(customerId: "u1", afterSequence: 0, limit: 100)
            #expect(events.map(\.type) == ["customer.created", "subscription.started", "entitlement.granted", "subscription.started",
                                           "subscription.expired", "subscription.renewed"])
            #expect(events.filter { $0.type == "subscription.started" }.compactMap { try? JSONParser.parse($0.payload)["data"]?["source"]?.stringValue }
                    == ["appStore", "web"])
            #expect(try await w.wallet("u1") == WalletBalance())
            #expect(try await w.ledger("u1").isEmpty)
        }
    }
}
