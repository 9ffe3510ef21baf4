import KakinCore

/// Amounts in the contract's minor units (cents; yen), from Apple's milliunits (1 unit = 1000).
public enum CurrencyUnits {
    /// ISO 4217 minor-unit exponents that are not 2 (the currencies the App Store sells in, and a few more).
    static let exponents: [String: Int] = [
        "JPY": 0, "KRW": 0, "CLP": 0, "VND": 0, "ISK": 0, "PYG": 0, "UGX": 0, "XAF": 0, "XOF": 0, "RWF": 0, "KMF": 0,
        "GNF": 0, "DJF": 0, "VUV": 0, "XPF": 0, "BIF": 0, "UYI": 0,
        "BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
    ]

    /// Digits after the decimal point of the currency's minor unit (2 unless ISO 4217 says otherwise).
    public static func exponent(_ currency: String) -> Int { exponents[currency] ?? 2 }

    /// Milliunits → minor units, rounded half away from zero (exact for every price Apple sets).
    public static func minor(milli: Int64, currency: String) -> Int64 {
        let divisor: Int64 = [1000, 100, 10, 1][min(3, max(0, exponent(currency)))]
        guard divisor > 1 else { return milli }
        let q = milli / divisor, r = milli % divisor
        if 2 * abs(r) >= divisor { return q + (milli >= 0 ? 1 : -1) }
        return q
    }
}

/// `exchangeRates`: what one unit of each currency is worth in the table's base currency. Amounts are converted only
/// when a reporting currency is asked for, and only with this table (never with rates Kakin would have to fetch).
public struct ExchangeRates: Sendable, Hashable {
    public var base: String
    /// Currency → value of one major unit in `base` (the base itself is 1).
    public var rates: [String: Double]

    public init(base: String, rates: [String: Double]) {
        self.base = base
        var r = rates
        r[base] = 1
        self.rates = r
    }

    public func knows(_ currency: String) -> Bool { rates[currency] != nil }

    /// `amount` minor units of `from` in minor units of `to`; nil when either is not in the table.
    public func convert(_ amount: Int64, from: String, to: String) -> Int64? {
        if from == to { return amount }
        guard let a = rates[from], let b = rates[to], b > 0 else { return nil }
        let major = Double(amount) / pow10(CurrencyUnits.exponent(from))
        return Int64((major * a / b * pow10(CurrencyUnits.exponent(to))).rounded())
    }

    private func pow10(_ e: Int) -> Double { [1, 10, 100, 1000][min(3, max(0, e))] }
}
