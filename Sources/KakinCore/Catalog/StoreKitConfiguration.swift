/// An Xcode StoreKit configuration file (`.storekit`) read into a `Catalog`. Apple publishes no schema;
/// the reading follows `shared/docs/storekit-file.md` (132 real files): lenient about unknown keys and
/// missing arrays, strict only where a wrong value would silently change what a product is.
public struct StoreKitConfiguration: Sendable {
    public var catalog: Catalog
    /// The file's format version (`{major, minor}`), not Xcode's.
    public var formatMajor: Int
    public var formatMinor: Int
    /// `settings._storefront` (ISO 3166-1 alpha-3); `USA` when absent, as `SKTestSession` defaults.
    public var storefront: String
    /// The currency prices are in. The file holds bare decimals; the currency follows the storefront.
    public var currency: String
    /// `settings._timeRate`: the raw `SKTestSession.TimeRate` number (0 = real time), if present.
    public var timeRate: Int?
    /// `settings._billingGracePeriodEnabled`.
    public var billingGracePeriodEnabled: Bool
    /// `settings._renewalBillingIssuesEnabled`: renewals fail into billing retry.
    public var renewalBillingIssuesEnabled: Bool

    public init(bytes: [UInt8]) throws(ConfigurationError) {
        guard bytes.count <= Self.fileBytesMax else { throw ConfigurationError("", "the .storekit file is larger than 8 MB") }
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            throw ConfigurationError("", "the .storekit file is not valid JSON (\(error.description))")
        }
        try self.init(json: json)
    }

    public init(json: JSONValue) throws(ConfigurationError) {
        guard case .object = json else { throw ConfigurationError("", "a .storekit file must hold a JSON object") }
        guard let version = json["version"], let major = version["major"]?.intValue else {
            throw ConfigurationError("version", "is required (a .storekit file has {\"major\", \"minor\"})")
        }
        guard (1...6).contains(major) else { throw ConfigurationError("version.major", "must be 1 to 6 (got \(major))") }
        formatMajor = major
        formatMinor = version["minor"]?.intValue ?? 0

        let settings = json["settings"]?.objectValue ?? [:]
        let storefront = settings["_storefront"]?.stringValue ?? "USA"
        guard storefront.count == 3, storefront.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
            throw ConfigurationError("settings._storefront", "must be an ISO 3166-1 alpha-3 code such as USA")
        }
        self.storefront = storefront
        currency = Storefronts.currency(alpha3: storefront)
        timeRate = settings["_timeRate"]?.intValue
        billingGracePeriodEnabled = settings["_billingGracePeriodEnabled"]?.boolValue ?? false
        renewalBillingIssuesEnabled = settings["_renewalBillingIssuesEnabled"]?.boolValue ?? false

        var products: [Product] = []
        var seen = Set<String>()
        func add(_ p: Product, path: String) throws(ConfigurationError) {
            guard seen.insert(p.productId).inserted else { throw ConfigurationError(path + ".productID", "duplicates another product") }
            products.append(p)
        }
        for key in ["products", "nonRenewingSubscriptions"] {
            for (i, item) in (try Self.array(json, key, path: key)).enumerated() {
                let path = "\(key)[\(i)]"
                try add(try Self.oneTimeProduct(item, path: path, currency: currency), path: path)
            }
        }
        for (g, group) in (try Self.array(json, "subscriptionGroups", path: "subscriptionGroups")).enumerated() {
            let gpath = "subscriptionGroups[\(g)]"
            guard case .object = group else { throw ConfigurationError(gpath, "must be an object") }
            let groupId = group["id"]?.idString ?? group["name"]?.stringValue
            for (s, sub) in (try Self.array(group, "subscriptions", path: gpath + ".subscriptions")).enumerated() {
                let path = "\(gpath).subscriptions[\(s)]"
                try add(try Self.subscription(sub, path: path, groupId: groupId, currency: currency), path: path)
            }
        }
        catalog = Catalog(products)
    }

    /// Whether a parsed JSON document is a `.storekit` file rather than the contract's products JSON.
    public static func looksLikeStoreKit(_ json: JSONValue) -> Bool {
        guard case .object(let o) = json else { return false }
        return o["version"]?["major"] != nil && (o["subscriptionGroups"] != nil || o["settings"] != nil || o["products"]?.arrayValue?.first?["productID"] != nil)
    }

    static func array(_ json: JSONValue, _ key: String, path: String) throws(ConfigurationError) -> [JSONValue] {
        guard let v = json[key], !v.isNull else { return [] }
        guard let a = v.arrayValue else { throw ConfigurationError(path, "must be an array") }
        return a
    }

    static func productId(_ item: JSONValue, path: String) throws(ConfigurationError) -> String {
        guard case .object = item else { throw ConfigurationError(path, "must be an object") }
        guard let id = item["productID"]?.stringValue, !id.isEmpty, id.count <= 255 else {
            throw ConfigurationError(path + ".productID", "is required (1 to 255 characters)")
        }
        return id
    }

    static func oneTimeProduct(_ item: JSONValue, path: String, currency: String) throws(ConfigurationError) -> Product {
        let id = try productId(item, path: path)
        let kind: ProductKind
        switch item["type"]?.stringValue {
        case "Consumable": kind = .consumable
        case "NonConsumable": kind = .nonConsumable
        case "NonRenewingSubscription": kind = .nonRenewing
        default: throw ConfigurationError(path + ".type", "must be Consumable, NonConsumable or NonRenewingSubscription")
        }
        let price = try displayPrice(item, path: path)
        // The file says nothing about coins or a non-renewing duration: the config's `products` add those.
        return Product(productId: id, kind: kind, displayName: displayName(item), priceMilli: price,
                       currency: price == nil ? nil : currency, familyShareable: kind != .consumable && (item["familyShareable"]?.boolValue ?? false))
    }

    static func subscription(_ item: JSONValue, path: String, groupId: String?, currency: String) throws(ConfigurationError) -> Product {
        let id = try productId(item, path: path)
        guard item["type"]?.stringValue == "RecurringSubscription" else {
            throw ConfigurationError(path + ".type", "must be RecurringSubscription inside a subscription group")
        }
        guard let gid = item["subscriptionGroupID"]?.idString ?? groupId else {
            throw ConfigurationError(path + ".subscriptionGroupID", "is required (or the group's id)")
        }
        guard let periodText = item["recurringSubscriptionPeriod"]?.stringValue, let period = ISOPeriod(periodText) else {
            throw ConfigurationError(path + ".recurringSubscriptionPeriod", "must be an ISO 8601 period such as P1M")
        }
        let level = item["groupNumber"]?.intValue ?? 1
        guard (1...100).contains(level) else { throw ConfigurationError(path + ".groupNumber", "must be 1 to 100") }
        let price = try displayPrice(item, path: path)

        // The singular `introductoryOffer` is the upfront-billed intro; 5.0 files add `introductoryOffers[]`
        // (one per billing plan), from which the upfront one is taken when the singular key is absent.
        // (An explicit `JSONValue?`: a bare `nil` would become JSONValue's own `.null` literal.)
        var introJSON: JSONValue? = item["introductoryOffer"]
        if introJSON?.isNull == true { introJSON = nil }
        var introPath = path + ".introductoryOffer"
        if introJSON == nil, let list = item["introductoryOffers"]?.arrayValue, !list.isEmpty {
            let index = list.firstIndex { ($0["billingPlanType"]?.stringValue ?? "BILLED_UPFRONT") == "BILLED_UPFRONT" } ?? 0
            introJSON = list[index]
            introPath = path + ".introductoryOffers[\(index)]"
        }
        let intro = try introJSON.map { (v: JSONValue) throws(ConfigurationError) in
            try offer(v, path: introPath, type: .introductory)
        }
        var promos: [SubscriptionOffer] = [], codes: [SubscriptionOffer] = [], winBacks: [SubscriptionOffer] = []
        for (i, o) in (try array(item, "adHocOffers", path: path + ".adHocOffers")).enumerated() {
            promos.append(try offer(o, path: "\(path).adHocOffers[\(i)]", type: .promotional))
        }
        for (i, o) in (try array(item, "codeOffers", path: path + ".codeOffers")).enumerated() {
            codes.append(try offer(o, path: "\(path).codeOffers[\(i)]", type: .offerCode))
        }
        for (i, o) in (try array(item, "winbackOffers", path: path + ".winbackOffers")).enumerated() {
            winBacks.append(try offer(o, path: "\(path).winbackOffers[\(i)]", type: .winBack))
        }
        return Product(productId: id, kind: .autoRenewable, displayName: displayName(item), priceMilli: price,
                       currency: price == nil ? nil : currency, groupId: gid, period: period, level: level,
                       familyShareable: item["familyShareable"]?.boolValue ?? false, introductoryOffer: intro, promotionalOffers: promos,
                       offerCodes: codes, winBackOffers: winBacks)
    }

    static func offer(_ item: JSONValue, path: String, type: AppleOfferType) throws(ConfigurationError) -> SubscriptionOffer {
        guard case .object = item else { throw ConfigurationError(path, "must be an object") }
        let mode: OfferPaymentMode
        switch item["paymentMode"]?.stringValue {
        case "free": mode = .freeTrial
        case "payAsYouGo": mode = .payAsYouGo
        case "payUpFront": mode = .payUpFront
        default: throw ConfigurationError(path + ".paymentMode", "must be free, payAsYouGo or payUpFront")
        }
        guard let periodText = item["subscriptionPeriod"]?.stringValue, let period = ISOPeriod(periodText) else {
            throw ConfigurationError(path + ".subscriptionPeriod", "must be an ISO 8601 period such as P1W")
        }
        let count = item["numberOfPeriods"]?.intValue ?? 1
        guard (1...120).contains(count) else { throw ConfigurationError(path + ".numberOfPeriods", "must be 1 to 120") }
        var id: String?
        switch type {
        case .promotional, .winBack:
            guard let offerId = item["offerID"]?.stringValue, !offerId.isEmpty else {
                throw ConfigurationError(path + ".offerID", "is required for a \(type.contractName) offer")
            }
            id = offerId
        case .offerCode:
            // Code offers have no offerID: Apple names them by their reference name in signed data.
            guard let name = item["referenceName"]?.stringValue, !name.isEmpty else {
                throw ConfigurationError(path + ".referenceName", "is required for an offer code")
            }
            id = name
        default:
            break
        }
        var codeEligibility = Set(OfferCodeEligibility.allCases)
        if type == .offerCode, let list = item["eligibility"]?.arrayValue {
            let parsed = Set(list.compactMap { $0.stringValue.flatMap(OfferCodeEligibility.init(rawValue:)) })
            if !parsed.isEmpty { codeEligibility = parsed }
        }
        // A free offer's displayPrice is ignored: some files still carry one (SKHelperDemo's "0.99").
        let price = mode == .freeTrial ? 0 : (try displayPrice(item, path: path) ?? 0)
        return SubscriptionOffer(id: id, type: type, mode: mode, period: period, numberOfPeriods: mode == .payAsYouGo ? count : 1, priceMilli: price,
                                 codeEligibility: codeEligibility, isEligible: item["isEligible"]?.boolValue ?? true)
    }

    static func displayName(_ item: JSONValue) -> String? {
        let locs = item["localizations"]?.arrayValue ?? []
        let preferred = locs.first { $0["locale"]?.stringValue == "en_US" } ?? locs.first
        if let name = preferred?["displayName"]?.stringValue, !name.isEmpty { return name }
        return item["referenceName"]?.stringValue
    }

    /// `displayPrice` is a decimal string without currency; "" (seen in hand-written files) means unknown.
    static func displayPrice(_ item: JSONValue, path: String) throws(ConfigurationError) -> Int64? {
        guard let text = item["displayPrice"]?.stringValue, !text.isEmpty else { return nil }
        guard let milli = decimalToMilli(text) else {
            throw ConfigurationError(path + ".displayPrice", "must be a decimal amount such as 0.99")
        }
        return milli
    }

    /// "4.99" → 4990 without floating point; at most three decimals (Apple's milliunits).
    public static func decimalToMilli(_ text: String) -> Int64? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let whole = parts.first, !whole.isEmpty, whole.count <= 12,
              whole.allSatisfy({ $0.isASCII && $0.isNumber }), let w = Int64(whole) else { return nil }
        var frac: Int64 = 0
        if parts.count == 2 {
            let f = parts[1]
            guard !f.isEmpty, f.count <= 3, f.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            frac = Int64(String((f + "00").prefix(3)))!
        }
        return w * 1000 + frac
    }
}

/// The few storefront facts the App Store puts in signed data: Apple's numeric storefront id and the
/// storefront's currency. Unknown storefronts fall back to USD (prices in a `.storekit` file carry none).
public enum Storefronts {
    static let table: [String: (id: String, currency: String)] = [
        "USA": ("143441", "USD"), "JPN": ("143462", "JPY"), "GBR": ("143444", "GBP"), "DEU": ("143443", "EUR"),
        "FRA": ("143442", "EUR"), "ESP": ("143454", "EUR"), "ITA": ("143450", "EUR"), "CAN": ("143455", "CAD"),
        "AUS": ("143460", "AUD"), "CHN": ("143465", "CNY"), "KOR": ("143466", "KRW"), "BRA": ("143503", "BRL"),
        "MEX": ("143468", "MXN"), "IND": ("143467", "INR"), "NLD": ("143452", "EUR"), "CHE": ("143459", "CHF"),
    ]

    public static func currency(alpha3: String) -> String { table[alpha3]?.currency ?? "USD" }

    /// Apple's `storefrontId` for an alpha-3 storefront, if this table knows it.
    public static func storefrontId(alpha3: String) -> String? { table[alpha3]?.id }
}
