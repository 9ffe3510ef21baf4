@testable import KakinAdmin
import KakinCore
import KakinStorage
import Testing

/// The report's rules on hand-made ledgers (the end-to-end figure through the server is in KakinServerTests).
@Suite struct UnusedBalanceRules {
    static let app = "com.example.app"

    func m(_ customer: String, _ kind: LedgerEntryKind, _ paid: Int64, ref: String, price: Int64? = nil, currency: String? = "JPY",
                    product: String? = "coins") -> (customerId: String, movement: PaidCoinMovement) {
        (customer, PaidCoinMovement(kind: kind, paid: paid, reference: ref, priceMilli: price, currency: price == nil ? nil : currency,
                                    bundleId: Self.app, productId: product))
    }

    func run(_ movements: [(customerId: String, movement: PaidCoinMovement)],
             fallback: @escaping (PaidCoinMovement) -> (priceMilli: Int64, currency: String)? = { _ in nil })
        -> (totals: [UnusedBalanceTotal], lines: [UnusedBalanceLine]) {
        var c = UnusedBalanceComputation(includes: { _ in true }, timeZone: { _ in "Asia/Tokyo" }, fallbackPrice: fallback)
        var lines: [UnusedBalanceLine] = []
        for x in movements {
            c.add(customerId: x.customerId, x.movement)
            lines += c.takeLines()
        }
        let totals = c.finish()
        return (totals, lines + c.takeLines())
    }

    @Test func spendsConsumeTheOldestPurchaseFirstAtItsOwnPrice() {
        let (totals, _) = run([
            m("a", .purchase, 500, ref: "t1", price: 600_000),   // 1.2 yen a coin
            m("a", .purchase, 100, ref: "t2", price: 100_000),   // 1.0 yen a coin (a sale)
            m("a", .spend, -550, ref: "s1"),                      // all of t1, 50 of t2
        ])
        #expect(totals.count == 1)
        #expect(totals[0].unusedPaidCoins == 50)
        #expect(totals[0].value == 50)
        #expect(totals[0].customers == 1)
    }

    @Test func aRefundTakesItsOwnCoinsFirst() {
        let (totals, _) = run([
            m("a", .purchase, 100, ref: "t1", price: 120_000),
            m("a", .purchase, 100, ref: "t2", price: 200_000),
            m("a", .refund, -100, ref: "t2"),                     // t2's own coins go back, t1 stays
        ])
        #expect(totals.first?.unusedPaidCoins == 100)
        #expect(totals.first?.value == 120)
    }

    @Test func aRefundOfSpentCoinsIsADebtTheNextPurchasePaysFirst() {
        let (totals, lines) = run([
            m("b", .purchase, 500, ref: "t1", price: 600_000),
            m("b", .spend, -400, ref: "s1"),
            m("b", .refund, -500, ref: "t1"),                     // 100 left in t1, 400 owed
            m("b", .purchase, 500, ref: "t2", price: 600_000),    // pays the 400 first
        ])
        #expect(totals.first?.unusedPaidCoins == 100)
        #expect(totals.first?.value == 120)
        #expect(lines == [UnusedBalanceLine(bundleId: Self.app, currency: "JPY", customerId: "b", unusedPaidCoins: 100, valueMilli: 120_000)])
    }

    @Test func aReversalGivesThePurchaseItsCoinsBackAtItsPrice() {
        let (totals, _) = run([
            m("d", .purchase, 100, ref: "t1", price: 120_000),
            m("d", .refund, -100, ref: "t1"),
            m("d", .refundReversed, 100, ref: "t1", price: 120_000),
        ])
        #expect(totals.first?.unusedPaidCoins == 100)
        #expect(totals.first?.value == 120)
    }

    /// The report and the refund-request answer read the same engine: a reversed purchase is valued where it
    /// stood, and spends after the reversal take its coins first again.
    @Test func aReversedPurchaseKeepsItsPlaceAsTheRefundRequestAnswerSeesIt() {
        let movements = [
            m("e", .purchase, 100, ref: "t1", price: 100_000),    // ¥1 a coin
            m("e", .purchase, 100, ref: "t2", price: 200_000),    // ¥2 a coin
            m("e", .refund, -100, ref: "t1"),
            m("e", .spend, -50, ref: "s1"),                        // only t2's coins are held
            m("e", .refundReversed, 100, ref: "t1", price: 100_000),
            m("e", .spend, -50, ref: "s2"),                        // t1's, the oldest again
        ]
        let (totals, _) = run(movements)
        #expect(totals.first?.unusedPaidCoins == 100)
        #expect(totals.first?.value == 150)   // 50 of t1 at ¥1, 50 of t2 at ¥2
        #expect(PaidCoinLots.lot(of: "t1", in: movements.map(\.movement))?.spent == 50)
    }

    @Test func freeCoinsNeverCountAndCustomersAreCountedPerCurrency() {
        let (totals, _) = run([
            m("a", .purchase, 100, ref: "t1", price: 120_000),
            m("b", .purchase, 100, ref: "t2", price: 990, currency: "USD"),
            m("c", .purchase, 100, ref: "t3", price: 120_000),
            m("c", .spend, -100, ref: "s1"),
        ])
        #expect(totals.map(\.currency) == ["JPY", "USD"])
        #expect(totals[0].customers == 1)
        #expect(totals[1].valueMilli == 990)
        #expect(totals[1].value == 0)   // 0.99 dollars, rounded down
    }

    @Test func aPurchaseWithoutPriceIsValuedFromTheCatalogOrCountedAsNoCurrency() {
        let movements = [m("a", .purchase, 300, ref: "t1", product: "coins.100"), m("b", .purchase, 10, ref: "t2", product: "unknown")]
        let (totals, _) = run(movements) { mv in mv.productId == "coins.100" ? (120_000 * mv.paid / 100, "JPY") : nil }
        #expect(totals.first { $0.currency == "JPY" }?.value == 360)
        #expect(totals.first { $0.currency == "XXX" }?.unusedPaidCoins == 10)
    }

    @Test func reportingDayEndsAtMidnightInTheAppsTimeZone() {
        #expect(ReportingDay.endMs(of: "2027-03-31", timeZone: "Asia/Tokyo") == Timestamp.parseRFC3339("2027-03-31T15:00:00Z"))
        #expect(ReportingDay.endMs(of: "2027-03-31", timeZone: "UTC") == Timestamp.parseRFC3339("2027-04-01T00:00:00Z"))
        #expect(ReportingDay.endMs(of: "2027-02-30", timeZone: "Asia/Tokyo") == nil)
        #expect(ReportingDay.endMs(of: "2027-03-31", timeZone: "Mars/Olympus") == nil)
        #expect(ReportingDay.latestBaseDate(nowMs: Timestamp.parseRFC3339("2027-05-10T00:00:00Z")!, timeZone: "Asia/Tokyo") == "2027-03-31")
        #expect(ReportingDay.latestBaseDate(nowMs: Timestamp.parseRFC3339("2027-03-31T16:00:00Z")!, timeZone: "Asia/Tokyo") == "2027-03-31")
        #expect(ReportingDay.latestBaseDate(nowMs: Timestamp.parseRFC3339("2027-03-31T14:00:00Z")!, timeZone: "Asia/Tokyo") == "2026-09-30")
    }

    @Test func csvLinesAreExactAndQuotedWhenNeeded() {
        let line = UnusedBalanceLine(bundleId: "a,b", currency: "JPY", customerId: "u1", unusedPaidCoins: 7, valueMilli: 8_400)
        #expect(line.csv == "\"a,b\",JPY,u1,7,8.4,appStore")
        #expect(UnusedBalanceLine.decimal(120_000) == "120")
        #expect(UnusedBalanceLine.decimal(1) == "0.001")
    }
}
