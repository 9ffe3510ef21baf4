import Foundation
import KakinCore
import Testing

/// The five real `.storekit` files (copied from `shared/storekit-examples` into `Fixtures/`, with their
/// sources) parse into the catalog they describe.
@Suite struct StoreKitConfigurationFiles {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")

    func load(_ name: String) throws -> StoreKitConfiguration {
        let data = try Data(contentsOf: Self.examples.appendingPathComponent(name))
        return try StoreKitConfiguration(bytes: Array(data))
    }

    func offer(_ o: SubscriptionOffer?) -> String? {
        o.map { "\($0.type.contractName):\($0.id ?? "-"):\($0.mode.rawValue):\($0.period):\($0.numberOfPeriods):\($0.priceMilli)" }
    }

    @Test func foodTruckHasAPayAsYouGoIntroAndAPayUpFrontIntro() throws {
        let c = try load("apple-sample-food-truck-Products.storekit")
        #expect(c.formatMajor == 2)
        #expect(c.storefront == "USA")
        #expect(c.currency == "USD")
        #expect(c.timeRate == 0)
        #expect(c.catalog.products.count == 3)
        let history = c.catalog["feature.annualhistory"]!
        #expect(history.kind == .nonConsumable)
        #expect(history.priceMilli == 990)
        #expect(history.displayName == "Full year of history")
        let monthly = c.catalog["socialfeedplus.monthly"]!
        #expect(monthly.kind == .autoRenewable)
        #expect(monthly.groupId == "20947887")
        #expect(monthly.level == 1)
        #expect(monthly.period == ISOPeriod(months: 1))
        #expect(monthly.priceMilli == 4_990)
        #expect(offer(monthly.introductoryOffer) == "introductory:-:payAsYouGo:P1M:3:2490")
        #expect(monthly.introductoryOffer?.totalPeriod == ISOPeriod(months: 3))
        let yearly = c.catalog["socialfeedplus.yearly"]!
        #expect(yearly.period == ISOPeriod(years: 1))
        #expect(offer(yearly.introductoryOffer) == "introductory:-:payUpFront:P3M:1:8990")
        #expect(yearly.promotionalOffers.isEmpty)
    }

    @Test func purchaseTesterHasSixGroupsWithMixedLevelsAndPromotionalOffers() throws {
        let c = try load("RevenueCat-purchases-ios-PurchaseTesterStoreKitConfiguration.storekit")
        #expect(c.formatMajor == 3)
        #expect(c.catalog.groupIds.count == 6)
        #expect(c.catalog["com.revenuecat.purchaseTester.500coins.1.99"]?.kind == .consumable)
        #expect(c.catalog["com.revenuecat.purchaseTester.lifetime.199.99"]?.familyShareable == true)
        #expect(c.catalog["com.revenuecat.purchaseTester.archiveSub.1.20.99"]?.kind == .nonRenewing)
        let group = c.catalog.products(inGroup: "21076983")
        #expect(group.map { "\($0.productId):\($0.level):\($0.period!)" }.sorted()
                == ["purchasetester_199_1w:1:P1W", "purchasetester_699_1m:2:P1M", "purchasetester_7999_1y:3:P1Y"])
        let p1 = c.catalog["P1"]!
        #expect(p1.promotionalOffers.map { offer($0)! } == [
            "promotional:Deema_promo_offer_identifier_3:freeTrial:P3M:1:0",
            "promotional:deema_promo_offer_identifier:freeTrial:P1W:1:0",
            "promotional:deema_promo2_offer_id:payAsYouGo:P1W:3:990",
        ])
        #expect(offer(c.catalog["P2"]!.introductoryOffer) == "introductory:-:payUpFront:P2M:1:2990")
        #expect(c.catalog["test_refname2"]!.period == ISOPeriod(months: 2))
        #expect(offer(c.catalog["com.revenuecat.purchaseTester.annual_39.99.2_week_intro"]!.introductoryOffer) == "introductory:-:freeTrial:P2W:1:0")
    }

    @Test func flutterExampleHasThreeGroupsAndAPayAsYouGoPromo() throws {
        let c = try load("flutter-packages-Configuration.storekit")
        #expect(c.formatMajor == 4)
        #expect(c.catalog.groupIds.sorted() == ["3B74452E", "5D664105", "D0FEE8D8"])
        #expect(c.catalog["consumable"]?.kind == .consumable)
        #expect(c.catalog["upgrade"]?.kind == .nonConsumable)
        #expect(c.catalog["subscription_silver"]!.promotionalOffers.map { offer($0)! } == ["promotional:subscription_silver_big_promo:payAsYouGo:P1W:1:990"])
        #expect(offer(c.catalog["subscription_discounted"]!.introductoryOffer) == "introductory:-:payUpFront:P1M:1:990")
    }

    @Test func skHelperDemoIgnoresTheDisplayPriceOfAFreeTrialAndKeepsItsSettings() throws {
        let c = try load("russell-archer-SKHelperDemo-Products.storekit")
        #expect(c.timeRate == 1002)
        #expect(c.billingGracePeriodEnabled || !c.billingGracePeriodEnabled)
        let gold = c.catalog["com.rarcher.subscription.vip.gold"]!
        let silver = c.catalog["com.rarcher.subscription.vip.silver"]!
        #expect(gold.level == 1)
        #expect(silver.level == 2)
        #expect(gold.groupId == silver.groupId)
        #expect(offer(gold.introductoryOffer) == "introductory:-:freeTrial:P3D:1:0")
    }

    @Test func newestFormatTakesTheUpfrontIntroAndBothPromoModes() throws {
        let c = try load("RevenueCat-purchases-ios-UnitTestsConfiguration.storekit")
        #expect(c.formatMajor == 5)
        let monthly = c.catalog["com.revenuecat.monthly_4.99.1_week_intro"]!
        #expect(offer(monthly.introductoryOffer) == "introductory:-:freeTrial:P3M:1:0")
        #expect(monthly.promotionalOffers.map { offer($0)! } == [
            "promotional:com.revenuecat.monthly_4.99.1_week_intro.year_discount:payUpFront:P1Y:1:40990",
            "promotional:com.revenuecat.monthly_4.99.1_week_intro.pay_as_you_go:payAsYouGo:P1M:2:20150",
        ])
        #expect(c.catalog["com.revenuecat.annual_39.99.2_week_intro"]!.introductoryOffer?.period == ISOPeriod(weeks: 2))
        #expect(c.catalog["com.revenuecat.non_renewable"]?.kind == .nonRenewing)
        #expect(c.catalog.groupIds.sorted() == ["4BB746BD", "7096FF06"])
    }

    @Test func malformedFilesNameTheOffendingKey() throws {
        func error(_ json: String) -> String? {
            do {
                _ = try StoreKitConfiguration(bytes: Array(json.utf8))
                return nil
            } catch {
                return error.path
            }
        }
        #expect(error("{}") == "version")
        #expect(error(#"{"version":{"major":9,"minor":0}}"#) == "version.major")
        #expect(error(#"{"version":{"major":3,"minor":0},"products":[{"productID":"x","type":"Gift"}]}"#) == "products[0].type")
        #expect(error(#"{"version":{"major":3,"minor":0},"products":[{"productID":"x","type":"Consumable","displayPrice":"1,99"}]}"#) == "products[0].displayPrice")
        #expect(error(#"{"version":{"major":3,"minor":0},"subscriptionGroups":[{"id":"g","subscriptions":[{"productID":"s","type":"RecurringSubscription","recurringSubscriptionPeriod":"monthly"}]}]}"#)
                == "subscriptionGroups[0].subscriptions[0].recurringSubscriptionPeriod")
        #expect(error("not json") == "")
        #expect(StoreKitConfiguration.looksLikeStoreKit(try JSONParser.parse(#"{"version":{"major":3},"settings":{}}"#)))
        #expect(!StoreKitConfiguration.looksLikeStoreKit(try JSONParser.parse(#"{"products":[{"productId":"x"}]}"#)))
        #expect(StoreKitConfiguration.decimalToMilli("0.5") == 500)
        #expect(StoreKitConfiguration.decimalToMilli("29") == 29_000)
        #expect(StoreKitConfiguration.decimalToMilli("1.2345") == nil)
    }
}

/// Offer codes and win-back offers of real `.storekit` files.
@Suite struct StoreKitOfferCodesAndWinBacks {
    @Test func codeOffersAreNamedByTheirReferenceNameWithTheirEligibility() throws {
        let c = try StoreKitConfigurationFiles().load("apple-sample-food-truck-Products.storekit")
        let monthly = try #require(c.catalog["socialfeedplus.monthly"])
        #expect(monthly.offerCodes.map(\.id) == ["Free month"])
        #expect(monthly.offerCodes.first?.codeEligibility == [.new, .existing, .expired])
        #expect(monthly.offerCodes.first?.type == .offerCode)
        let yearly = try #require(c.catalog["socialfeedplus.yearly"])
        #expect(yearly.offerCode(id: "Half off first year")?.codeEligibility == [.new])
        #expect(yearly.offerCode(id: "Half off first year")?.priceMilli == 29_990)
    }

    @Test func winBackOffersKeepTheirIdAndEligibilitySwitch() throws {
        let c = try StoreKitConfigurationFiles().load("flutter-packages-Configuration.storekit")
        let offers = c.catalog.sortedProducts.flatMap(\.winBackOffers)
        #expect(offers.map(\.id) == ["subscription_silver_winback_offer"])
        #expect(offers.first?.isEligible == true)
        #expect(offers.first?.mode == .payAsYouGo)
        #expect(offers.first?.period == ISOPeriod(weeks: 1))
    }
}
