import KakinCore
@testable import KakinExternal
import Testing

/// A web subscription's state comes from the subscription's own state in each event (period end, status, the
/// event's `created`), never from the order webhooks arrive in.
@Suite struct SubscriptionStateTests {
    typealias F = StripeFixtures
    static let month: Int64 = 2_592_000
    static let t0: Int64 = 1_780_000_000

    /// Created, renewed twice, cancelled at period end, ended: every observation, parsed from Stripe-shaped events.
    static func lifecycle() throws -> [ExternalSubscriptionObservation] {
        let (p1, p2, p3, p4) = (t0, t0 + month, t0 + 2 * month, t0 + 3 * month)
        let events: [JSONValue] = [
            F.event("checkout.session.completed", id: "evt_a01", created: p1, object: F.checkoutSessionSubscription(created: p1)),
            F.event("customer.subscription.created", id: "evt_a02", created: p1, object: F.subscription(status: "incomplete", periodStart: p1, periodEnd: p2)),
            F.event("customer.subscription.updated", id: "evt_a03", created: p1, object: F.subscription(status: "active", periodStart: p1, periodEnd: p2)),
            F.event("invoice.paid", id: "evt_a04", created: p1 + 6, object: F.invoice(id: "in_1", periodStart: p1, periodEnd: p2, billingReason: "subscription_create")),
            F.event("customer.subscription.updated", id: "evt_a05", created: p2, object: F.subscription(status: "active", periodStart: p2, periodEnd: p3)),
            F.event("invoice.paid", id: "evt_a06", created: p2 + 6, object: F.invoice(id: "in_2", periodStart: p2, periodEnd: p3)),
            F.event("customer.subscription.updated", id: "evt_a07", created: p3, object: F.subscription(status: "active", periodStart: p3, periodEnd: p4)),
            F.event("invoice.paid", id: "evt_a08", created: p3 + 6, object: F.invoice(id: "in_3", periodStart: p3, periodEnd: p4)),
            F.event("customer.subscription.updated", id: "evt_a09", created: p3 + 86_400,
                    object: F.subscription(status: "active", periodStart: p3, periodEnd: p4, cancelAtPeriodEnd: true, canceledAt: p3 + 86_400)),
            F.event("customer.subscription.deleted", id: "evt_a10", created: p4,
                    object: F.subscription(status: "canceled", periodStart: p3, periodEnd: p4, cancelAtPeriodEnd: true, canceledAt: p3 + 86_400, endedAt: p4)),
        ]
        return try events.map { try #require(try F.facts($0).subscription) }
    }

    @Test func inOrderTheStateFollowsTheSubscription() throws {
        let all = try Self.lifecycle()
        let afterRenewals = try #require(ExternalSubscriptionState.merge(all.prefix(8)))
        #expect(afterRenewals.status == .active && afterRenewals.expiresAtMs == (Self.t0 + 3 * Self.month) * 1000)
        #expect(!afterRenewals.cancelAtPeriodEnd && !afterRenewals.isEnded)
        #expect(afterRenewals.isActive(atMs: (Self.t0 + 3 * Self.month) * 1000 - 1))
        let cancelled = try #require(ExternalSubscriptionState.merge(all.prefix(9)))
        #expect(cancelled.cancelAtPeriodEnd && cancelled.status == .active)
        let ended = try #require(ExternalSubscriptionState.merge(all))
        #expect(ended.status == .canceled && ended.isEnded && ended.endedAtMs == (Self.t0 + 3 * Self.month) * 1000)
        #expect(ended.expiresAtMs == (Self.t0 + 3 * Self.month) * 1000)
        #expect(ended.customerId == "u1" && ended.productId == "premium.monthly" && ended.lastEventId == "evt_a10")
    }

    @Test func anyArrivalOrderWithDuplicatesGivesTheSameFinalState() throws {
        let all = try Self.lifecycle()
        let expected = try #require(ExternalSubscriptionState.merge(all))
        var random = SeededRandom(seed: 17)
        for _ in 0..<500 {
            var delivered = all + all.filter { _ in Bool.random(using: &random) }  // Stripe delivers at least once
            delivered.shuffle(using: &random)
            let merged = try #require(ExternalSubscriptionState.merge(delivered))
            #expect(merged == expected)
            // Incrementally, as a store would absorb one webhook at a time.
            var incremental = ExternalSubscriptionState(delivered[0])
            for o in delivered.dropFirst() { incremental = incremental.merging(o) }
            #expect(incremental == expected)
        }
    }

    @Test func theDeletionArrivingFirstIsNotUndoneByOlderEvents() throws {
        let all = try Self.lifecycle()
        var state = ExternalSubscriptionState(all.last!)
        for o in all.dropLast() { state.absorb(o) }
        #expect(state.status == .canceled && state.isEnded && !state.isActive(atMs: (Self.t0 + 3 * Self.month) * 1000))
    }

    /// Random histories: renewals, failed payments and recoveries, cancel and un-cancel, sometimes an end; each
    /// event is the subscription's full state at its time. Every permutation merges to the in-order result, and
    /// that result is the newest event's state.
    @Test func randomHistoriesMergeToTheNewestStateWhateverTheOrder() {
        var random = SeededRandom(seed: 2026)
        for history in 0..<200 {
            var observations: [ExternalSubscriptionObservation] = []
            var t = Self.t0
            var periodEnd = t + Self.month
            var status = ExternalSubscriptionStatus.active
            var cancel = false
            var ended: Int64?
            let steps = Int.random(in: 1...14, using: &random)
            for step in 0..<steps where ended == nil {
                t += Int64.random(in: 0...(Self.month / 2), using: &random)  // same-second events happen too
                switch Int.random(in: 0..<6, using: &random) {
                case 0, 1: if t >= periodEnd { periodEnd += Self.month; status = .active }
                case 2: status = status == .active ? .pastDue : .active
                case 3: cancel.toggle()
                case 4: if Int.random(in: 0..<3, using: &random) == 0 { status = .canceled; ended = t }
                default: break
                }
                observations.append(ExternalSubscriptionObservation(
                    provider: "stripe", subscriptionId: "sub_h\(history)", customerId: "u\(history)", productId: "premium.monthly",
                    status: status, currentPeriodEndMs: periodEnd * 1000, cancelAtPeriodEnd: cancel, endedAtMs: ended.map { $0 * 1000 },
                    observedAtSeconds: t, eventId: "evt_\(history)_\(String(step + 100))"))
            }
            guard let inOrder = ExternalSubscriptionState.merge(observations) else { continue }
            let newest = observations.max { $0.orderKey < $1.orderKey }!
            #expect(inOrder.status == (ended != nil ? .canceled : newest.status))
            #expect(inOrder.currentPeriodEndMs == newest.currentPeriodEndMs)
            #expect(inOrder.cancelAtPeriodEnd == newest.cancelAtPeriodEnd)
            for _ in 0..<20 {
                var shuffled = observations
                shuffled.shuffle(using: &random)
                #expect(ExternalSubscriptionState.merge(shuffled) == inOrder)
            }
        }
    }

    @Test func anObservationSurvivesStorageAsJSON() throws {
        for o in try Self.lifecycle() {
            #expect(ExternalSubscriptionObservation(json: try JSONParser.parse(o.json.serialized())) == o)
        }
    }
}
