/// Which paid coins a customer still holds and which are used: the one first-in, first-out engine behind
/// both the share of a purchase that is used (what a CONSUMPTION_REQUEST is told) and the unused paid-coin
/// balance (the Payment Services Act report). Pure: the store reads the ledger, the caller feeds it here.

/// One ledger entry that moved paid coins, in ledger order, with what is known about the coins behind it.
public struct PaidCoinMovement: Sendable, Hashable {
    public var kind: LedgerEntryKind
    /// Signed change of paid coins.
    public var paid: Int64
    /// The entry's reference: the transaction ID for purchases, refunds and reversals.
    public var reference: String
    /// What the customer paid for these coins, in milliunits of `currency` (Apple's `price`); nil when unknown.
    public var priceMilli: Int64?
    public var currency: String?
    /// The app (bundle ID) and product of the transaction behind the entry, when there is one.
    public var bundleId: String?
    public var productId: String?
    /// Where the coins were sold: nil for the App Store, else the provider (`stripe`, `web`, …).
    public var source: String?

    public init(kind: LedgerEntryKind, paid: Int64, reference: String, priceMilli: Int64? = nil, currency: String? = nil,
                bundleId: String? = nil, productId: String? = nil, source: String? = nil) {
        self.source = source
        self.kind = kind
        self.paid = paid
        self.reference = reference
        self.priceMilli = priceMilli
        self.currency = currency
        self.bundleId = bundleId
        self.productId = productId
    }
}

/// One customer's paid coins as lots, replayed from the ledger. The rules:
/// - Only **paid** coins count; free coins (bonuses, grants) never do. Each purchase is a lot (its coins, the
///   price paid for them, the app), queued in ledger order; any other paid credit is a lot with no purchase.
/// - A **debit** (a spend) takes from the oldest lot still holding coins: first in, first out.
/// - A **refund** takes back its own purchase's remaining coins first, then the oldest others. What no lot
///   holds (coins already spent, with negative balances allowed) becomes **debt**.
/// - **Every credit pays the debt first**; the coins that paid it count as used. So while there is debt no
///   lot holds coins, and held coins minus debt is always the ledger's paid balance: nothing is ever valued
///   below zero.
/// - A **reversal undoes its refund**: after paying any debt (like every credit), its coins go back to the
///   lots that refund took them from, each up to what it gave (its own purchase first), so a refund reversed
///   at once leaves every lot as it was, and the purchase keeps its place in the queue and its price. What is
///   left (the refund's debt that later credits paid meanwhile) goes back to the purchase's own lot; beyond
///   that (a reversal without its refund), a new lot at the purchase's unit price.
/// Spends made between a refund and its reversal used the coins held then, and stay where they were.
public struct PaidCoinLots: Sendable, Hashable {
    public struct Lot: Sendable, Hashable {
        /// The purchase's transaction ID (nil for paid coins from anything else).
        public var reference: String?
        public var credited: Int64
        public var remaining: Int64
        /// What the customer paid for the `credited` coins, in milliunits of `currency`; nil when unknown.
        public var priceMilli: Int64?
        public var currency: String?
        public var bundleId: String?
        /// nil for the App Store, else the provider that sold the coins.
        public var source: String?

        public var spent: Int64 { credited - remaining }
        /// The remaining coins' share of the price, rounded down to a milliunit (0 when the price is unknown).
        public var remainingValueMilli: Int64 { Milli.share(priceMilli ?? 0, remaining, of: credited) }

        public init(reference: String?, credited: Int64, remaining: Int64, priceMilli: Int64? = nil, currency: String? = nil,
                    bundleId: String? = nil, source: String? = nil) {
            self.source = source
            self.reference = reference
            self.credited = credited
            self.remaining = remaining
            self.priceMilli = priceMilli
            self.currency = currency
            self.bundleId = bundleId
        }
    }

    /// Coins a refund took from one lot.
    struct Take: Sendable, Hashable {
        var lot: Int
        var coins: Int64
    }

    public private(set) var lots: [Lot] = []
    /// Paid coins owed: debits beyond every lot, not yet paid by a credit.
    public private(set) var debt: Int64 = 0
    /// Every lot before it is empty (where first-in, first-out starts looking).
    private var head = 0
    /// Each purchase's lot.
    private var purchaseLots: [String: Int] = [:]
    /// Per purchase, what each refund not yet reversed took, newest last.
    private var refundTakes: [String: [[Take]]] = [:]

    public init() {}

    /// Replays `movements` (ledger order).
    public init(_ movements: [PaidCoinMovement]) {
        for m in movements { apply(m) }
    }

    /// The lot of one purchase: its paid coins and how many of them are used.
    public func lot(of transactionId: String) -> Lot? { purchaseLots[transactionId].map { lots[$0] } }

    /// The lot of one purchase after `movements` (ledger order).
    public static func lot(of transactionId: String, in movements: [PaidCoinMovement]) -> Lot? {
        PaidCoinLots(movements).lot(of: transactionId)
    }

    /// The lots still holding coins, oldest first.
    public var held: [Lot] { lots[head...].filter { $0.remaining > 0 } }

    /// Paid coins held minus debt: the ledger's paid balance at the same point.
    public var balance: Int64 { lots[head...].reduce(0) { $0 + $1.remaining } - debt }

    /// Applies the next movement of the ledger.
    public mutating func apply(_ m: PaidCoinMovement) {
        if m.paid > 0 {
            switch m.kind {
            case .purchase where purchaseLots[m.reference] == nil:
                purchaseLots[m.reference] = lots.count
                credit(Lot(reference: m.reference, credited: m.paid, remaining: m.paid, priceMilli: m.priceMilli, currency: m.currency,
                           bundleId: m.bundleId, source: m.source))
            case .refundReversed:
                reverse(m)
            default:
                credit(Lot(reference: nil, credited: m.paid, remaining: m.paid, priceMilli: m.priceMilli, currency: m.currency,
                           bundleId: m.bundleId, source: m.source))
            }
        } else if m.paid < 0 {
            let amount = Int64(clamping: m.paid.magnitude)
            if m.kind == .refund {
                refund(amount, of: m.reference)
            } else {
                _ = takeOldest(amount, recording: false)
            }
        }
    }

    // MARK: Rules

    private mutating func credit(_ lot: Lot) {
        var lot = lot
        let covered = min(debt, lot.credited)
        debt -= covered
        lot.remaining = lot.credited - covered
        lots.append(lot)
    }

    private mutating func refund(_ amount: Int64, of transactionId: String) {
        var left = amount
        var takes: [Take] = []
        if let own = purchaseLots[transactionId], lots[own].remaining > 0 {
            let take = min(left, lots[own].remaining)
            lots[own].remaining -= take
            left -= take
            takes.append(Take(lot: own, coins: take))
        }
        takes += takeOldest(left, recording: true)
        refundTakes[transactionId, default: []].append(takes)
    }

    /// Takes `amount` from the oldest lots; what they lack becomes debt. Returns what it took from each lot
    /// when asked to.
    private mutating func takeOldest(_ amount: Int64, recording: Bool) -> [Take] {
        var left = amount
        var takes: [Take] = []
        while left > 0, head < lots.count {
            let take = min(left, lots[head].remaining)
            if take > 0 {
                lots[head].remaining -= take
                left -= take
                if recording { takes.append(Take(lot: head, coins: take)) }
            }
            if lots[head].remaining == 0 { head += 1 }
        }
        debt += left
        return takes
    }

    private mutating func reverse(_ m: PaidCoinMovement) {
        var left = m.paid
        let covered = min(debt, left)
        debt -= covered
        left -= covered
        func giveBack(_ i: Int, upTo coins: Int64) {
            let give = min(left, coins, lots[i].credited - lots[i].remaining)
            guard give > 0 else { return }
            lots[i].remaining += give
            left -= give
            head = min(head, i)
        }
        if let takes = refundTakes[m.reference]?.popLast() {
            if refundTakes[m.reference]?.isEmpty == true { refundTakes[m.reference] = nil }
            for t in takes where left > 0 { giveBack(t.lot, upTo: t.coins) }
        }
        let own = purchaseLots[m.reference]
        if left > 0, let own { giveBack(own, upTo: left) }
        guard left > 0 else { return }
        if let own {
            let p = lots[own]
            lots.append(Lot(reference: nil, credited: left, remaining: left, priceMilli: p.priceMilli.map { Milli.share($0, left, of: p.credited) },
                            currency: p.currency, bundleId: p.bundleId, source: p.source))
        } else {
            lots.append(Lot(reference: nil, credited: left, remaining: left, priceMilli: m.priceMilli, currency: m.currency, bundleId: m.bundleId, source: m.source))
        }
    }
}

/// Exact arithmetic on milliunits (Apple's prices: 1/1000 of the currency's unit).
public enum Milli {
    /// `price × part / whole`, rounded down, exact for any operands (the product is computed at double width);
    /// 0 unless all three are positive, `Int64.max` if the result does not fit.
    public static func share(_ price: Int64, _ part: Int64, of whole: Int64) -> Int64 {
        guard whole > 0, price > 0, part > 0 else { return 0 }
        let product = price.multipliedFullWidth(by: part)
        // The quotient fits in an Int64 exactly when the product is below `whole × 2^63`.
        let limitHigh = whole >> 1
        let limitLow: UInt64 = whole & 1 == 1 ? 1 << 63 : 0
        guard product.high < limitHigh || (product.high == limitHigh && product.low < limitLow) else { return .max }
        return whole.dividingFullWidth(product).quotient
    }
}
