import KakinCore
import KakinExternal

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
    /// `stripe` and `externalPurchaseReporting`.
    public var external = ExternalPurchasesConfiguration()
    /// Apple's 2026 additions: `retentionMessaging`, `serverFinish` (`Apple2026/Apple2026Settings.swift`).
    public var apple2026 = Apple2026AppSettings()
    /// Business numbers: Apple's commission on this app's sales, 0…1 (`commissionRate`; proceeds = net × (1 − rate)).
    public var commissionRate: Double = 0.30

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
    /// Whether the V2 body states the refund Kakin would prefer (`refundPreference`: `none`, the default, or
    /// `fromUsage`: from the ledger, `ConsumptionInformation.suggestedRefundPreference`).
    public var refundPreference: ConsumptionInformation.RefundPreferencePolicy = .none

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

/// Per app: purchases outside the App Store (the contract's "Purchases outside the App Store").
public struct ExternalPurchasesConfiguration: Sendable {
    /// `apps[].stripe`: the Stripe webhook endpoint `POST /v1/webhooks/stripe/{bundleId}`; nil: not served.
    public var stripe: StripeWebhookConfiguration?
    /// `apps[].externalPurchaseReporting`: reporting external purchase tokens to Apple; nil or disabled: tokens
    /// are recorded, nothing is sent.
    public var reporting: ExternalPurchaseReportingConfiguration?
    /// What `parseExternal` read of `stripe` before `resolveExternal` fetched the secret.
    package var pendingStripe: PendingStripe?

    public init(stripe: StripeWebhookConfiguration? = nil, reporting: ExternalPurchaseReportingConfiguration? = nil) {
        self.stripe = stripe
        self.reporting = reporting
    }

    package struct PendingStripe: Sendable {
        package var path: String
        package var secretEnv: String
        package var customerKey: String
        package var productKey: String
        package var toleranceSeconds: Int64

        package init(path: String, secretEnv: String, customerKey: String, productKey: String, toleranceSeconds: Int64) {
            self.path = path
            self.secretEnv = secretEnv
            self.customerKey = customerKey
            self.productKey = productKey
            self.toleranceSeconds = toleranceSeconds
        }
    }
}

/// `apps[].externalPurchaseReporting`: `{"enabled": true, "taxCountry": "JPN", "taxRatePercent": 10,
/// "acceptedTokenTypes"?: ["IN_APP", "LINK_OUT", …]}`. Reports are signed with `appStoreServerAPI`'s key. Apple's
/// reports need the tax the prices include (the contract's `{"enabled"}` plus these two: Kakin cannot know it).
public struct ExternalPurchaseReportingConfiguration: Sendable, Hashable {
    public var enabled: Bool
    public var tax: ExternalPurchaseTaxPolicy
    /// nil: every token type (and tokens without one).
    public var acceptedTokenTypes: Set<ExternalPurchaseTokenType>?

    public init(enabled: Bool, tax: ExternalPurchaseTaxPolicy, acceptedTokenTypes: Set<ExternalPurchaseTokenType>? = nil) {
        self.enabled = enabled
        self.tax = tax
        self.acceptedTokenTypes = acceptedTokenTypes
    }
}
