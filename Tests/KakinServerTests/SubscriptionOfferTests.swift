import Foundation
import KakinCore
import KakinService
import Testing

/// Seed 003 (subscription offers observed in production), end to end: the simulator applies the offers
/// by Apple's rules, its notifications reach Kakin, and Kakin's status shows the right `expiresAt`,
/// current offer and single pending offer — including the stale-expiry trap.
@Suite(.serialized) struct SubscriptionOffers {
    static func free(_ id: String, _ period: String) -> SubscriptionOffer {
        SubscriptionOffer(id: id, type: .promotional, mode: .freeTrial, period: ISOPeriod(period)!)
    }

    /// A and B: monthly, same level (crossgrades). C: quarterly with a 7-day trial, same level, other duration.
    static let catalog = Catalog([
        Product(productId: "monthly.a", kind: .autoRenewable, priceMilli: 980_000, currency: "JPY", groupId: "g", period: ISOPeriod(months: 1),
                level: 1, introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: ISOPeriod(months: 1)),
                promotionalOffers: [free("a.1y", "P1Y"), free("a.6m", "P6M"), free("a.12m", "P12M")]),
        Product(productId: "monthly.b", kind: .autoRenewable, priceMilli: 980_000, currency: "JPY", groupId: "g", period: ISOPeriod(months: 1),
                level: 1, promotionalOffers: [free("b.1y", "P1Y"), free("b.6m", "P6M")]),
        Product(productId: "quarterly.c", kind: .autoRenewable, priceMilli: 2_800_000, currency: "JPY", groupId: "g", period: ISOPeriod(months: 3),
                level: 1, introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: ISOPeriod(weeks: 1))),
    ])

    static func at(_ text: String) -> Int64 { Timestamp.parseRFC3339(text)! }
    static func add(_ period: String, _ ms: Int64) -> Int64 { ISOPeriod(period)!.added(to: ms) }

    static let trial: JSONValue = ["type": "introductory", "id": nil]
    static func promo(_ id: String) -> JSONValue { ["type": "promotional", "id": .string(id)] }

    /// Checks the subscription's product, expiry, current offer (`.null` = none) and pending offer id.
    func expect(_ sub: JSONValue, product: String, expires: Int64, offer: JSONValue, pending: String?,
                sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sub["productId"] == .string(product), sourceLocation: sourceLocation)
        #expect(sub["expiresAt"] == .string(Timestamp.rfc3339(expires)), sourceLocation: sourceLocation)
        #expect(sub["offer"] == offer, sourceLocation: sourceLocation)
        if let pending {
            #expect(sub["pendingOffer"]?["id"] == .string(pending), sourceLocation: sourceLocation)
            #expect(sub["pendingOffer"]?["type"] == "promotional", sourceLocation: sourceLocation)
        } else {
            #expect(sub["pendingOffer"] == .null, sourceLocation: sourceLocation)
        }
    }

    func subscribe(_ k: SimulatedKakin, _ product: String) async throws -> String {
        try await k.buy("u1", product)["originalTransactionId"]!.stringValue!
    }

    func promo(_ k: SimulatedKakin, _ ot: String, _ offer: String, on product: String? = nil) async throws {
        var extra: [String: JSONValue] = ["offerId": .string(offer)]
        if let product { extra["productId"] = .string(product) }
        try await k.action(ot, "applyPromotionalOffer", extra)
    }

    @Test func promoOnTheSameProductDuringTheIntroTrialStartsAfterTheTrial() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            let trialEnd = Self.add("P1M", SimulatedKakin.start2026)
            try await k.advance(days: 10)
            try await promo(k, ot, "a.1y")
            expect(try await k.subscription("u1"), product: "monthly.a", expires: trialEnd, offer: Self.trial, pending: "a.1y")
            try await k.advance(to: trialEnd + 86_400_000)
            // Up to 13 months free: the 1-month trial, then the 1-year offer.
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P1Y", trialEnd), offer: Self.promo("a.1y"), pending: nil)
        }
    }

    @Test func promoOnTheSameProductDuringAPaidPeriodStartsAfterThePeriod() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            let paidStart = Self.add("P1M", SimulatedKakin.start2026)
            let paidEnd = Self.add("P1M", paidStart)
            try await k.advance(to: paidStart + 9 * 86_400_000)
            try await promo(k, ot, "a.1y")
            expect(try await k.subscription("u1"), product: "monthly.a", expires: paidEnd, offer: .null, pending: "a.1y")
            try await k.advance(to: paidEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P1Y", paidEnd), offer: Self.promo("a.1y"), pending: nil)
        }
    }

    @Test func promoOnAnotherProductOfTheSameDurationDuringTheTrialCrossgradesNowAndDiscardsTheTrial() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            try await k.advance(days: 10)
            let now = k.nowMs
            try await promo(k, ot, "b.1y", on: "monthly.b")
            expect(try await k.subscription("u1"), product: "monthly.b", expires: Self.add("P1Y", now), offer: Self.promo("b.1y"), pending: nil)
        }
    }

    @Test func promoOnAnotherProductOfTheSameDurationDuringAPaidPeriodCrossgradesNowWithAProratedRefund() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            try await k.advance(to: Self.add("P1M", SimulatedKakin.start2026) + 9 * 86_400_000)
            let now = k.nowMs
            let answer = try await k.action(ot, "applyPromotionalOffer", ["offerId": "b.1y", "productId": "monthly.b"])
            #expect(answer["proratedRefund"] != nil && answer["proratedRefund"] != .null)
            let s = try await k.status("u1")
            expect(s["subscriptions"]!.arrayValue![0], product: "monthly.b", expires: Self.add("P1Y", now), offer: Self.promo("b.1y"), pending: nil)
            #expect(s["status"] == "active")
        }
    }

    @Test func promoOnAnotherDurationDuringTheTrialStartsAfterTheTrial() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "quarterly.c")
            let trialEnd = Self.add("P1W", SimulatedKakin.start2026)
            try await k.advance(days: 2)
            try await promo(k, ot, "b.1y", on: "monthly.b")
            let before = try await k.subscription("u1")
            expect(before, product: "quarterly.c", expires: trialEnd, offer: Self.trial, pending: "b.1y")
            #expect(before["autoRenewProductId"] == "monthly.b")
            try await k.advance(to: trialEnd + 86_400_000)
            // 7 days + 1 year at most.
            expect(try await k.subscription("u1"), product: "monthly.b", expires: Self.add("P1Y", trialEnd), offer: Self.promo("b.1y"), pending: nil)
        }
    }

    @Test func promoOnAnotherDurationDuringAPaidPeriodStartsAfterThePeriod() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "quarterly.c")
            let paidStart = Self.add("P1W", SimulatedKakin.start2026)
            let paidEnd = Self.add("P3M", paidStart)
            try await k.advance(to: paidStart + 10 * 86_400_000)
            try await promo(k, ot, "b.1y", on: "monthly.b")
            expect(try await k.subscription("u1"), product: "quarterly.c", expires: paidEnd, offer: .null, pending: "b.1y")
            try await k.advance(to: paidEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.b", expires: Self.add("P1Y", paidEnd), offer: Self.promo("b.1y"), pending: nil)
        }
    }

    @Test func promoDuringAPromoIsPendingAndALaterOneReplacesIt() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            let trialEnd = Self.add("P1M", SimulatedKakin.start2026)
            try await promo(k, ot, "a.12m")
            try await k.advance(to: trialEnd + 86_400_000)
            let promoEnd = Self.add("P12M", trialEnd)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: promoEnd, offer: Self.promo("a.12m"), pending: nil)
            // A 6-month promo while the 12-month one runs: the current one is kept, the new one waits.
            try await promo(k, ot, "a.6m")
            expect(try await k.subscription("u1"), product: "monthly.a", expires: promoEnd, offer: Self.promo("a.12m"), pending: "a.6m")
            // Another 12 months on top: it REPLACES the pending 6 months (12+12, never 12+6+12).
            try await promo(k, ot, "a.1y")
            expect(try await k.subscription("u1"), product: "monthly.a", expires: promoEnd, offer: Self.promo("a.12m"), pending: "a.1y")
            try await k.advance(to: promoEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P1Y", promoEnd), offer: Self.promo("a.1y"), pending: nil)
        }
    }

    @Test func threePromosInARowKeepOnlyTheLatest() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            try await k.advance(days: 3)
            for offer in ["a.1y", "a.6m", "a.12m"] { try await promo(k, ot, offer) }
            let trialEnd = Self.add("P1M", SimulatedKakin.start2026)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: trialEnd, offer: Self.trial, pending: "a.12m")
            try await k.advance(to: trialEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P12M", trialEnd), offer: Self.promo("a.12m"), pending: nil)
        }
    }

    /// The trap from seed 003: a 1-year offer replaced by a 6-month one left the discarded 1-year date as the
    /// largest `expiresDate` in history. Kakin reads the latest transaction and shows the 6-month date.
    @Test func oneYearOfferReplacedByASixMonthOneShowsTheSixMonthDate() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            let trialEnd = Self.add("P1M", SimulatedKakin.start2026)
            try await promo(k, ot, "a.1y")
            try await k.advance(to: trialEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P1Y", trialEnd), offer: Self.promo("a.1y"), pending: nil)
            try await k.advance(days: 30)
            let now = k.nowMs
            try await promo(k, ot, "b.6m", on: "monthly.b")
            expect(try await k.subscription("u1"), product: "monthly.b", expires: Self.add("P6M", now), offer: Self.promo("b.6m"), pending: nil)
        }
    }

    @Test func pendingOneYearOfferReplacedBySixMonthsRenewsIntoSixMonths() async throws {
        try await SimulatedKakin.with(catalog: Self.catalog) { k in
            let ot = try await subscribe(k, "monthly.a")
            let trialEnd = Self.add("P1M", SimulatedKakin.start2026)
            try await promo(k, ot, "a.1y")
            try await promo(k, ot, "a.6m")
            try await k.advance(to: trialEnd + 86_400_000)
            expect(try await k.subscription("u1"), product: "monthly.a", expires: Self.add("P6M", trialEnd), offer: Self.promo("a.6m"), pending: nil)
        }
    }
}
