/// Coin arithmetic, kept pure so the rules that move money are tested without a database.
/// Paid coins (bought with money, reported to regulators as unused balance) and free coins (bonuses,
/// campaigns) are never mixed: every entry carries both deltas separately.
public struct WalletBalance: Sendable, Hashable {
    public var paid: Int64
    public var free: Int64
    public init(paid: Int64 = 0, free: Int64 = 0) {
        self.paid = paid
        self.free = free
    }
    public var total: Int64 { paid + free }

    public var json: JSONValue { ["paid": .int(paid), "free": .int(free), "total": .int(total)] }

    /// `json` written straight to bytes (members in key order, as it serializes).
    public func write(to w: inout JSONBytesWriter) {
        w.object { w in
            w.member("free", free)
            w.member("paid", paid)
            w.member("total", total)
        }
    }
}

public enum SpendOrder: String, Sendable, CaseIterable {
    /// Free coins are used before paid ones (keeps the paid, refundable balance longest).
    case freeFirst
    case paidFirst
}

public struct WalletPolicy: Sendable, Hashable {
    public var spendOrder: SpendOrder
    /// What a refund of coins already spent does: go negative (true), or stop at zero and record the shortfall.
    public var allowNegativeBalance: Bool
    public init(spendOrder: SpendOrder = .freeFirst, allowNegativeBalance: Bool = true) {
        self.spendOrder = spendOrder
        self.allowNegativeBalance = allowNegativeBalance
    }
}

public enum WalletRules {
    /// How a spend of `amount` splits between paid and free coins, or nil when the balance can't cover it.
    /// Negative parts of a balance (after a refund) count as zero.
    public static func split(amount: Int64, of balance: WalletBalance, order: SpendOrder) -> (paid: Int64, free: Int64)? {
        precondition(amount > 0)
        let paidAvailable = max(0, balance.paid)
        let freeAvailable = max(0, balance.free)
        guard paidAvailable + freeAvailable >= amount else { return nil }
        switch order {
        case .freeFirst:
            let free = min(amount, freeAvailable)
            return (amount - free, free)
        case .paidFirst:
            let paid = min(amount, paidAvailable)
            return (paid, amount - paid)
        }
    }

    /// The debit a refund applies to take back `paid` + `free` coins a purchase credited.
    /// With negative balances disallowed, it stops at zero and reports what could not be taken back.
    public static func refundDebit(paid: Int64, free: Int64, of balance: WalletBalance, policy: WalletPolicy)
        -> (paid: Int64, free: Int64, shortfall: Int64)
    {
        if policy.allowNegativeBalance { return (paid, free, 0) }
        let p = min(paid, max(0, balance.paid))
        let f = min(free, max(0, balance.free))
        return (p, f, (paid - p) + (free - f))
    }

    /// Coins a consumable transaction credits: paid coins × quantity, plus the bonus × quantity as free coins.
    public static func purchaseCredit(product: Product, quantity: Int) -> (paid: Int64, free: Int64) {
        let q = Int64(max(1, quantity))
        return (Int64(product.coins) * q, Int64(product.bonusCoins) * q)
    }
}

/// The kinds of ledger entry (the contract's `kind` values). `import` is a balance moved in from the system a team
/// used before Kakin (`kakin import balances`): either sign, dated when the old system held it.
public enum LedgerEntryKind: String, Sendable, CaseIterable {
    case purchase, spend, grant, refund, refundReversed, adjustment
    case `import`
}

public enum CustomerID {
    /// 1–128 characters of `[A-Za-z0-9._:@-]` (the contract).
    public static func isValid(_ s: String) -> Bool {
        let u = s.utf8
        guard !u.isEmpty, u.count <= lengthMax else { return false }
        for c in u {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "@"), UInt8(ascii: "-"):
                continue
            default: return false
            }
        }
        return true
    }
}

/// Where identifiers come from: random in production, deterministic in tests.
public protocol IDGenerator: Sendable {
    /// A new random lowercase UUID string.
    func uuid() -> String
    /// A new opaque, unique, URL-safe id with the given prefix (e.g. `sp_` for spends).
    func id(prefix: String) -> String
}
