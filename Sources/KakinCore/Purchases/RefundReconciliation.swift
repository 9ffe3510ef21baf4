/// How a credited consumable's coins follow its refunds, decided from the newest signed copy of the transaction,
/// never from which notification came last, so the final balance never depends on arrival order.
///
/// The ledger keeps the purchase entry, then alternating refund and reversal entries: revoked → one refund
/// outstanding (refunds = reversals + 1); not revoked → none outstanding (refunds = reversals). Each step moves
/// the ledger one entry toward that, and each entry has its own effect key (`refund:<id>:<n>`,
/// `refundReversed:<id>:<n>`), so a step runs once however many times the same copy arrives.
public enum RefundReconciliation {
    /// What the purchase credited and what its refunds did so far (read from the ledger).
    public struct Ledger: Sendable, Hashable {
        /// The purchase entry's deltas (≥ 0).
        public var creditedPaid: Int64
        public var creditedFree: Int64
        public var refunds: Int
        public var reversals: Int
        /// The latest refund entry's deltas (≤ 0), which a reversal gives back.
        public var lastRefund: WalletBalance?

        public init(creditedPaid: Int64, creditedFree: Int64, refunds: Int, reversals: Int, lastRefund: WalletBalance?) {
            precondition(creditedPaid >= 0 && creditedFree >= 0, "a purchase entry never debits")
            precondition(refunds == reversals || refunds == reversals + 1, "refunds and reversals alternate")
            self.creditedPaid = creditedPaid
            self.creditedFree = creditedFree
            self.refunds = refunds
            self.reversals = reversals
            self.lastRefund = lastRefund
        }
    }

    public enum Step: Sendable, Hashable {
        /// Nothing to do: the ledger already matches the newest copy.
        case none
        /// Take coins back (deltas ≤ 0); `shortfall` coins could not be taken (balance floored at zero).
        /// `number` is the refund's ordinal for its effect key.
        case refund(paid: Int64, free: Int64, shortfall: Int64, number: Int)
        /// Give the last refund back (deltas ≥ 0); `number` is the reversal's ordinal.
        case reverse(paid: Int64, free: Int64, number: Int)
    }

    /// The next step for a purchase whose newest copy is `revoked` (or not), given the customer's balance now.
    /// - Parameter revokedShareMilli: the share of the purchase Apple refunded, in milliunits (`revocationType`
    ///   `REFUND_PRORATED` with `revocationPercentage`; `WalletRules.revokedShareMilli`): a refund takes back that
    ///   share of the paid and of the free coins credited, each rounded down (`WalletRules.revocationDebit`). A full
    ///   refund (the default, and every revocation before API 1.19) takes back everything credited.
    public static func step(_ ledger: Ledger, revoked: Bool, revokedShareMilli: Int = WalletRules.fullShareMilli, balance: WalletBalance,
                            policy: WalletPolicy) -> Step {
        let outstanding = ledger.refunds - ledger.reversals
        if revoked, outstanding == 0 {
            let clawback = WalletRules.revocationDebit(paid: ledger.creditedPaid, free: ledger.creditedFree, shareMilli: revokedShareMilli,
                                                       of: balance, policy: policy)
            precondition(clawback.debitPaid >= 0 && clawback.debitFree >= 0 && clawback.debitPaid <= ledger.creditedPaid
                         && clawback.debitFree <= ledger.creditedFree, "a refund takes back at most what the purchase credited")
            return .refund(paid: -clawback.debitPaid, free: -clawback.debitFree, shortfall: clawback.shortfall, number: ledger.refunds + 1)
        }
        if !revoked, outstanding == 1, let last = ledger.lastRefund {
            precondition(last.paid <= 0 && last.free <= 0, "a refund entry never credits")
            return .reverse(paid: -last.paid, free: -last.free, number: ledger.reversals + 1)
        }
        return .none
    }
}
