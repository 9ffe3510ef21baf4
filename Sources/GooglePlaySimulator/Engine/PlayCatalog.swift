import KakinCore

/// A product as the Play Console defines it: a one-time product, or a subscription with base plans (and a free
/// trial offer on a base plan).
public struct PlayProduct: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A one-time product the app consumes (coins): buyable again once consumed; quantity 1–10.
        case consumable
        /// A one-time product never consumed (remove ads).
        case nonConsumable
        case subscription
    }

    public var productId: String
    public var kind: Kind
    /// One-time products: the price in micros of `currency`.
    public var priceMicros: Int64
    public var currency: String
    public var basePlans: [PlayBasePlan]

    public init(productId: String, kind: Kind, priceMicros: Int64 = 0, currency: String = "USD", basePlans: [PlayBasePlan] = []) {
        self.productId = productId
        self.kind = kind
        self.priceMicros = priceMicros
        self.currency = currency
        self.basePlans = basePlans
    }

    public func basePlan(_ id: String) -> PlayBasePlan? { basePlans.first { $0.basePlanId == id } }

    /// The control API's `GET /play-simulator/v1/products` item.
    var json: JSONValue {
        var o: [String: JSONValue] = ["productId": .string(productId), "type": .string(kind.rawValue)]
        if kind == .subscription {
            o["basePlans"] = .array(basePlans.map(\.json))
        } else {
            o["price"] = Self.money(priceMicros, currency)
        }
        return .object(o)
    }

    /// Google's `Money`: `currencyCode`, `units` (int64 as a string), `nanos`.
    static func money(_ micros: Int64, _ currency: String) -> JSONValue {
        ["currencyCode": .string(currency), "units": .string(String(micros / 1_000_000)), "nanos": .int((micros % 1_000_000) * 1000)]
    }
}

/// An auto-renewing base plan: its billing period and price, and optionally a free trial offer.
public struct PlayBasePlan: Sendable, Hashable, Codable {
    public var basePlanId: String
    /// ISO 8601 (`P1M`, `P1Y`).
    public var period: String
    public var priceMicros: Int64
    public var currency: String
    /// The free trial offer's id and its period (`P1W`), if the base plan has one.
    public var freeTrialOfferId: String?
    public var freeTrialPeriod: String?

    public init(basePlanId: String, period: String, priceMicros: Int64, currency: String = "USD", freeTrialOfferId: String? = nil,
                freeTrialPeriod: String? = nil) {
        self.basePlanId = basePlanId
        self.period = period
        self.priceMicros = priceMicros
        self.currency = currency
        self.freeTrialOfferId = freeTrialOfferId
        self.freeTrialPeriod = freeTrialPeriod
    }

    var billingPeriod: ISOPeriod { ISOPeriod(period) ?? ISOPeriod(months: 1) }
    var trialPeriod: ISOPeriod? { freeTrialPeriod.flatMap(ISOPeriod.init) }

    var json: JSONValue {
        var o: [String: JSONValue] = ["basePlanId": .string(basePlanId), "period": .string(period),
                                      "price": PlayProduct.money(priceMicros, currency)]
        if let freeTrialOfferId, let freeTrialPeriod {
            o["offers"] = [["offerId": .string(freeTrialOfferId), "phase": "freeTrial", "period": .string(freeTrialPeriod)]]
        }
        return .object(o)
    }
}

/// The Play app the simulator sells and how it behaves.
public struct PlaySimulatorConfiguration: Sendable, Hashable, Codable {
    public var packageName: String
    public var products: [PlayProduct]
    /// Grace period after a failed renewal (Play Console: 0, 3, 7, 14 or 30 days; 7 by default here).
    public var graceDays: Int
    /// Account hold after the grace period (Play's default: 60 days minus the grace period; 30 here).
    public var holdDays: Int
    /// How long a `pause` lasts (Play offers 1 to 3 months).
    public var pauseMonths: Int
    public var regionCode: String
    /// Seed of every generated id and token (same seed + same calls = same ids).
    public var seed: UInt64

    public init(packageName: String, products: [PlayProduct], graceDays: Int = 7, holdDays: Int = 30, pauseMonths: Int = 1,
                regionCode: String = "US", seed: UInt64) {
        self.packageName = packageName
        self.products = products
        self.graceDays = graceDays
        self.holdDays = holdDays
        self.pauseMonths = pauseMonths
        self.regionCode = regionCode
        self.seed = seed
    }

    public func product(_ id: String) -> PlayProduct? { products.first { $0.productId == id } }

    /// Local mode's demo Play app (the contract's): `coins_500`, `coins_1200`, `noads`, and `premium` with base
    /// plans `monthly` (a one-week free trial, offer `free-trial`) and `yearly`.
    public static func demo(seed: UInt64) -> PlaySimulatorConfiguration {
        PlaySimulatorConfiguration(packageName: "dev.kakin.demo", products: [
            PlayProduct(productId: "coins_500", kind: .consumable, priceMicros: 4_990_000),
            PlayProduct(productId: "coins_1200", kind: .consumable, priceMicros: 9_990_000),
            PlayProduct(productId: "noads", kind: .nonConsumable, priceMicros: 2_990_000),
            PlayProduct(productId: "premium", kind: .subscription, basePlans: [
                PlayBasePlan(basePlanId: "monthly", period: "P1M", priceMicros: 4_990_000, freeTrialOfferId: "free-trial", freeTrialPeriod: "P1W"),
                PlayBasePlan(basePlanId: "yearly", period: "P1Y", priceMicros: 49_990_000),
            ]),
        ], seed: seed)
    }

    /// The demo Play app as Kakin's configuration knows it (local mode, `kakin simulate`): the same coin amounts and
    /// `premium` group as the App Store demo.
    public static let demoKakinCatalog = Catalog([
        Product(productId: "coins_500", kind: .consumable, coins: 500, bonusCoins: 50),
        Product(productId: "coins_1200", kind: .consumable, coins: 1200, bonusCoins: 200),
        Product(productId: "noads", kind: .nonConsumable),
        Product(productId: "premium", kind: .autoRenewable, groupId: "premium", period: ISOPeriod(months: 1)),
    ])

    func validate() throws(KakinError) {
        guard !packageName.isEmpty, packageName.count <= 255 else { throw KakinError(.invalidConfiguration, "The Play package name is empty or too long.") }
        for p in products where p.kind == .subscription {
            guard !p.basePlans.isEmpty, p.basePlans.allSatisfy({ ISOPeriod($0.period) != nil }) else {
                throw KakinError(.invalidConfiguration, "Subscription \(p.productId) needs base plans with ISO 8601 periods.")
            }
        }
        guard (0...30).contains(graceDays), (0...60).contains(holdDays), (1...3).contains(pauseMonths) else {
            throw KakinError(.invalidConfiguration, "graceDays must be 0–30, holdDays 0–60, pauseMonths 1–3.")
        }
    }
}
