/// What a refund of a coin pack takes back, now that Apple refunds a share of a purchase (API 1.19:
/// `revocationType` `REFUND_PRORATED` with `revocationPercentage` in milliunits, beside `REFUND_FULL` and
/// `FAMILY_REVOKE`). Pure: the store applies the debit `revocationDebit` returns, beside `refundDebit`.
///
/// Rounding: each part is `credited × share / 100000` rounded **down**, so Kakin never takes back more
/// coins than the money Apple returned paid for (a fraction of a coin stays with the customer); a share of
/// 100000 takes back exactly what was credited, 0 takes nothing.
public struct RevocationClawback: Sendable, Hashable {
    /// The share Apple refunded, milliunits 0–100000.
    public var shareMilli: Int
    /// The coins the revocation takes back: that share of the paid and of the bonus (free) coins credited.
    public var paid: Int64
    public var free: Int64
    /// What the ledger entry debits under the wallet policy (equal to `paid`/`free` with negative balances
    /// allowed; otherwise stopped at zero, the rest in `shortfall`).
    public var debitPaid: Int64
    public var debitFree: Int64
    public var shortfall: Int64

    public var isProrated: Bool { shareMilli < WalletRules.fullShareMilli }

    public var json: JSONValue {
        ["shareMilli": .int(Int64(shareMilli)), "paid": .int(paid), "free": .int(free),
         "debit": ["paid": .int(debitPaid), "free": .int(debitFree)], "shortfall": .int(shortfall)]
    }
}

extension WalletRules {
    /// 100% in Apple's milliunits.
    public static let fullShareMilli = 100_000

    /// The share of a purchase a revocation refunds, in milliunits: `revocationPercentage` (clamped to
    /// 0–100000) for `REFUND_PRORATED`; everything for `REFUND_FULL`, `FAMILY_REVOKE` (the member loses
    /// the whole purchase) and revocations from before API 1.19, which carry no type. An unknown type with
    /// a percentage is read as prorated (the percentage is what Apple says it refunded).
    public static func revokedShareMilli(type: RevocationType?, percentage: Int?) -> Int {
        if type == .refundFull || type == .familyRevoke { return fullShareMilli }
        guard let percentage else { return fullShareMilli }
        return min(max(percentage, 0), fullShareMilli)
    }

    /// The coins a revocation of `share` milliunits takes back from a purchase that credited `paid` + `free`
    /// coins (each rounded down, see the type), and the debit the wallet policy allows from `balance`.
    public static func revocationDebit(paid: Int64, free: Int64, shareMilli: Int, of balance: WalletBalance,
                                       policy: WalletPolicy) -> RevocationClawback {
        precondition(paid >= 0 && free >= 0, "a purchase credits no negative coins")
        let share = Int64(min(max(shareMilli, 0), fullShareMilli))
        let takePaid = share == Int64(fullShareMilli) ? paid : Milli.share(paid, share, of: Int64(fullShareMilli))
        let takeFree = share == Int64(fullShareMilli) ? free : Milli.share(free, share, of: Int64(fullShareMilli))
        precondition(takePaid <= paid && takeFree <= free, "a clawback never exceeds what was credited")
        let debit = refundDebit(paid: takePaid, free: takeFree, of: balance, policy: policy)
        precondition(debit.paid + debit.free + debit.shortfall == takePaid + takeFree, "debit and shortfall add up to the clawback")
        return RevocationClawback(shareMilli: Int(share), paid: takePaid, free: takeFree, debitPaid: debit.paid,
                                  debitFree: debit.free, shortfall: debit.shortfall)
    }

    /// The same for a revoked transaction: its share from its own revocation fields.
    public static func revocationDebit(of transaction: TransactionPayload, credited: (paid: Int64, free: Int64),
                                       balance: WalletBalance, policy: WalletPolicy) -> RevocationClawback? {
        guard let share = transaction.revokedShareMilli else { return nil }
        return revocationDebit(paid: credited.paid, free: credited.free, shareMilli: share, of: balance, policy: policy)
    }
}
