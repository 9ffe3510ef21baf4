import KakinCore
import KakinMetrics

/// Business numbers' configuration (`docs/metrics.md`): per app `commissionRate` (0…1, default 0.30: Apple's standard
/// rate; 0.15 for the Small Business Program), and at the top `exchangeRates: {"base": "USD", "rates": {"JPY": 0.0066,
/// …}}` (what one unit of each currency is worth in `base`), used only when a reporting currency is asked for.
extension Configuration {
    /// The app keys this file parses.
    static let metricsAppKeys: Set<String> = ["commissionRate"]
    static let metricsTopKeys: Set<String> = ["exchangeRates"]

    static func parseCommissionRate(_ a: StrictObject) throws(ConfigurationError) -> Double {
        guard let rate = try a.number("commissionRate") else { return 0.30 }
        guard rate.isFinite, (0...1).contains(rate) else { throw ConfigurationError(a.sub("commissionRate"), "must be a number from 0 to 1") }
        return rate
    }

    static func isCurrencyCode(_ s: String) -> Bool {
        s.utf8.count == 3 && s.utf8.allSatisfy { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
    }

    static func parseExchangeRates(_ o: StrictObject) throws(ConfigurationError) -> ExchangeRates? {
        guard let e = try o.object("exchangeRates") else { return nil }
        try e.check(allowedKeys: ["base", "rates"])
        let base = try e.requiredString("base")
        guard isCurrencyCode(base) else { throw ConfigurationError(e.sub("base"), "must be an ISO 4217 code such as USD") }
        guard let r = try e.object("rates") else { throw ConfigurationError(e.sub("rates"), "is required") }
        guard r.object.count <= ratesMax else { throw ConfigurationError(e.sub("rates"), "has more than \(ratesMax) currencies") }
        var rates: [String: Double] = [:]
        for (code, _) in r.object {
            guard isCurrencyCode(code) else { throw ConfigurationError(r.sub(code), "is not an ISO 4217 code") }
            guard let v = try r.number(code), v.isFinite, v > 0 else { throw ConfigurationError(r.sub(code), "must be a positive number") }
            rates[code] = v
        }
        return ExchangeRates(base: base, rates: rates)
    }
}
