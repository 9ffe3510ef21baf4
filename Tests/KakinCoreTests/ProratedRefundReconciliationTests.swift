import KakinCore
import Testing

/// A prorated revocation (API 1.19: `REFUND_PRORATED`, `revocationPercentage` in milliunits) takes back its share of
/// a coin pack, under the wallet policy; a reversal gives back exactly what the refund took.
@Suite struct ProratedRefundReconciliationTests {
    /// coins.500: 500 paid + 50 bonus (free).
    let credited = RefundReconciliation.Ledger(creditedPaid: 500, creditedFree: 50, refunds: 0, reversals: 0, lastRefund: nil)

    @Test func aThirtyPercentRefundTakesBackThirtyPercentOfEachPart() {
        let step = RefundReconciliation.step(credited, revoked: true, revokedShareMilli: 30_000, balance: WalletBalance(paid: 500, free: 50),
                                             policy: WalletPolicy())
        #expect(step == .refund(paid: -150, free: -15, shortfall: 0, number: 1))
    }

    @Test func sharesRoundDownSoNoMoreIsTakenThanWasRefunded() {
        // 33.333% of 500 = 166.665 → 166; of 50 = 16.6665 → 16.
        let step = RefundReconciliation.step(credited, revoked: true, revokedShareMilli: 33_333, balance: WalletBalance(paid: 500, free: 50),
                                             policy: WalletPolicy())
        #expect(step == .refund(paid: -166, free: -16, shortfall: 0, number: 1))
    }

    @Test func aFullShareAndTheDefaultTakeBackEverything() {
        let balance = WalletBalance(paid: 500, free: 50)
        let full = RefundReconciliation.step(credited, revoked: true, revokedShareMilli: 100_000, balance: balance, policy: WalletPolicy())
        #expect(full == .refund(paid: -500, free: -50, shortfall: 0, number: 1))
        #expect(RefundReconciliation.step(credited, revoked: true, balance: balance, policy: WalletPolicy()) == full)
    }

    @Test func theFloorAtZeroPolicyStopsAtTheBalanceAndRecordsTheShortfall() {
        // 400 of the coins are spent already: 100 paid, 50 free left. 50% = 250 paid + 25 free to take back.
        let policy = WalletPolicy(allowNegativeBalance: false)
        let step = RefundReconciliation.step(credited, revoked: true, revokedShareMilli: 50_000, balance: WalletBalance(paid: 100, free: 50),
                                             policy: policy)
        #expect(step == .refund(paid: -100, free: -25, shortfall: 150, number: 1))
        let negative = RefundReconciliation.step(credited, revoked: true, revokedShareMilli: 50_000, balance: WalletBalance(paid: 100, free: 50),
                                                 policy: WalletPolicy())
        #expect(negative == .refund(paid: -250, free: -25, shortfall: 0, number: 1))
    }

    @Test func aReversalGivesBackWhatTheProratedRefundTook() {
        let refunded = RefundReconciliation.Ledger(creditedPaid: 500, creditedFree: 50, refunds: 1, reversals: 0,
                                                   lastRefund: WalletBalance(paid: -150, free: -15))
        #expect(RefundReconciliation.step(refunded, revoked: false, revokedShareMilli: 30_000, balance: WalletBalance(paid: 350, free: 35),
                                          policy: WalletPolicy()) == .reverse(paid: 150, free: 15, number: 1))
        // Revoked again at another share: nothing until the copy says it is no longer revoked (one refund outstanding).
        #expect(RefundReconciliation.step(refunded, revoked: true, revokedShareMilli: 60_000, balance: WalletBalance(paid: 350, free: 35),
                                          policy: WalletPolicy()) == .none)
    }
}
