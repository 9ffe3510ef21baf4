import KakinCore

/// An ISO 4217 currency code with the number of digits of its minor unit. Prices outside the App Store come in
/// minor units (Stripe's `amount_total`, the contract's `price`): 120 JPY is `120`, 9.80 EUR is `980`. Apple's
/// reports want milli-units of the currency, so the exponent matters.
public struct CurrencyCode: Sendable, Hashable, CustomStringConvertible {
    /// Upper case, three letters.
    public let code: String

    /// Accepts three ASCII letters in either case (Stripe writes `jpy`).
    public init?(_ text: String) {
        guard text.utf8.count == 3, text.utf8.allSatisfy({ ($0 >= 65 && $0 <= 90) || ($0 >= 97 && $0 <= 122) }) else { return nil }
        code = text.uppercased()
    }

    public var description: String { code }

    /// Digits after the decimal point (ISO 4217; Stripe's zero-decimal list). Unlisted codes have two.
    public var minorUnitDigits: Int {
        if Self.zeroDecimal.contains(code) { return 0 }
        if Self.threeDecimal.contains(code) { return 3 }
        return 2
    }

    /// `minor` minor units in milli-units of the currency (Apple's report amounts); nil if it overflows.
    public func milliUnits(fromMinor minor: Int64) -> Int64? {
        var factor: Int64 = 1
        for _ in 0..<(3 - minorUnitDigits) { factor *= 10 }
        let (value, overflow) = minor.multipliedReportingOverflow(by: factor)
        return overflow ? nil : value
    }

    static let zeroDecimal: Set<String> = [
        "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "MGA", "PYG", "RWF", "UGX", "VND", "VUV", "XAF", "XOF", "XPF",
    ]
    static let threeDecimal: Set<String> = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"]
}
