import KakinCore
import Testing

/// The one first-in, first-out engine of paid coins: what a refund request is told is used of a purchase, and
/// what the unused-balance report counts as still held, from the same ledger.
@Suite struct PaidCoinLotsTests {
    func buy(_ id: String, _ paid: Int64, yen: Int64? = nil) -> PaidCoinMovement {
        PaidCoinMovement(kind: .purchase, paid: paid, reference: id, priceMilli: yen.map { $0 * 1000 }, currency: yen == nil ? nil : "JPY")
    }
    func spend(_ paid: Int64) -> PaidCoinMovement { PaidCoinMovement(kind: .spend, paid: -paid, reference: "sp") }
    func refund(_ id: String, _ paid: Int64) -> PaidCoinMovement { PaidCoinMovement(kind: .refund, paid: -paid, reference: id) }
    func reverse(_ id: String, _ paid: Int64) -> PaidCoinMovement { PaidCoinMovement(kind: .refundReversed, paid: paid, reference: id) }

    func spent(_ id: String, _ movements: [PaidCoinMovement]) -> Int64? { PaidCoinLots.lot(of: id, in: movements)?.spent }
    func engine(_ movements: [PaidCoinMovement]) -> PaidCoinLots { PaidCoinLots(movements) }
    /// What the held coins are worth, in yen (rounded down per lot to a milliunit, then to yen).
    func heldYen(_ movements: [PaidCoinMovement]) -> Int64 { engine(movements).held.reduce(0) { $0 + $1.remainingValueMilli } / 1000 }

    @Test func spendsUseTheOldestPaidCoinsFirst() {
        let m = [buy("a", 100), buy("b", 500), spend(250)]
        #expect(spent("a", m) == 100)
        #expect(spent("b", m) == 150)
        #expect(spent("c", m) == nil)
    }

    @Test func aRefundTakesBackItsOwnCoinsFirstThenTheOldest() {
        // b's coins partly spent (a's first), then b refunded: its 400 left come back, the 100 already gone
        // come out of what is left elsewhere (c), which then counts as used.
        let m = [buy("a", 100), buy("b", 500), spend(200), buy("c", 300), refund("b", 500)]
        #expect(spent("a", m) == 100)
        #expect(spent("b", m) == 500)
        #expect(spent("c", m) == 100)
    }

    @Test func aReversalPutsBackExactlyWhatItsRefundTook() {
        // Before the refund: a used up, 100 of b's 500 used, c untouched. The reversal restores that state:
        // b is 100 used again (the customer did spend them), c whole again.
        let m = [buy("a", 100, yen: 100), buy("b", 500, yen: 1000), spend(200), buy("c", 300, yen: 900), refund("b", 500), reverse("b", 500)]
        #expect(spent("b", m) == 100)
        #expect(spent("c", m) == 0)
        // 400 of b at ¥2 and 300 of c at ¥3: the same as if b had never been refunded.
        #expect(heldYen(m) == 1700)
        #expect(heldYen([buy("a", 100, yen: 100), buy("b", 500, yen: 1000), spend(200), buy("c", 300, yen: 900)]) == 1700)
        #expect(engine(m).balance == 700)
    }

    @Test func aReversedPurchaseKeepsItsPlaceInTheQueue() {
        // a refunded, 50 spent meanwhile (from b, the only coins held then), a reversed: the next spend takes
        // a's coins first, as it would have without the refund.
        let m = [buy("a", 100, yen: 100), buy("b", 100, yen: 200), refund("a", 100), spend(50), reverse("a", 100), spend(50)]
        #expect(spent("a", m) == 50)
        #expect(spent("b", m) == 50)
        #expect(heldYen(m) == 150)   // 50 of a at ¥1, 50 of b at ¥2
    }

    @Test func aNegativeBalanceIsCoveredByTheNextPurchase() {
        // a bought and spent, then refunded: the balance is -100; b's first 100 coins cover that debt.
        let m = [buy("a", 100), spend(100), refund("a", 100), buy("b", 300)]
        #expect(spent("b", m) == 100)
        #expect(engine(m).held.map(\.remaining) == [200])
        #expect(engine(m).balance == 200)
    }

    @Test func aReversalPaysTheDebtItsRefundMadeFirst() {
        // 400 of a spent, a refunded: 100 come back, 400 owed. Reversed at once: the debt is paid and a holds
        // its 100 again, 400 used — as before the refund.
        let m = [buy("a", 500, yen: 600), spend(400), refund("a", 500)]
        #expect(engine(m).debt == 400)
        #expect(engine(m).balance == -400)
        let reversed = m + [reverse("a", 500)]
        #expect(engine(reversed).debt == 0)
        #expect(spent("a", reversed) == 400)
        #expect(heldYen(reversed) == 120)
    }

    @Test func aDebtPaidMeanwhileGoesBackToThePurchasesOwnLot() {
        // a's refund left 400 owed; b paid 100 of it; the reversal pays the other 300, gives a its 100 back,
        // and the 100 b paid return to a as well (held coins still equal the balance).
        let m = [buy("a", 500, yen: 600), spend(400), refund("a", 500), buy("b", 100, yen: 120), reverse("a", 500)]
        #expect(engine(m).balance == 200)
        #expect(engine(m).held.map(\.remaining) == [200])
        #expect(spent("a", m) == 300)
        #expect(spent("b", m) == 100)
    }

    @Test func otherPaidCreditsAreLotsWithoutAPurchase() {
        let m = [PaidCoinMovement(kind: .adjustment, paid: 50, reference: "adj"), buy("a", 100), spend(100)]
        #expect(spent("a", m) == 50)
        #expect(engine(m).held.map(\.reference) == ["a"])
    }

    @Test func lotValuesRoundDownToAMilliunit() {
        let e = engine([PaidCoinMovement(kind: .purchase, paid: 3, reference: "t", priceMilli: 1000, currency: "JPY"), spend(1)])
        #expect(e.held.first?.remainingValueMilli == 666)
        #expect(e.balance == 2)
        #expect(Milli.share(1, 1, of: 3) == 0)
        #expect(Milli.share(Int64.max, Int64.max, of: Int64.max) == Int64.max)
        #expect(Milli.share(Int64.max, Int64.max, of: 1) == Int64.max, "too large: saturates instead of trapping")
        #expect(Milli.share(100_000, 1, of: 3) == 33_333)
    }
}
