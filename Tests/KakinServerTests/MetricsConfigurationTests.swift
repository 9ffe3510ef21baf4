import Foundation
import KakinCore
import KakinMetrics
@testable import KakinServer
import Testing

/// `commissionRate` per app and the top-level `exchangeRates` table: parsed, bounded, refused with the key named.
@Suite struct MetricsConfigurationTests {
    static func load(_ json: String) throws(ConfigurationError) -> Configuration {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-metrics-config-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("kakin.json").path
        _ = FileManager.default.createFile(atPath: path, contents: Data(json.utf8))
        defer { try? FileManager.default.removeItem(at: dir) }
        return try Configuration.load(path: path, environment: [:])
    }

    static func config(app: String = "", top: String = "") -> String {
        """
        {"database": "sqlite:k.db", \(top)"apps": [{"bundleId": "b", "environments": ["Sandbox"], \(app)
          "products": [{"productId": "m", "type": "autoRenewable", "groupId": "g", "period": "P1M"}]}]}
        """
    }

    @Test func commissionAndRatesAreReadAndBounded() throws {
        let c = try Self.load(Self.config(app: #""commissionRate": 0.15,"#, top: #""exchangeRates": {"base": "USD", "rates": {"JPY": 0.0066}},"#))
        #expect(c.apps[0].commissionRate == 0.15)
        #expect(c.exchangeRates?.convert(10_000, from: "JPY", to: "USD") == 6_600)
        #expect(try Self.load(Self.config()).apps[0].commissionRate == 0.30)
        #expect(throws: ConfigurationError.self) { try Self.load(Self.config(app: #""commissionRate": 1.5,"#)) }
        #expect(throws: ConfigurationError.self) { try Self.load(Self.config(top: #""exchangeRates": {"base": "usd", "rates": {}},"#)) }
        #expect(throws: ConfigurationError.self) { try Self.load(Self.config(top: #""exchangeRates": {"base": "USD", "rates": {"JPY": -1}},"#)) }
    }
}
