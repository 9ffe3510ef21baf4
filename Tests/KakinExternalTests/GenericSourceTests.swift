import KakinCore
import KakinExternal
import Testing

@Suite struct GenericSourceTests {
    let now: Int64 = 1_800_000_000_000
    let base: [String: JSONValue] = [
        "provider": "web", "externalId": "order_2026-0001", "productId": "coins.100", "price": 120, "currency": "jpy",
        "purchasedAt": "2026-11-30T15:00:00Z",
    ]

    func body(_ changes: [String: JSONValue?]) -> JSONValue {
        var o = base
        for (k, v) in changes { o[k] = v }
        return .object(o)
    }

    func error(_ json: JSONValue) -> String? {
        do { _ = try ExternalPurchaseInput(json: json, nowMs: now) } catch { return error.kind.id }
        return nil
    }

    @Test func aValidPurchaseIsReadAndEchoedWithItsSource() throws {
        let p = try ExternalPurchaseInput(json: body(["expiresAt": "2026-12-30T15:00:00.5Z"]), nowMs: now)
        #expect(p.provider == "web" && p.source == "web" && p.externalId == "order_2026-0001" && p.productId == "coins.100")
        #expect(p.price == 120 && p.currency.code == "JPY" && p.currency.minorUnitDigits == 0)
        #expect(p.purchasedAtMs == Timestamp.parseRFC3339("2026-11-30T15:00:00Z"))
        #expect(p.expiresAtMs == Timestamp.parseRFC3339("2026-12-30T15:00:00.500Z"))
        #expect(p.json["currency"] == "JPY" && p.json["source"] == "web" && p.json["expiresAt"] == "2026-12-30T15:00:00.500Z")
    }

    @Test func badFieldsAreRefusedWithKKN3050() {
        let bad: [[String: JSONValue?]] = [
            ["provider": nil], ["provider": "Stripe"], ["provider": "appstore"], ["provider": .string(String(repeating: "p", count: 33))],
            ["externalId": ""], ["externalId": "a/b"], ["externalId": .string(String(repeating: "x", count: 256))],
            ["productId": nil], ["productId": "a\u{1}b"], ["price": -1], ["price": 1.5], ["price": "120"], ["price": 1_000_000_000_001],
            ["currency": "YEN!"], ["currency": "JP"], ["purchasedAt": "2026-11-30 15:00:00"], ["purchasedAt": "1999-12-31T23:59:59Z"],
            ["purchasedAt": "2027-11-30T15:00:00Z"], ["expiresAt": "2026-11-30T15:00:00Z"], ["expiresAt": 5], ["extra": true],
        ]
        for change in bad { #expect(error(body(change)) == "KKN-3050", "\(change)") }
        #expect(error("not an object") == "KKN-3050")
        #expect(error(body(["externalPurchaseToken": "%%%"])) == "KKN-3070")
    }

    @Test func aPurchaseMayNameTheTokenTheAppReceived() throws {
        let token = ExternalPurchaseToken(externalPurchaseId: "SANDBOX_4c4b2b1e-0000-4000-8000-000000000001", appAppleId: 6_000_000_001,
                                          bundleId: "dev.kakin.demo", tokenCreationDateMs: now - 60_000, tokenType: .linkOut,
                                          tokenExpirationDateMs: now + 3_600_000)
        let p = try ExternalPurchaseInput(json: body(["externalPurchaseToken": .string(token.tokenString)]), nowMs: now)
        #expect(p.externalPurchaseToken?.externalPurchaseId == token.externalPurchaseId)
        #expect(p.json["externalPurchaseId"] == .string(token.externalPurchaseId))
    }

    @Test func refundsAddUpToThePriceAndTakeCoinsBackInProportion() throws {
        // 1200 JPY for 500 coins: refund 300, then 300, then the rest.
        let first = try ExternalRefundPlan.requested(300, price: 1200, refundedSoFar: 0, coins: 500)
        #expect(first.amount == 300 && first.refundedTotal == 300 && !first.isFull && first.coinsToClawBack == 125)
        let second = try ExternalRefundPlan.requested(300, price: 1200, refundedSoFar: 300, coins: 500)
        #expect(second.coinsToClawBack == 125)
        let rest = try ExternalRefundPlan.requested(nil, price: 1200, refundedSoFar: 600, coins: 500)
        #expect(rest.amount == 600 && rest.isFull && rest.coinsToClawBack == 250)
        #expect(first.coinsToClawBack + second.coinsToClawBack + rest.coinsToClawBack == 500)
        // Rounding never loses a coin: 3 refunds of 1/3 of 100 JPY for 10 coins take back 3, 3, then 4.
        let a = try ExternalRefundPlan.requested(33, price: 100, refundedSoFar: 0, coins: 10)
        let b = try ExternalRefundPlan.requested(33, price: 100, refundedSoFar: 33, coins: 10)
        let c = try ExternalRefundPlan.requested(nil, price: 100, refundedSoFar: 66, coins: 10)
        #expect([a.coinsToClawBack, b.coinsToClawBack, c.coinsToClawBack] == [3, 3, 4])
    }

    @Test func overRefundsAndRefundsAfterAWholeRefundAreRefused() {
        #expect(throws: KakinError.self) { try ExternalRefundPlan.requested(901, price: 1200, refundedSoFar: 300) }
        #expect(throws: KakinError.self) { try ExternalRefundPlan.requested(0, price: 1200, refundedSoFar: 0) }
        do {
            _ = try ExternalRefundPlan.requested(nil, price: 1200, refundedSoFar: 1200)
            Issue.record("refunded twice")
        } catch { #expect(error.kind == .externalPurchaseAlreadyRefunded) }
    }

    @Test func aProvidersCumulativeRefundIsIdempotentAndOrderFree() {
        // Stripe reports 50 then 120 (full) — or the full one first, then the late partial one.
        let partial = ExternalRefundPlan.reportedTotal(50, price: 120, refundedSoFar: 0, coins: 100)
        let thenFull = ExternalRefundPlan.reportedTotal(120, price: 120, refundedSoFar: 50, coins: 100)
        #expect(partial.coinsToClawBack + thenFull.coinsToClawBack == 100 && thenFull.isFull)
        let fullFirst = ExternalRefundPlan.reportedTotal(120, price: 120, refundedSoFar: 0, coins: 100)
        let latePartial = ExternalRefundPlan.reportedTotal(50, price: 120, refundedSoFar: 120, coins: 100)
        #expect(fullFirst.coinsToClawBack == 100 && latePartial.amount == 0 && latePartial.coinsToClawBack == 0)
        let duplicate = ExternalRefundPlan.reportedTotal(50, price: 120, refundedSoFar: 50, coins: 100)
        #expect(duplicate.amount == 0 && duplicate.coinsToClawBack == 0)
    }

    @Test func refundBodies() throws {
        #expect(try ExternalRefundInput(body: []).amount == nil)
        #expect(try ExternalRefundInput(body: Array("{}".utf8)).amount == nil)
        #expect(try ExternalRefundInput(body: Array(#"{"amount": 40}"#.utf8)).amount == 40)
        for bad in [#"{"amount": 0}"#, #"{"amount": -5}"#, #"{"amount": "40"}"#, #"{"amount": 40, "reason": "x"}"#, "[]"] {
            #expect(throws: KakinError.self) { try ExternalRefundInput(body: Array(bad.utf8)) }
        }
    }

    @Test func currenciesConvertMinorUnitsToAppleMilliUnits() {
        #expect(CurrencyCode("jpy")?.milliUnits(fromMinor: 120) == 120_000)
        #expect(CurrencyCode("EUR")?.milliUnits(fromMinor: 980) == 9_800)
        #expect(CurrencyCode("KWD")?.milliUnits(fromMinor: 1_250) == 1_250)
        #expect(CurrencyCode("usd")?.milliUnits(fromMinor: Int64.max) == nil)
        #expect(CurrencyCode("US") == nil && CurrencyCode("U$D") == nil)
    }
}
