import Foundation
import KakinCore
import KakinExternal
@testable import KakinServer
import Testing

/// `apps[].stripe` and `apps[].externalPurchaseReporting`: validated once at start, one line naming the key.
@Suite struct ExternalPurchasesConfigTests {
    static let secret = "whsec_0123456789abcdef0123456789abcdef"

    func parse(_ text: String, environment: [String: String] = ["STRIPE_SECRET": secret]) throws -> Configuration {
        try Configuration.parse(try JSONParser.parse(text), baseDirectory: "/tmp", environment: environment)
    }

    func error(_ text: String, environment: [String: String] = ["STRIPE_SECRET": secret]) -> String {
        do {
            _ = try parse(text, environment: environment)
            return "no error"
        } catch let e as ConfigurationError {
            return e.description
        } catch {
            return "\(error)"
        }
    }

    static func config(_ extra: String, top: String = "") -> String {
        #"{"apps": [{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]\#(extra)}]\#(top)}"#
    }

    @Test func stripeIsOffUntilConfiguredThenHasTheContractsDefaults() throws {
        #expect(try parse(Self.config("")).apps[0].external.stripe == nil)
        let stripe = try #require(try parse(Self.config(#", "stripe": {"webhookSecretEnv": "STRIPE_SECRET"}"#)).apps[0].external.stripe)
        #expect(stripe.secrets == [Array(Self.secret.utf8)] && stripe.toleranceSeconds == 300)
        #expect(stripe.customerIdMetadataKey == "kakin_customer_id" && stripe.productIdMetadataKey == "kakin_product_id")
        let custom = try #require(try parse(Self.config(#", "stripe": {"webhookSecretEnv": "STRIPE_SECRET", "customerIdMetadataKey": "uid", "productIdMetadataKey": "sku", "toleranceSeconds": 60}"#),
                                            environment: ["STRIPE_SECRET": "whsec_old_0123456789abcdef, " + Self.secret]).apps[0].external.stripe)
        #expect(custom.customerIdMetadataKey == "uid" && custom.productIdMetadataKey == "sku" && custom.toleranceSeconds == 60 && custom.secrets.count == 2)
    }

    @Test func stripeMistakesNameTheirKey() {
        #expect(error(Self.config(#", "stripe": {}"#)).hasPrefix("apps[0].stripe.webhookSecretEnv: is required"))
        #expect(error(Self.config(#", "stripe": {"webhookSecretEnv": "STRIPE_SECRET"}"#), environment: [:]).hasPrefix("apps[0].stripe.webhookSecretEnv: environment variable STRIPE_SECRET"))
        #expect(error(Self.config(#", "stripe": {"webhookSecretEnv": "STRIPE_SECRET", "toleranceSeconds": 0}"#)).hasPrefix("apps[0].stripe.toleranceSeconds"))
        #expect(error(Self.config(#", "stripe": {"webhookSecretEnv": "STRIPE_SECRET", "secret": "x"}"#)) == "apps[0].stripe.secret: unknown key")
    }

    @Test func reportingNeedsATaxCountryAndTheServerAPIKey() throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-external-\(UUID().uuidString).p8")
        try Data("-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n".utf8).write(to: keyFile)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        let api = #", "appStoreServerAPI": {"issuerId": "i", "keyId": "k", "privateKeyFile": "\#(keyFile.path)"}"#
        let on = try #require(try parse(Self.config(#", "externalPurchaseReporting": {"enabled": true, "taxCountry": "JPN", "taxRatePercent": 10, "acceptedTokenTypes": ["IN_APP", "LINK_OUT"]}"#, top: api))
            .apps[0].external.reporting)
        #expect(on.enabled && on.tax == ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000) && on.acceptedTokenTypes == [.inApp, .linkOut])
        #expect(try parse(Self.config(#", "externalPurchaseReporting": {"enabled": false}"#)).apps[0].external.reporting?.enabled == false)
        #expect(error(Self.config(#", "externalPurchaseReporting": {"enabled": true, "taxCountry": "JPN"}"#))
            == "apps[0].externalPurchaseReporting.enabled: needs appStoreServerAPI (its key signs the reports)")
        #expect(error(Self.config(#", "externalPurchaseReporting": {"enabled": true}"#, top: api)).hasPrefix("apps[0].externalPurchaseReporting.taxCountry: is required"))
        #expect(error(Self.config(#", "externalPurchaseReporting": {"enabled": true, "taxCountry": "JP"}"#, top: api)).hasPrefix("apps[0].externalPurchaseReporting.taxCountry"))
        #expect(error(Self.config(#", "externalPurchaseReporting": {"enabled": true, "taxCountry": "JPN", "taxRatePercent": 101}"#, top: api)).hasPrefix("apps[0].externalPurchaseReporting.taxRatePercent"))
        #expect(error(Self.config(#", "externalPurchaseReporting": {"enabled": true, "taxCountry": "JPN", "acceptedTokenTypes": ["X"]}"#, top: api)).hasPrefix("apps[0].externalPurchaseReporting.acceptedTokenTypes[0]"))
    }
}
