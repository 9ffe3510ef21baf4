/// The contract's `products` list (config file, simulator `--catalog FILE`), read strictly: unknown keys
/// and wrong types are errors that name the offending key path, e.g. `apps[0].products[2].coins`.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var message: String
    public init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Reads a JSON object field by field, remembering the path for error messages and refusing unknown keys.
public struct StrictObject {
    public let path: String
    public let object: [String: JSONValue]

    public init(_ value: JSONValue, path: String) throws(ConfigurationError) {
        guard case .object(let o) = value else { throw ConfigurationError(path, "must be an object") }
        self.object = o
        self.path = path
    }

    public func check(allowedKeys: Set<String>) throws(ConfigurationError) {
        for key in object.keys.sorted() where !allowedKeys.contains(key) {
            throw ConfigurationError(sub(key), "unknown key")
        }
    }

    public func sub(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    public func has(_ key: String) -> Bool { object[key].map { !$0.isNull } ?? false }

    public func value(_ key: String) -> JSONValue? { object[key].flatMap { $0.isNull ? nil : $0 } }

    public func string(_ key: String) throws(ConfigurationError) -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v.stringValue else { throw ConfigurationError(sub(key), "must be a string") }
        return s
    }

    public func requiredString(_ key: String) throws(ConfigurationError) -> String {
        guard let s = try string(key), !s.isEmpty else { throw ConfigurationError(sub(key), "is required") }
        return s
    }

    public func int(_ key: String, range: ClosedRange<Int64>? = nil) throws(ConfigurationError) -> Int64? {
        guard let v = value(key) else { return nil }
        guard case .int(let i) = v else { throw ConfigurationError(sub(key), "must be an integer") }
        if let range, !range.contains(i) {
            throw ConfigurationError(sub(key), "must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return i
    }

    public func number(_ key: String) throws(ConfigurationError) -> Double? {
        guard let v = value(key) else { return nil }
        guard let d = v.doubleValue else { throw ConfigurationError(sub(key), "must be a number") }
        return d
    }

    public func bool(_ key: String) throws(ConfigurationError) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case .bool(let b) = v else { throw ConfigurationError(sub(key), "must be true or false") }
        return b
    }

    public func array(_ key: String) throws(ConfigurationError) -> [JSONValue]? {
        guard let v = value(key) else { return nil }
        guard let a = v.arrayValue else { throw ConfigurationError(sub(key), "must be an array") }
        return a
    }

    public func object(_ key: String) throws(ConfigurationError) -> StrictObject? {
        guard let v = value(key) else { return nil }
        return try StrictObject(v, path: sub(key))
    }
}

extension Product {
    static let productKeys: Set<String> = [
        "productId", "type", "coins", "bonusCoins", "price", "currency", "durationDays", "groupId", "period",
        "level", "displayName", "familyShareable", "offers", "monthlyBillingWithCommitment", "monthlyCommitmentPrice",
    ]
    static let offerKeys: Set<String> = ["id", "type", "mode", "period", "numberOfPeriods", "price", "eligibility"]

    /// One entry of the contract's `products` list. `period`, `level`, `offers` extend the contract's
    /// example so a JSON catalog can describe subscriptions as fully as a `.storekit` file.
    public init(contractJSON value: JSONValue, path: String) throws(ConfigurationError) {
        let o = try StrictObject(value, path: path)
        try o.check(allowedKeys: Product.productKeys)
        let id = try o.requiredString("productId")
        guard id.count <= 255 else { throw ConfigurationError(o.sub("productId"), "is longer than 255 characters") }
        let typeName = try o.requiredString("type")
        guard let kind = ProductKind(rawValue: typeName) else {
            throw ConfigurationError(o.sub("type"), "must be one of consumable, nonConsumable, nonRenewing, autoRenewable")
        }
        let coins = try o.int("coins", range: 0...1_000_000_000) ?? 0
        let bonus = try o.int("bonusCoins", range: 0...1_000_000_000) ?? 0
        if kind == .consumable, coins == 0, bonus == 0 {
            throw ConfigurationError(o.sub("coins"), "is required for a consumable (coins granted per unit)")
        }
        if kind != .consumable, o.has("coins") || o.has("bonusCoins") {
            throw ConfigurationError(o.sub("coins"), "only consumables grant coins")
        }
        var priceMilli: Int64?
        if let p = try o.number("price") {
            guard p >= 0, p < 1e12 else { throw ConfigurationError(o.sub("price"), "must be a non-negative amount") }
            priceMilli = Int64((p * 1000).rounded())
        }
        let currency = try o.string("currency")
        if let c = currency, c.count != 3 || !c.allSatisfy({ $0.isASCII && $0.isUppercase }) {
            throw ConfigurationError(o.sub("currency"), "must be an ISO 4217 code such as JPY or USD")
        }
        let durationDays = try o.int("durationDays", range: 1...36_600)
        if kind == .nonRenewing, durationDays == nil {
            throw ConfigurationError(o.sub("durationDays"), "is required for a nonRenewing product (Apple sends no expiry)")
        }
        if kind != .nonRenewing, durationDays != nil {
            throw ConfigurationError(o.sub("durationDays"), "applies to nonRenewing products only")
        }
        let groupId = try o.string("groupId")
        if kind == .autoRenewable, groupId == nil {
            throw ConfigurationError(o.sub("groupId"), "is required for an autoRenewable product")
        }
        if kind != .autoRenewable, groupId != nil {
            throw ConfigurationError(o.sub("groupId"), "applies to autoRenewable products only")
        }
        var period: ISOPeriod?
        if let p = try o.string("period") {
            guard let parsed = ISOPeriod(p) else { throw ConfigurationError(o.sub("period"), "must be an ISO 8601 period such as P1M") }
            period = parsed
        }
        let level = try o.int("level", range: 1...100) ?? 1
        var intro: SubscriptionOffer?
        var promos: [SubscriptionOffer] = [], codes: [SubscriptionOffer] = [], winBacks: [SubscriptionOffer] = []
        var ids = Set<String>()
        if let offers = try o.array("offers") {
            if kind != .autoRenewable, !offers.isEmpty {
                throw ConfigurationError(o.sub("offers"), "applies to autoRenewable products only")
            }
            for (i, v) in offers.enumerated() {
                let path = o.sub("offers") + "[\(i)]"
                let offer = try Product.offer(contractJSON: v, path: path)
                if let id = offer.id, !ids.insert("\(offer.type.rawValue):\(id)").inserted {
                    throw ConfigurationError(path + ".id", "duplicates another offer of this product")
                }
                switch offer.type {
                case .introductory:
                    if intro != nil { throw ConfigurationError(o.sub("offers"), "has more than one introductory offer") }
                    intro = offer
                case .offerCode: codes.append(offer)
                case .winBack: winBacks.append(offer)
                default: promos.append(offer)
                }
            }
        }
        self.init(productId: id, kind: kind, displayName: try o.string("displayName"), coins: Int(coins), bonusCoins: Int(bonus),
                  priceMilli: priceMilli, currency: currency, durationDays: durationDays.map { Int($0) }, groupId: groupId,
                  period: kind == .autoRenewable ? (period ?? ISOPeriod(months: 1)) : nil, level: Int(level),
                  familyShareable: try o.bool("familyShareable") ?? false, introductoryOffer: intro, promotionalOffers: promos,
                  offerCodes: codes, winBackOffers: winBacks)
        // Apple sells the monthly billing with a 12-month commitment on yearly subscriptions only.
        if try o.bool("monthlyBillingWithCommitment") ?? false {
            guard kind == .autoRenewable, let p = self.period, p.isSameDuration(as: ISOPeriod(years: 1)) else {
                throw ConfigurationError(o.sub("monthlyBillingWithCommitment"), "applies to yearly (P1Y) autoRenewable products only")
            }
            monthlyBillingWithCommitment = true
        }
        if let p = try o.number("monthlyCommitmentPrice") {
            guard monthlyBillingWithCommitment else {
                throw ConfigurationError(o.sub("monthlyCommitmentPrice"), "needs monthlyBillingWithCommitment: true")
            }
            guard p > 0, p < 1e12 else { throw ConfigurationError(o.sub("monthlyCommitmentPrice"), "must be a positive amount") }
            monthlyCommitmentPriceMilli = Int64((p * 1000).rounded())
        }
    }

    static func offer(contractJSON value: JSONValue, path: String) throws(ConfigurationError) -> SubscriptionOffer {
        let o = try StrictObject(value, path: path)
        try o.check(allowedKeys: Product.offerKeys)
        guard let type = AppleOfferType(contractName: try o.requiredString("type")) else {
            throw ConfigurationError(o.sub("type"), "must be introductory, promotional, offerCode or winBack")
        }
        let id = try o.string("id")
        if type != .introductory, id == nil {
            throw ConfigurationError(o.sub("id"), "is required for a \(type.contractName) offer (an offer code's id is its reference name)")
        }
        var eligibility = Set(OfferCodeEligibility.allCases)
        if let list = try o.array("eligibility") {
            guard type == .offerCode else { throw ConfigurationError(o.sub("eligibility"), "applies to offerCode offers only") }
            eligibility = []
            for (i, v) in list.enumerated() {
                guard let e = v.stringValue.flatMap(OfferCodeEligibility.init(rawValue:)) else {
                    throw ConfigurationError(o.sub("eligibility") + "[\(i)]", "must be new, existing or expired")
                }
                eligibility.insert(e)
            }
            if eligibility.isEmpty { throw ConfigurationError(o.sub("eligibility"), "must list at least one of new, existing, expired") }
        }
        guard let mode = OfferPaymentMode(rawValue: try o.requiredString("mode")) else {
            throw ConfigurationError(o.sub("mode"), "must be freeTrial, payAsYouGo or payUpFront")
        }
        guard let period = ISOPeriod(try o.requiredString("period")) else {
            throw ConfigurationError(o.sub("period"), "must be an ISO 8601 period such as P1W")
        }
        let count = try o.int("numberOfPeriods", range: 1...120) ?? 1
        let price = try o.number("price") ?? 0
        return SubscriptionOffer(id: type == .introductory ? nil : id, type: type, mode: mode, period: period,
                                 numberOfPeriods: Int(count), priceMilli: Int64((price * 1000).rounded()), codeEligibility: eligibility)
    }

    /// The product as the contract's catalog JSON (`GET /simulator/v1/products`).
    public var contractJSON: JSONValue {
        var o: [String: JSONValue] = ["productId": .string(productId), "type": .string(kind.rawValue)]
        if kind == .consumable {
            o["coins"] = .int(Int64(coins))
            o["bonusCoins"] = .int(Int64(bonusCoins))
        }
        if let priceMilli { o["price"] = priceMilli % 1000 == 0 ? .int(priceMilli / 1000) : .double(Double(priceMilli) / 1000) }
        if let currency { o["currency"] = .string(currency) }
        if let durationDays { o["durationDays"] = .int(Int64(durationDays)) }
        if let groupId { o["groupId"] = .string(groupId) }
        if let period { o["period"] = .string(period.description) }
        if kind == .autoRenewable { o["level"] = .int(Int64(level)) }
        if monthlyBillingWithCommitment {
            o["monthlyBillingWithCommitment"] = true
            if let m = monthlyCommitmentCharge { o["monthlyCommitmentPrice"] = m % 1000 == 0 ? .int(m / 1000) : .double(Double(m) / 1000) }
        }
        if let displayName { o["displayName"] = .string(displayName) }
        var offers: [JSONValue] = []
        for offer in [introductoryOffer].compactMap({ $0 }) + promotionalOffers + offerCodes + winBackOffers {
            var j: [String: JSONValue] = [
                "type": .string(offer.type.contractName), "mode": .string(offer.mode.rawValue), "period": .string(offer.period.description),
            ]
            if let id = offer.id { j["id"] = .string(id) }
            if offer.numberOfPeriods != 1 { j["numberOfPeriods"] = .int(Int64(offer.numberOfPeriods)) }
            if offer.priceMilli > 0 {
                j["price"] = offer.priceMilli % 1000 == 0 ? .int(offer.priceMilli / 1000) : .double(Double(offer.priceMilli) / 1000)
            }
            if offer.type == .offerCode, offer.codeEligibility.count < OfferCodeEligibility.allCases.count {
                j["eligibility"] = .array(OfferCodeEligibility.allCases.filter(offer.codeEligibility.contains).map { .string($0.rawValue) })
            }
            offers.append(.object(j))
        }
        if !offers.isEmpty { o["offers"] = .array(offers) }
        return .object(o)
    }
}

extension Catalog {
    /// A JSON catalog file: either `{"products": [...]}` (optionally with `bundleId`) or a bare list.
    public init(contractJSON value: JSONValue, path: String = "products") throws(ConfigurationError) {
        let list: [JSONValue]
        if let a = value.arrayValue {
            list = a
        } else if let a = value["products"]?.arrayValue {
            list = a
        } else {
            throw ConfigurationError(path, "must be a list of products or an object with a products list")
        }
        var products: [Product] = []
        var seen = Set<String>()
        for (i, v) in list.enumerated() {
            let p = try Product(contractJSON: v, path: "\(path)[\(i)]")
            guard seen.insert(p.productId).inserted else {
                throw ConfigurationError("\(path)[\(i)].productId", "duplicates another product")
            }
            products.append(p)
        }
        self.init(products)
    }
}
