/// The product catalog: what each product ID is and what it grants. Built from the config's `products`,
/// an Xcode `.storekit` file, or the demo catalog; shared by the server and the App Store simulator.
public enum ProductKind: String, Sendable, CaseIterable, Hashable {
    case consumable, nonConsumable, nonRenewing, autoRenewable

    /// The `type` Apple writes in a signed transaction.
    public var appleType: AppleProductType {
        switch self {
        case .consumable: return .consumable
        case .nonConsumable: return .nonConsumable
        case .nonRenewing: return .nonRenewing
        case .autoRenewable: return .autoRenewable
        }
    }

    public init?(appleType: AppleProductType) {
        guard let k = ProductKind.allCases.first(where: { $0.appleType == appleType }) else { return nil }
        self = k
    }

    /// The Get Transaction History `productType` filter value.
    public var historyFilterName: String {
        switch self {
        case .consumable: return "CONSUMABLE"
        case .nonConsumable: return "NON_CONSUMABLE"
        case .nonRenewing: return "NON_RENEWABLE"
        case .autoRenewable: return "AUTO_RENEWABLE"
        }
    }
}

public enum OfferPaymentMode: String, Sendable, Hashable {
    case freeTrial, payAsYouGo, payUpFront

    public var discountType: OfferDiscountType {
        switch self {
        case .freeTrial: return .freeTrial
        case .payAsYouGo: return .payAsYouGo
        case .payUpFront: return .payUpFront
        }
    }
}

/// Who may redeem an offer code (App Store Connect's choice per code offer; Xcode's `codeOffers[].eligibility`).
public enum OfferCodeEligibility: String, Sendable, Hashable, CaseIterable {
    /// Never subscribed in the group.
    case new
    /// Subscribed in the group now.
    case existing
    /// Subscribed in the group before, not now.
    case expired
}

/// An offer of an auto-renewable product: introductory, promotional, offer code or win-back.
public struct SubscriptionOffer: Sendable, Hashable {
    /// nil for introductory offers (Apple sends no `offerIdentifier` for them); an offer code's reference name
    /// (what Apple writes as its `offerIdentifier`).
    public var id: String?
    public var type: AppleOfferType
    public var mode: OfferPaymentMode
    /// One billing period of the offer (pay as you go) or its whole span (free trial, pay up front).
    public var period: ISOPeriod
    public var numberOfPeriods: Int
    /// Price per offer period in milliunits of the product's currency (0 for free trials).
    public var priceMilli: Int64
    /// Offer codes only: who may redeem the code.
    public var codeEligibility: Set<OfferCodeEligibility>
    /// Win-back offers only: Xcode's local `isEligible` switch (false: never offered).
    public var isEligible: Bool

    public init(id: String?, type: AppleOfferType, mode: OfferPaymentMode, period: ISOPeriod, numberOfPeriods: Int = 1, priceMilli: Int64 = 0,
                codeEligibility: Set<OfferCodeEligibility> = Set(OfferCodeEligibility.allCases), isEligible: Bool = true) {
        self.id = id
        self.type = type
        self.mode = mode
        self.period = period
        self.numberOfPeriods = max(1, numberOfPeriods)
        self.priceMilli = priceMilli
        self.codeEligibility = codeEligibility
        self.isEligible = isEligible
    }

    /// The ISO 8601 `offerPeriod` Apple puts in transactions: the total offer duration.
    public var totalPeriod: ISOPeriod { mode == .payAsYouGo ? period.multiplied(by: numberOfPeriods) : period }
}

public struct Product: Sendable, Hashable {
    public var productId: String
    public var kind: ProductKind
    public var displayName: String?
    /// Consumables: paid coins per unit, and free bonus coins per unit.
    public var coins: Int
    public var bonusCoins: Int
    /// Configured price in milliunits of `currency` (Apple's unit), if known.
    public var priceMilli: Int64?
    public var currency: String?
    /// Non-renewing subscriptions: how long one purchase lasts (Apple sends no expiry for them).
    public var durationDays: Int?
    /// Auto-renewables: group, billing period and level (1 = highest tier, as in Xcode's `groupNumber`).
    public var groupId: String?
    public var period: ISOPeriod?
    public var level: Int
    public var familyShareable: Bool
    public var introductoryOffer: SubscriptionOffer?
    public var promotionalOffers: [SubscriptionOffer]
    /// Offer codes (`offerType` 3), each named by its reference name.
    public var offerCodes: [SubscriptionOffer]
    /// Win-back offers (`offerType` 4) for customers who let the subscription lapse.
    public var winBackOffers: [SubscriptionOffer]
    /// A yearly subscription that may also be billed monthly with a 12-month commitment (catalog
    /// `monthlyBillingWithCommitment`; StoreKit's `.billingPlanType(.monthly)` purchase option, iOS 26.4).
    public var monthlyBillingWithCommitment: Bool = false
    /// One monthly payment of such a commitment, milliunits (catalog `monthlyCommitmentPrice`); nil: the
    /// yearly price / 12, rounded up to the milliunit (Apple wants the 12 payments to total at least the
    /// upfront price, and at most 1.5 times it).
    public var monthlyCommitmentPriceMilli: Int64? = nil

    /// What one month of a 12-month commitment costs, when the product offers one.
    public var monthlyCommitmentCharge: Int64? {
        guard monthlyBillingWithCommitment else { return nil }
        if let monthlyCommitmentPriceMilli { return monthlyCommitmentPriceMilli }
        return priceMilli.map { ($0 + 11) / 12 }
    }

    public init(productId: String, kind: ProductKind, displayName: String? = nil, coins: Int = 0, bonusCoins: Int = 0,
                priceMilli: Int64? = nil, currency: String? = nil, durationDays: Int? = nil, groupId: String? = nil,
                period: ISOPeriod? = nil, level: Int = 1, familyShareable: Bool = false,
                introductoryOffer: SubscriptionOffer? = nil, promotionalOffers: [SubscriptionOffer] = [],
                offerCodes: [SubscriptionOffer] = [], winBackOffers: [SubscriptionOffer] = []) {
        self.productId = productId
        self.kind = kind
        self.displayName = displayName
        self.coins = coins
        self.bonusCoins = bonusCoins
        self.priceMilli = priceMilli
        self.currency = currency
        self.durationDays = durationDays
        self.groupId = groupId
        self.period = period
        self.level = level
        self.familyShareable = familyShareable
        self.introductoryOffer = introductoryOffer
        self.promotionalOffers = promotionalOffers
        self.offerCodes = offerCodes
        self.winBackOffers = winBackOffers
    }

    public func promotionalOffer(id: String) -> SubscriptionOffer? { promotionalOffers.first { $0.id == id } }
    public func offerCode(id: String) -> SubscriptionOffer? { offerCodes.first { $0.id == id } }
    public func winBackOffer(id: String) -> SubscriptionOffer? { winBackOffers.first { $0.id == id } }

}

public struct Catalog: Sendable, Hashable {
    public private(set) var products: [String: Product]
    /// Each group's products, sorted by id: derived from `products` whenever they change, since every status read asks
    /// (the eligibility of each group, the plan changes of each subscription).
    private var productsByGroup: [String: [Product]] = [:]
    /// The groups, sorted.
    public private(set) var groupIds: [String] = []

    public init(_ products: [Product] = []) {
        self.products = Dictionary(products.map { ($0.productId, $0) }, uniquingKeysWith: { _, last in last })
        indexGroups()
    }

    public subscript(productId: String) -> Product? { products[productId] }

    /// Adds or replaces products (the config's `products` override a `.storekit` file's entries field by field
    /// at the caller; here a whole product replaces another).
    public mutating func upsert(_ product: Product) {
        products[product.productId] = product
        indexGroups()
    }

    public var sortedProducts: [Product] { products.values.sorted { $0.productId < $1.productId } }

    public func products(inGroup groupId: String) -> [Product] { productsByGroup[groupId] ?? [] }

    private mutating func indexGroups() {
        productsByGroup = Dictionary(grouping: sortedProducts.filter { $0.groupId != nil }, by: { $0.groupId! })
        groupIds = productsByGroup.keys.sorted()
    }
}
