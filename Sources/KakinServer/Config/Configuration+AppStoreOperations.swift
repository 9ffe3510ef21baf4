import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinService

extension Configuration {
    /// `apps[].consumptionInformation`: `{"customerConsented": bool, "sampleContentProvided"?: bool (false), "version"?: 1|2 (2),
    /// "refundPreference"?: "none" | "fromUsage" ("none"; V2 only)}`.
    static func parseConsumptionInformation(_ app: StrictObject) throws(ConfigurationError) -> ConsumptionInformationPolicy? {
        guard let c = try app.object("consumptionInformation") else { return nil }
        try c.check(allowedKeys: ["customerConsented", "sampleContentProvided", "version", "refundPreference"])
        guard let consented = try c.bool("customerConsented") else {
            throw ConfigurationError(c.sub("customerConsented"), "is required: true when the app's terms obtain every customer's consent")
        }
        var policy = ConsumptionInformationPolicy(customerConsented: consented, sampleContentProvided: try c.bool("sampleContentProvided") ?? false,
                                                  version: Int(try c.int("version", range: 1...2) ?? 2))
        if let p = try c.string("refundPreference") {
            guard let parsed = ConsumptionInformation.RefundPreferencePolicy(rawValue: p) else {
                throw ConfigurationError(c.sub("refundPreference"), "must be none or fromUsage")
            }
            guard policy.version == 2 || parsed == .none else {
                throw ConfigurationError(c.sub("refundPreference"), "is sent with the current (version 2) body only")
            }
            policy.refundPreference = parsed
        }
        return policy
    }

    /// `appReceipts`: `{"verifySignature": bool (false), "trustedRoots"?: [DER files] (Apple Inc. Root)}`.
    /// Receipts are only read for their transaction IDs, which are then looked up at Apple, so checking their
    /// signature is optional; when asked, a receipt that does not chain to a trusted root is refused.
    static func parseAppReceipts(_ o: StrictObject, baseDirectory: String) throws(ConfigurationError) -> [[UInt8]]? {
        guard let r = try o.object("appReceipts") else { return nil }
        try r.check(allowedKeys: ["verifySignature", "trustedRoots"])
        let roots = try r.array("trustedRoots")
        guard try r.bool("verifySignature") ?? false else {
            if roots != nil { throw ConfigurationError(r.sub("trustedRoots"), "is only used with verifySignature: true") }
            return nil
        }
        guard let roots else {
            do {
                return [try AppleRootCertificates.appleIncRoot()]
            } catch {
                throw ConfigurationError(r.sub("trustedRoots"), "the bundled Apple Inc. Root is unreadable (\(error))")
            }
        }
        guard !roots.isEmpty else { throw ConfigurationError(r.sub("trustedRoots"), "must list at least one certificate") }
        return try roots.enumerated().map { (i, v) throws(ConfigurationError) in
            let key = r.sub("trustedRoots") + "[\(i)]"
            guard let path = v.stringValue else { throw ConfigurationError(key, "must be a file path") }
            let der = try readFile(path, base: baseDirectory, key: key)
            guard (try? X509Certificate(der: der)) != nil else { throw ConfigurationError(key, "is not a DER certificate") }
            return der
        }
    }
}
