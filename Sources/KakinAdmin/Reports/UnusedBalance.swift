import KakinCore

/// The unused paid-coin balance (Japan's Payment Services Act: prepaid instruments outstanding at each base
/// date, March 31 and September 30; above ¥10 million the issuer files a report and deposits half).
///
/// Rules, all pure (the caller feeds ledger movements and the day's end):
/// - Which paid coins are unused is `PaidCoinLots` (KakinCore), the same first-in, first-out engine that
///   tells Apple how much of a purchase is used: paid coins only, per customer whatever app the lots came
///   from, a refund takes its own coins first, a reversal gives them back where they were, debts are paid by
///   the next credits (see its doc comment).
/// - Each lot is valued at what the customer paid for it (Apple's `price`, in milliunits; the catalog's price
///   when a transaction has none).
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
    /// Where the coins were sold: `appStore`, or the provider (`stripe`, `web`, …) of coins sold outside the App Store.
    public var source: String = "appStore"

    /// In the currency's major unit, rounded down.
    public var value: Int64 { valueMilli >= 0 ? valueMilli / 1000 : -((-valueMilli + 999) / 1000) }

    public var json: JSONValue {
        ["bundleId": .string(bundleId), "currency": .string(currency), "unusedPaidCoins": .int(unusedPaidCoins), "value": .int(value),
         "customers": .int(customers), "source": .string(source)]
    }
}

/// One customer's unused paid coins in one app and currency (the auditor's CSV line).
public struct UnusedBalanceLine: Sendable, Hashable {
    public var bundleId: String
    public var currency: String
    public var customerId: String
    public var unusedPaidCoins: Int64
    public var valueMilli: Int64
    /// `appStore`, or the provider that sold the coins.
    public var source: String = "appStore"

    public static let csvHeader = "bundleId,currency,customerId,unusedPaidCoins,value,source"

    /// `value` exact, in major units with up to three decimals (the lines add up to the totals before rounding).
    public var csv: String {
        [bundleId, currency, customerId, String(unusedPaidCoins), UnusedBalanceLine.decimal(valueMilli), source].map(CSV.field).joined(separator: ",")
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

    /// The contract's shape: `{"asOf", "timeZone", "totals": [{"bundleId", "currency", "unusedPaidCoins", "value", "customers", "source"}]}`.
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

struct UnusedBalanceKey: Hashable, Comparable {
    var bundleId: String
    var currency: String
    /// `appStore` or the provider: coins sold outside the App Store are totalled apart.
    var source: String = "appStore"
    static func < (a: Self, b: Self) -> Bool { (a.bundleId, a.currency, a.source) < (b.bundleId, b.currency, b.source) }
}

/// Runs the rules over a stream of movements sorted by customer, then ledger order.
public struct UnusedBalanceComputation {
    let includes: (String) -> Bool
    let fallbackPrice: (PaidCoinMovement) -> (priceMilli: Int64, currency: String)?
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
                fallbackPrice: @escaping (PaidCoinMovement) -> (priceMilli: Int64, currency: String)?) {
        self.includes = includes
        self.timeZone = timeZone
        self.fallbackPrice = fallbackPrice
    }

    /// Adds the next movement (customers in order, each customer's movements in ledger order).
    public mutating func add(customerId: String, _ movement: PaidCoinMovement) {
        if customerId != self.customerId { finishCustomer() }
        self.customerId = customerId
        var m = movement
        if m.kind == .purchase || m.kind == .refundReversed, m.priceMilli == nil || (m.currency ?? "").isEmpty,
           let fallback = fallbackPrice(m) {
            (m.priceMilli, m.currency) = (fallback.priceMilli, fallback.currency)
        }
        lots.apply(m)
    }

    /// Per-customer lines finished since the last call (the caller streams them to CSV).
    public mutating func takeLines() -> [UnusedBalanceLine] {
        defer { lines = [] }
        return lines
    }

    /// Unused coins and their value per (app, currency) of the current customer.
    func remaining() -> [UnusedBalanceKey: (coins: Int64, valueMilli: Int64)] {
        var out: [UnusedBalanceKey: (coins: Int64, valueMilli: Int64)] = [:]
        for lot in lots.held {
            let priced = lot.priceMilli != nil && !(lot.currency ?? "").isEmpty
            let key = UnusedBalanceKey(bundleId: lot.bundleId ?? "", currency: priced ? lot.currency! : "XXX", source: lot.source ?? "appStore")
            var v = out[key] ?? (0, 0)
            v.coins += lot.remaining
            v.valueMilli += lot.remainingValueMilli
            out[key] = v
        }
        return out
    }

    mutating func finishCustomer() {
        guard let customerId else { return }
        for (key, v) in remaining().sorted(by: { $0.key < $1.key }) where includes(key.bundleId) {
            var t = totals[key] ?? UnusedBalanceTotal(bundleId: key.bundleId, currency: key.currency, unusedPaidCoins: 0, valueMilli: 0,
                                                      customers: 0, timeZone: timeZone(key.bundleId), source: key.source)
            t.unusedPaidCoins += v.coins
            t.valueMilli += v.valueMilli
            t.customers += 1
            totals[key] = t
            lines.append(UnusedBalanceLine(bundleId: key.bundleId, currency: key.currency, customerId: customerId,
                                           unusedPaidCoins: v.coins, valueMilli: v.valueMilli, source: key.source))
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
