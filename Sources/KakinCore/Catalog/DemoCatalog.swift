/// The catalog local mode starts with, so a newcomer can buy coins and subscribe at once: coin packs, a
/// non-consumable, a non-renewing season pass, and a subscription group with monthly and yearly plans
/// (plus a higher tier for upgrades), an introductory free trial and promotional offers.
extension Catalog {
    public static let demoBundleId = "dev.kakin.demo"
    public static let demoAppAppleId: Int64 = 6_000_000_001

    public static var demo: Catalog {
        let week = ISOPeriod(weeks: 1)
        let month = ISOPeriod(months: 1)
        let year = ISOPeriod(years: 1)
        let promos = [
            SubscriptionOffer(id: "promo.1y.free", type: .promotional, mode: .freeTrial, period: year),
            SubscriptionOffer(id: "promo.6m.free", type: .promotional, mode: .freeTrial, period: ISOPeriod(months: 6)),
            SubscriptionOffer(id: "promo.3m.half", type: .promotional, mode: .payAsYouGo, period: month, numberOfPeriods: 3, priceMilli: 490_000),
        ]
        var yearly = Product(productId: "premium.yearly", kind: .autoRenewable, displayName: "Premium (yearly)", priceMilli: 9_800_000, currency: "JPY",
                             groupId: "premium", period: year, level: 2, familyShareable: true,
                             introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: week),
                             promotionalOffers: [SubscriptionOffer(id: "promo.yearly.1m.free", type: .promotional, mode: .freeTrial, period: month)])
        // Also sold billed monthly with a 12-month commitment: 12 × 880 JPY (Apple: 1 to 1.5 times the upfront price).
        yearly.monthlyBillingWithCommitment = true
        yearly.monthlyCommitmentPriceMilli = 880_000
        return Catalog([
            Product(productId: "coins.100", kind: .consumable, displayName: "100 coins", coins: 100, priceMilli: 120_000, currency: "JPY"),
            Product(productId: "coins.500", kind: .consumable, displayName: "500 coins (+50 bonus)", coins: 500, bonusCoins: 50, priceMilli: 600_000, currency: "JPY"),
            Product(productId: "coins.1200", kind: .consumable, displayName: "1200 coins (+200 bonus)", coins: 1200, bonusCoins: 200, priceMilli: 1_400_000, currency: "JPY"),
            Product(productId: "noads", kind: .nonConsumable, displayName: "No ads", priceMilli: 480_000, currency: "JPY", familyShareable: true),
            Product(productId: "season.pass", kind: .nonRenewing, displayName: "Season pass (90 days)", priceMilli: 980_000, currency: "JPY", durationDays: 90),
            Product(productId: "premium.monthly", kind: .autoRenewable, displayName: "Premium (monthly)", priceMilli: 980_000, currency: "JPY",
                    groupId: "premium", period: month, level: 2, familyShareable: true,
                    introductoryOffer: SubscriptionOffer(id: nil, type: .introductory, mode: .freeTrial, period: week),
                    promotionalOffers: promos),
            yearly,
            Product(productId: "premium.plus.monthly", kind: .autoRenewable, displayName: "Premium Plus (monthly)", priceMilli: 1_480_000, currency: "JPY",
                    groupId: "premium", period: month, level: 1, familyShareable: true),
        ])
    }
}
