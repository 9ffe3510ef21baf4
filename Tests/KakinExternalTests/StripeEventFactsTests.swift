import KakinCore
@testable import KakinExternal
import Testing

@Suite struct StripeEventFactsTests {
    typealias F = StripeFixtures

    func kind(_ body: () throws -> Void) -> String? {
        do { try body() } catch let e as KakinError { return e.kind.id } catch { return "other" }
        return nil
    }

    @Test func aPaidCheckoutInPaymentModeIsAOneTimePurchaseOfTheMetadataCustomerAndProduct() throws {
        let facts = try F.facts(F.event("checkout.session.completed", id: "evt_1Pay", created: 1_780_000_000, object: F.checkoutSessionPayment()))
        let p = try #require(facts.purchase)
        #expect(p.kind == .oneTime)
        #expect(p.customerId == "u1")
        #expect(p.input.provider == "stripe")
        #expect(p.input.externalId == "pi_3PabcDEF")  // what charge.refunded will name
        #expect(p.input.productId == "coins.100")
        #expect(p.input.price == 120)
        #expect(p.input.currency.code == "JPY")
        #expect(p.input.purchasedAtMs == 1_780_000_000_000)
        #expect(p.input.expiresAtMs == nil)
        #expect(p.checkoutSessionId == "cs_test_a1b2c3")
        #expect(facts.subscription == nil && facts.refund == nil && facts.ignoredReason == nil)
        #expect(facts.eventId == "evt_1Pay" && facts.livemode == false)
    }

    @Test func aPaymentSessionWithoutTheMetadataKeysIsRefusedByName() {
        let noCustomer = F.event("checkout.session.completed", id: "evt_2", created: 1_780_000_000, object: F.checkoutSessionPayment(customer: nil))
        #expect(kind { _ = try F.facts(noCustomer) } == "KKN-3059")
        let noProduct = F.event("checkout.session.completed", id: "evt_3", created: 1_780_000_000, object: F.checkoutSessionPayment(product: nil))
        #expect(kind { _ = try F.facts(noProduct) } == "KKN-3059")
    }

    @Test func anUnpaidSessionOrASetupSessionChangesNothing() throws {
        let unpaid = try F.facts(F.event("checkout.session.completed", id: "evt_4", created: 1_780_000_000,
                                         object: F.checkoutSessionPayment(paymentStatus: "unpaid")))
        #expect(unpaid.purchase == nil && unpaid.ignoredReason != nil)
        var setup = F.checkoutSessionPayment()
        if case .object(var o) = setup { o["mode"] = "setup"; o["payment_status"] = "no_payment_required"; setup = .object(o) }
        #expect(try F.facts(F.event("checkout.session.completed", id: "evt_5", created: 1_780_000_000, object: setup)).ignoredReason != nil)
    }

    @Test func aSubscriptionCheckoutTiesTheSubscriptionToTheCustomer() throws {
        let facts = try F.facts(F.event("checkout.session.completed", id: "evt_6", created: 1_780_000_000,
                                        object: F.checkoutSessionSubscription(created: 1_780_000_000)))
        #expect(facts.purchase == nil)  // the money and the period come with invoice.paid
        let s = try #require(facts.subscription)
        #expect(s.subscriptionId == "sub_1PqR" && s.customerId == "u1" && s.productId == "premium.monthly" && s.status == .active)
    }

    @Test(arguments: [true, false])
    func anInvoicePaidIsOnePaidPeriodReadFromEitherAPIShape(basil: Bool) throws {
        let start: Int64 = 1_780_000_000, end: Int64 = 1_782_592_000
        let facts = try F.facts(F.event("invoice.paid", id: "evt_7", created: start + 6,
                                        object: F.invoice(id: "in_1Renew", periodStart: start, periodEnd: end, basilShape: basil,
                                                          paymentIntent: "pi_old"),
                                        apiVersion: basil ? F.basil : F.acacia))
        let p = try #require(facts.purchase)
        #expect(p.kind == .subscriptionPeriod)
        #expect(p.input.externalId == "in_1Renew")
        #expect(p.input.price == 980)
        #expect(p.input.purchasedAtMs == (start + 5) * 1000)  // status_transitions.paid_at
        #expect(p.input.expiresAtMs == end * 1000)
        #expect(p.periodStartMs == start * 1000)
        #expect(p.customerId == "u1" && p.subscriptionId == "sub_1PqR")
        #expect(p.paymentIntentId == (basil ? nil : "pi_old"))
        let s = try #require(facts.subscription)
        #expect(s.status == .active && s.currentPeriodEndMs == end * 1000 && s.cancelAtPeriodEnd == nil)
    }

    @Test func anInvoiceWithoutMetadataStillObservesTheSubscription() throws {
        let facts = try F.facts(F.event("invoice.paid", id: "evt_8", created: 1_780_000_006,
                                        object: F.invoice(id: "in_2", periodStart: 1_780_000_000, periodEnd: 1_782_592_000, customer: nil, product: nil)))
        #expect(facts.purchase == nil)  // no product: the caller resolves it from the subscription's other events
        #expect(facts.subscription?.subscriptionId == "sub_1PqR")
    }

    @Test(arguments: [true, false])
    func aSubscriptionUpdateCarriesItsOwnState(basil: Bool) throws {
        let facts = try F.facts(F.event("customer.subscription.updated", id: "evt_9", created: 1_781_000_000,
                                        object: F.subscription(status: "active", periodStart: 1_780_000_000, periodEnd: 1_782_592_000,
                                                               cancelAtPeriodEnd: true, basilShape: basil),
                                        previous: ["cancel_at_period_end": false]))
        let s = try #require(facts.subscription)
        #expect(s.status == .active && s.cancelAtPeriodEnd == true && s.currentPeriodEndMs == 1_782_592_000_000)
        #expect(s.customerId == "u1" && s.productId == "premium.monthly" && s.endedAtMs == nil)
        #expect(s.observedAtSeconds == 1_781_000_000 && s.eventId == "evt_9")
    }

    @Test func aDeletedSubscriptionHasEnded() throws {
        let facts = try F.facts(F.event("customer.subscription.deleted", id: "evt_10", created: 1_782_592_001,
                                        object: F.subscription(status: "canceled", periodStart: 1_780_000_000, periodEnd: 1_782_592_000,
                                                               canceledAt: 1_781_000_000, endedAt: 1_782_592_000)))
        let s = try #require(facts.subscription)
        #expect(s.status == .canceled && s.endedAtMs == 1_782_592_000_000)
    }

    @Test func aRefundedChargeReportsTheCumulativeRefund() throws {
        let partial = try F.facts(F.event("charge.refunded", id: "evt_11", created: 1_780_100_000, object: F.charge(refunded: 50)))
        let r = try #require(partial.refund)
        #expect(r.chargeId == "ch_3PabcDEF" && r.paymentIntentId == "pi_3PabcDEF" && r.invoiceId == nil)
        #expect(r.amountCharged == 120 && r.amountRefunded == 50 && !r.fullyRefunded && r.currency.code == "JPY")
        let full = try F.facts(F.event("charge.refunded", id: "evt_12", created: 1_780_200_000, object: F.charge(refunded: 120)))
        #expect(full.refund?.fullyRefunded == true)
        let invoiceCharge = try F.facts(F.event("charge.refunded", id: "evt_13", created: 1_780_200_000,
                                                object: F.charge(id: "ch_2", amount: 980, refunded: 980, paymentIntent: nil, invoice: "in_1Renew")))
        #expect(invoiceCharge.refund?.invoiceId == "in_1Renew")
    }

    @Test func unhandledTypesAreIgnoredNotRefused() throws {
        let facts = try F.facts(F.event("customer.created", id: "evt_14", created: 1_780_000_000, object: ["id": "cus_1", "object": "customer"]))
        #expect(facts.ignoredReason != nil && facts.purchase == nil && facts.subscription == nil && facts.refund == nil)
    }

    @Test func malformedEventsAreRefusedWithKKN3058() {
        let bad: [JSONValue] = [
            ["id": "evt_1", "object": "charge", "type": "x", "created": 1, "data": ["object": [:]]],
            ["id": "nope", "object": "event", "type": "x", "created": 1, "data": ["object": [:]]],
            ["id": "evt_1", "object": "event", "type": "x", "created": "yesterday", "data": ["object": [:]]],
            ["id": "evt_1", "object": "event", "type": "x", "created": 1],
            F.event("invoice.paid", id: "evt_2", created: 1, object: ["id": "in_1", "object": "subscription"]),
            F.event("charge.refunded", id: "evt_3", created: 1, object: F.charge(amount: 10, refunded: 20)),
            F.event("checkout.session.completed", id: "evt_4", created: 1, object: F.checkoutSessionPayment(currency: "yen!")),
        ]
        for event in bad { #expect(kind { _ = try F.facts(event) } == "KKN-3058", "\(event.jsonString)") }
        #expect(kind { _ = try StripeEvent(body: Array("{".utf8)) } == "KKN-3058")
        #expect(kind { _ = try StripeEvent(body: [UInt8](repeating: 0x20, count: StripeEvent.bodyBytesMax + 1)) } == "KKN-3058")
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        #expect(kind { _ = try StripeEvent(body: Array(deep.utf8)) } == "KKN-3058")
    }
}
