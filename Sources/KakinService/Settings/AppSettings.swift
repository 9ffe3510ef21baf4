import KakinCore

/// One app's settings (the config's `apps[]`), as every use case reads them.
public struct AppSettings: Sendable {
    /// The unused-balance report's day ends in Japan unless an app says otherwise (the Payment Services Act's reports).
    public static let defaultReportingTimeZone = "Asia/Tokyo"

    public var bundleId: String
    public var appAppleId: Int64?
    public var environments: Set<AppStoreEnvironment>
    public var catalog: Catalog
    /// Who may get each promotional offer, by offer ID; an offer without a rule is `currentOrLapsed`.
    public var offerRules: [String: OfferRule]
    /// Whether and how Kakin answers this app's CONSUMPTION_REQUESTs (nil: it does not).
    public var consumptionInformation: ConsumptionInformationPolicy? = nil
    /// Addition (support desk): the IANA time zone whose end of day "as of" means in the unused-balance report.
    public var reportingTimeZone: String

    public init(bundleId: String, appAppleId: Int64?, environments: Set<AppStoreEnvironment>, catalog: Catalog,
                offerRules: [String: OfferRule] = [:], reportingTimeZone: String = AppSettings.defaultReportingTimeZone) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
        self.catalog = catalog
        self.offerRules = offerRules
        self.reportingTimeZone = reportingTimeZone
    }
}

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

    public init(customerConsented: Bool, sampleContentProvided: Bool = false, version: Int = 2) {
        self.customerConsented = customerConsented
        self.sampleContentProvided = sampleContentProvided
        self.version = version
    }
}

/// `appStoreServerAPI`: the key Kakin calls the App Store Server API with.
public struct AppStoreServerAPISettings: Sendable {
    public var issuerId: String
    public var keyId: String
    public var privateKeyPEM: String
    /// nil = Apple's hosts (production first, then sandbox); a URL = that server (e.g. the simulator).
    public var baseURL: String?

    public init(issuerId: String, keyId: String, privateKeyPEM: String, baseURL: String?) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.privateKeyPEM = privateKeyPEM
        self.baseURL = baseURL
    }
}

/// The In-App Purchase key that signs offers (`offerSigning`, or the contract's older `offers` spelling
/// without an issuer); absent = `appStoreServerAPI`'s key.
public struct OfferSigningSettings: Sendable {
    /// Needed for JWS signatures; nil takes `appStoreServerAPI.issuerId`.
    public var issuerId: String?
    public var keyId: String
    public var privateKeyPEM: String

    public init(issuerId: String?, keyId: String, privateKeyPEM: String) {
        self.issuerId = issuerId
        self.keyId = keyId
        self.privateKeyPEM = privateKeyPEM
    }
}
