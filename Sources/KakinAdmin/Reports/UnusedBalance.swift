import KakinCore
import KakinStorage

/// The unused paid-coin balance (Japan's Payment Services Act: prepaid instruments outstanding at each base
/// date, March 31 and September 30; above ¥10 million the issuer files a report and deposits half).
///
/// Rules, all pure (the caller feeds ledger movements and the day's end):
/// - Only **paid** coins count; free coins (bonuses, grants) never do.
/// - Each credit of paid coins is a lot valued at what the customer paid for it (Apple's `price`, in
///   milliunits; the catalog's price when a transaction has none). Debits consume lots **first in, first
///   out** per customer, whatever app the lots came from.
/// - A refund takes its coins back from the refunded purchase's own lot first (the coins it cancels), then
///   first in, first out; a reversal credits them again as a new lot at the purchase's unit price.
/// - A debit beyond every lot (a refund of coins already spent, with negative balances allowed) is a debt
///   that the next credits pay off first: the balance is never valued below zero.
/// - A lot with no known price is counted in coins under currency `XXX` (ISO 4217 "no currency") at 0.
/// - Values are summed exactly in milliunits (each lot's remainder rounded down to a milliunit) and the
///   totals rounded down to the currency's major unit.
public struct UnusedBalanceTotal: Sendable, Hashable {
    public var bundleId: String
    public var currency: String
    public var unusedPaidCoins: Int64
    public var valueMilli: Int64
    public var customers: Int64
    /// The reporting time zone the app's day ended in.
    public var timeZone: String

    /// In the currency's major unit, rounded down.
    public var value: Int64 { valueMilli >= 0 ? valueMilli / 1000 : -((-valueMilli + 999) / 1000) }

    public var json: JSONValue {
        ["bundleId": .string(bundleId), "currency": .string(currency), "unusedPaidCoins": .int(unusedPaidCoins), "value": .int(value),
         "customers": .int(customers)]
    }
}

/// One customer's unused paid coins in one app and currency (the auditor's CSV line).
public struct UnusedBalanceLine: Sendable, Hashable {
    public var bundleId: String
    public var currency: String
    public var customerId: String
    public var unusedPaidCoins: Int64
    public var valueMilli: Int64

    public static let csvHeader = "bundleId,currency,customerId,unusedPaidCoins,value"

    /// `value` exact, in major units with up to three decimals (the lines add up to the totals before rounding).
    public var csv: String {
        [bundleId, currency, customerId, String(unusedPaidCoins), UnusedBalanceLine.decimal(valueMilli)].map(CSV.field).joined(separator: ",")
    }

    static func decimal(_ milli: Int64) -> String {
        let sign = milli < 0 ? "-" : ""
        let m = milli.magnitude
        var s = sign + String(m / 1000)
        let frac = m % 1000
        if frac != 0 {
            var f = String(frac)
            f = String(repeating: "0", count: 3 - f.count) + f
            while f.hasSuffix("0") { f.removeLast() }
            s += "." + f
        }
        return s
    }
}

public struct UnusedBalanceReport: Sendable, Hashable {
    public var asOf: String
    /// The reporting time zone; `per app` when the apps' zones differ (each total then names its own).
    public var timeZone: String
    public var totals: [UnusedBalanceTotal]

    /// The contract's shape: `{"asOf", "timeZone", "totals": [{"bundleId", "currency", "unusedPaidCoins", "value", "customers"}]}`.
    public var json: JSONValue {
        ["asOf": .string(asOf), "timeZone": .string(timeZone), "totals": .array(totals.map(\.json))]
    }

    /// The threshold of the Payment Services Act, in yen: above it the issuer reports and deposits half.
    public static let reportingThresholdYen: Int64 = 10_000_000
}

enum CSV {
    /// Quotes a field when it holds a comma, a quote or a line break (RFC 4180). (Customer IDs are
    /// `[A-Za-z0-9._:@-]`, which cannot spell a spreadsheet formula that does anything.)
    static func field(_ s: String) -> String {
        guard s.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return s }
        return "\"" + s.replacingAll("\"", with: "\"\"") + "\""
    }
}

extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self { if c == target { out += replacement } else { out.append(c) } }
        return out
    }
}

/// The first-in, first-out lots of one customer's paid coins.
struct PaidCoinLots {
    struct Lot {
        var coins: Int64
        let originalCoins: Int64
        let priceMilli: Int64
        let currency: String
        let bundleId: String
        let transactionId: String

        var valueMilli: Int64 { Milli.share(priceMilli, coins, of: originalCoins) }
    }

    private(set) var lots: [Lot] = []
    private var head = 0
    /// Paid coins owed (a debit beyond every lot).
    private(set) var debt: Int64 = 0
    /// Price and coins of each purchase, to value a reversal like the purchase it restores.
    private var purchases: [String: (priceMilli: Int64, coins: Int64, currency: String, bundleId: String)] = [:]

    mutating func credit(_ coins: Int64, priceMilli: Int64, currency: String, bundleId: String, transactionId: String) {
        let paysDebt = min(debt, coins)
        debt -= paysDebt
        lots.append(Lot(coins: coins - paysDebt, originalCoins: coins, priceMilli: priceMilli, currency: currency, bundleId: bundleId,
                        transactionId: transactionId))
    }

    mutating func debit(_ coins: Int64, preferring transactionId: String?) {
        var left = coins
        if let transactionId, let i = lots[head...].firstIndex(where: { $0.transactionId == transactionId && $0.coins > 0 }) {
            let take = min(left, lots[i].coins)
            lots[i].coins -= take
            left -= take
        }
        while left > 0, head < lots.count {
            let take = min(left, lots[head].coins)
            lots[head].coins -= take
            left -= take
            if lots[head].coins == 0 { head += 1 }
        }
        debt += left
    }

    /// Applies one movement. `price` values a purchase that carries no price of its own.
    mutating func apply(_ m: ReportPaidMovement, fallbackPrice: (ReportPaidMovement) -> (priceMilli: Int64, currency: String)?) {
        if m.paid > 0 {
            let bundle = m.bundleId ?? ""
            var priced: (priceMilli: Int64, currency: String)?
            if m.kind == LedgerEntryKind.refundReversed.rawValue, let p = purchases[m.reference], p.coins > 0 {
                priced = (Milli.share(p.priceMilli, min(m.paid, p.coins), of: p.coins), p.currency)
            } else if m.kind == LedgerEntryKind.purchase.rawValue || m.kind == LedgerEntryKind.refundReversed.rawValue {
                if let price = m.priceMilli, let currency = m.currency, !currency.isEmpty {
                    priced = (price, currency)
                } else {
                    priced = fallbackPrice(m)
                }
            }
            let (priceMilli, currency) = priced ?? (0, "XXX")
            if m.kind == LedgerEntryKind.purchase.rawValue {
                purchases[m.reference] = (priceMilli, m.paid, currency, bundle)
            }
            credit(m.paid, priceMilli: priceMilli, currency: currency, bundleId: bundle.isEmpty ? (purchases[m.reference]?.bundleId ?? "") : bundle,
                   transactionId: m.reference)
        } else if m.paid < 0 {
            debit(-m.paid, preferring: m.kind == LedgerEntryKind.refund.rawValue ? m.reference : nil)
        }
    }

    /// Unused coins and their value per (app, currency).
    func remaining() -> [UnusedBalanceKey: (coins: Int64, valueMilli: Int64)] {
        var out: [UnusedBalanceKey: (coins: Int64, valueMilli: Int64)] = [:]
        for lot in lots[head...] where lot.coins > 0 {
            let key = UnusedBalanceKey(bundleId: lot.bundleId, currency: lot.currency)
            var v = out[key] ?? (0, 0)
            v.coins += lot.coins
            v.valueMilli += lot.valueMilli
            out[key] = v
        }
        return out
    }

    /// Paid coins left: lots minus debt (equals the ledger's paid balance at the same point).
    var balance: Int64 { lots[head...].reduce(0) { $0 + $1.coins } - debt }
}

struct UnusedBalanceKey: Hashable, Comparable {
    var bundleId: String
    var currency: String
    static func < (a: Self, b: Self) -> Bool { (a.bundleId, a.currency) < (b.bundleId, b.currency) }
}

enum Milli {
    /// `price × part / whole`, rounded down, without overflow in the product (part ≤ whole keeps it ≤ price).
    static func share(_ price: Int64, _ part: Int64, of whole: Int64) -> Int64 {
        guard whole > 0, price > 0, part > 0 else { return 0 }
        let (quotient, _) = whole.dividingFullWidth(price.multipliedFullWidth(by: part))
        return quotient
    }
}

/// Runs the rules over a stream of movements sorted by customer, then ledger order.
public struct UnusedBalanceComputation {
    let includes: (String) -> Bool
    let fallbackPrice: (ReportPaidMovement) -> (priceMilli: Int64, currency: String)?
    let timeZone: (String) -> String
    var totals: [UnusedBalanceKey: UnusedBalanceTotal] = [:]
    var customerId: String?
    var lots = PaidCoinLots()
    var lines: [UnusedBalanceLine] = []

    /// - Parameters:
    ///   - includes: whether lots of this app (bundle ID) are reported by this pass.
    ///   - timeZone: the reporting time zone of an app, shown with its total.
    ///   - fallbackPrice: the price of a purchase that carries none (the catalog's), or nil.
    public init(includes: @escaping (String) -> Bool, timeZone: @escaping (String) -> String,
                fallbackPrice: @escaping (ReportPaidMovement) -> (priceMilli: Int64, currency: String)?) {
        self.includes = includes
        self.timeZone = timeZone
        self.fallbackPrice = fallbackPrice
    }

    /// Adds the next movement (customers in order, each customer's movements in ledger order).
    public mutating func add(_ m: ReportPaidMovement) {
        if m.customerId != customerId { finishCustomer() }
        customerId = m.customerId
        lots.apply(m, fallbackPrice: fallbackPrice)
    }

    /// Per-customer lines finished since the last call (the caller streams them to CSV).
    public mutating func takeLines() -> [UnusedBalanceLine] {
        defer { lines = [] }
        return lines
    }

    mutating func finishCustomer() {
        guard let customerId else { return }
        for (key, v) in lots.remaining().sorted(by: { $0.key < $1.key }) where includes(key.bundleId) {
            var t = totals[key] ?? UnusedBalanceTotal(bundleId: key.bundleId, currency: key.currency, unusedPaidCoins: 0, valueMilli: 0,
                                                      customers: 0, timeZone: timeZone(key.bundleId))
            t.unusedPaidCoins += v.coins
            t.valueMilli += v.valueMilli
            t.customers += 1
            totals[key] = t
            lines.append(UnusedBalanceLine(bundleId: key.bundleId, currency: key.currency, customerId: customerId,
                                           unusedPaidCoins: v.coins, valueMilli: v.valueMilli))
        }
        self.customerId = nil
        lots = PaidCoinLots()
    }

    /// Ends the stream; returns the totals by app and currency.
    public mutating func finish() -> [UnusedBalanceTotal] {
        finishCustomer()
        return totals.sorted { $0.key < $1.key }.map(\.value)
    }
}
