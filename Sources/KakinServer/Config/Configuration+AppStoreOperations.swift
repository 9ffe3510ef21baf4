import AppStoreSecurity
import KakinCore

/// How Kakin answers an app's CONSUMPTION_REQUESTs (per app, `consumptionInformation`). Apple accepts the
/// information only with the customer's consent; an app sets `customerConsented` when its terms obtain that
/// consent from every customer (the ATT prompt is not consent).
public struct ConsumptionInformationPolicy: Sendable, Hashable {
    /// Answer at all (false: requests are recorded, nothing is sent).
    public var customerConsented: Bool
    /// The app gives a free sample, trial or description of the content before purchase.
    public var sampleContentProvided: Bool
    /// 2: Apple's current endpoint (delivery, consumption share). 1: the deprecated V1 endpoint, whose body also
    /// carries lifetime spend and refunds, account age and play time (consumables only).
    public var version: Int
    /// V2 only: whether Kakin tells Apple the refund the ledger argues for (`refundPreference`); default none.
    public var refundPreference: ConsumptionInformation.RefundPreferencePolicy = .none

    public init(customerConsented: Bool, sampleContentProvided: Bool = false, version: Int = 2) {
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.version = version
    }
}

extension Configuration {
    /// `apps[].consumptionInformation`: `{"customerConsented": bool, "sampleContentProvided"?: bool (false), "version"?: 1|2 (2),
    /// "refundPreference"?: "none"|"fromUsage" (none; V2 only)}`.
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
                throw ConfigurationError(c.sub("refundPreference"), "is sent with version 2 only (V1 has its own refundPreference integers)")
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
