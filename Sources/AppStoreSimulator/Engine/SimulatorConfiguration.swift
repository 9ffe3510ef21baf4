import KakinCore

/// What one simulated App Store sells and how it behaves: the app, its catalog, and the settings Apple
/// leaves to the developer (billing grace period) or to the environment.
public struct SimulatorConfiguration: Sendable {
    public var catalog: Catalog
    public var bundleId: String
    public var appAppleId: Int64
    public var bundleVersion: String
    /// `Sandbox` by default, like data from TestFlight and sandbox accounts.
    public var environment: AppStoreEnvironment
    /// ISO 3166-1 alpha-3 storefront of every purchase (`USA` → storefrontId 143441).
    public var storefront: String
    /// Currency of products whose catalog entry names none.
    public var currency: String
    /// Billing grace period in days (App Store Connect offers 3, 16 or 28), or nil when off (Apple's default).
    public var gracePeriodDays: Int?
    /// How long Apple retries a failed renewal before EXPIRED/BILLING_RETRY: 60 days.
    public var billingRetryDays: Int
    /// Seeds every generated id (transaction ids, order ids, notification UUIDs), so a scenario replays identically.
    public var seed: UInt64

    public init(catalog: Catalog = .demo, bundleId: String = Catalog.demoBundleId, appAppleId: Int64 = Catalog.demoAppAppleId,
                bundleVersion: String = "1.0", environment: AppStoreEnvironment = .sandbox, storefront: String = "USA",
                currency: String? = nil, gracePeriodDays: Int? = nil, billingRetryDays: Int = 60, seed: UInt64 = 1) {
        self.catalog = catalog
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.bundleVersion = bundleVersion
        self.environment = environment
        self.storefront = storefront
        self.currency = currency ?? Storefronts.currency(alpha3: storefront)
        self.gracePeriodDays = gracePeriodDays
        self.billingRetryDays = billingRetryDays
        self.seed = seed
    }

    /// Refuses settings the engine cannot run with (a zero-length period would renew forever at one instant).
    public func validate() throws(ConfigurationError) {
        guard !bundleId.isEmpty, bundleId.count <= 255 else { throw ConfigurationError("bundleId", "must be 1 to 255 characters") }
        guard appAppleId > 0 else { throw ConfigurationError("appAppleId", "must be positive") }
        guard storefront.count == 3, storefront.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
            throw ConfigurationError("storefront", "must be an ISO 3166-1 alpha-3 code such as USA")
        }
        guard (1...60).contains(billingRetryDays) else { throw ConfigurationError("billingRetryDays", "must be 1 to 60") }
        if let g = gracePeriodDays, !(1...28).contains(g) || g >= billingRetryDays {
            throw ConfigurationError("gracePeriodDays", "must be 1 to 28 days and shorter than the billing retry period")
        }
        for p in catalog.sortedProducts where p.kind == .autoRenewable {
            guard let period = p.period, period.approximateDays > 0 else {
                throw ConfigurationError("products.\(p.productId).period", "an auto-renewable product needs a non-empty period")
            }
            for o in [p.introductoryOffer].compactMap({ $0 }) + p.promotionalOffers + p.offerCodes + p.winBackOffers
            where o.period.approximateDays == 0 {
                throw ConfigurationError("products.\(p.productId).offers", "an offer needs a non-empty period")
            }
        }
    }

    func currency(of product: Product) -> String { product.currency ?? currency }
}
