import KakinCore
import KakinExternal
import KakinService

extension Configuration {
    static let externalAppKeys: Set<String> = ["stripe", "externalPurchaseReporting"]

    /// Reads `stripe` and `externalPurchaseReporting` of one app (the secret comes later, in `resolveExternal`).
    static func parseExternal(_ app: StrictObject) throws(ConfigurationError) -> ExternalPurchasesConfiguration {
        var external = ExternalPurchasesConfiguration()
        if let s = try app.object("stripe") {
            try s.check(allowedKeys: ["webhookSecretEnv", "customerIdMetadataKey", "productIdMetadataKey", "toleranceSeconds"])
            let env = try s.requiredString("webhookSecretEnv")
            func key(_ name: String, _ fallback: String) throws(ConfigurationError) -> String {
                let k = try s.string(name) ?? fallback
                guard !k.isEmpty, k.utf8.count <= 40 else { throw ConfigurationError(s.sub(name), "must be 1 to 40 characters (Stripe's metadata key limit)") }
                return k
            }
            external.pendingStripe = .init(
                path: s.path, secretEnv: env,
                customerKey: try key("customerIdMetadataKey", StripeWebhookConfiguration.defaultCustomerIdMetadataKey),
                productKey: try key("productIdMetadataKey", StripeWebhookConfiguration.defaultProductIdMetadataKey),
                toleranceSeconds: try s.int("toleranceSeconds", range: 1...86_400) ?? StripeWebhookConfiguration.defaultToleranceSeconds)
        }
        if let r = try app.object("externalPurchaseReporting") {
            try r.check(allowedKeys: ["enabled", "taxCountry", "taxRatePercent", "acceptedTokenTypes"])
            guard let enabled = try r.bool("enabled") else { throw ConfigurationError(r.sub("enabled"), "is required (true or false)") }
            let country = try r.string("taxCountry")
            if enabled, country == nil {
                throw ConfigurationError(r.sub("taxCountry"), "is required when enabled: the ISO 3166-1 alpha-3 country whose tax the prices include, e.g. JPN")
            }
            let taxCountry = country ?? "JPN"
            guard taxCountry.utf8.count == 3, taxCountry.utf8.allSatisfy({ $0 >= 65 && $0 <= 90 }) else {
                throw ConfigurationError(r.sub("taxCountry"), "must be an ISO 3166-1 alpha-3 code such as JPN")
            }
            let percent = try r.number("taxRatePercent") ?? 0
            guard percent >= 0, percent <= 100 else { throw ConfigurationError(r.sub("taxRatePercent"), "must be from 0 to 100") }
            var types: Set<ExternalPurchaseTokenType>?
            if let list = try r.array("acceptedTokenTypes") {
                types = []
                for (i, v) in list.enumerated() {
                    guard let s = v.stringValue, let t = ExternalPurchaseTokenType.known.first(where: { $0.rawValue == s }) else {
                        throw ConfigurationError(r.sub("acceptedTokenTypes") + "[\(i)]", "must be ACQUISITION, SERVICES, IN_APP or LINK_OUT")
                    }
                    types!.insert(t)
                }
            }
            external.reporting = ExternalPurchaseReportingConfiguration(
                enabled: enabled,
                tax: ExternalPurchaseTaxPolicy(taxCountry: taxCountry, taxRateBasisPoints: Int64((percent * 100).rounded())),
                acceptedTokenTypes: types)
        }
        return external
    }

    /// Fetches each app's Stripe secret from the environment and checks that reporting has a key to sign with.
    static func resolveExternal(_ c: inout Configuration, environment: [String: String]) throws(ConfigurationError) {
        for i in c.apps.indices {
            if let p = c.apps[i].external.pendingStripe {
                let secrets = StripeWebhookConfiguration.secrets(fromEnvironmentValue: environment[p.secretEnv] ?? "")
                guard !secrets.isEmpty, secrets.count <= StripeWebhookConfiguration.secretsMax, secrets.allSatisfy({ $0.count >= 16 }) else {
                    throw ConfigurationError(p.path + ".webhookSecretEnv",
                                             "environment variable \(p.secretEnv) must hold the endpoint's signing secret (whsec_…; up to \(StripeWebhookConfiguration.secretsMax), comma-separated, while rotating)")
                }
                c.apps[i].external.stripe = StripeWebhookConfiguration(
                    webhookSecretEnv: p.secretEnv, secrets: secrets, customerIdMetadataKey: p.customerKey, productIdMetadataKey: p.productKey,
                    toleranceSeconds: p.toleranceSeconds)
                c.apps[i].external.pendingStripe = nil
            }
            if c.apps[i].external.reporting?.enabled == true, c.appStoreServerAPI == nil {
                throw ConfigurationError("apps[\(i)].externalPurchaseReporting.enabled", "needs appStoreServerAPI (its key signs the reports)")
            }
        }
    }
}
