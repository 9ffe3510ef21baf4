import KakinCore
import Testing

/// What Kakin tells Apple about a purchase a customer asks to have refunded (how much of it is used comes from
/// `PaidCoinLots`, tested in `PaidCoinLotsTests`).
@Suite struct ConsumptionInformationTests {
    @Test func milliPercentageIsAppleMilliunitsRoundedDown() {
        #expect(ConsumptionInformation.milliPercentage(used: 100, of: 500) == 20_000)
        #expect(ConsumptionInformation.milliPercentage(used: 1, of: 3) == 33_333)
        #expect(ConsumptionInformation.milliPercentage(used: 0, of: 500) == 0)
        #expect(ConsumptionInformation.milliPercentage(used: 700, of: 500) == 100_000)
        #expect(ConsumptionInformation.milliPercentage(used: 5, of: 0) == 0)
    }

    @Test func dollarAndTenureRangesFollowApplesTables() {
        #expect(ConsumptionInformation.dollarRange([:]) == 1)
        #expect(ConsumptionInformation.dollarRange(["USD": 0]) == 1)
        #expect(ConsumptionInformation.dollarRange(["USD": 10]) == 2)
        #expect(ConsumptionInformation.dollarRange(["USD": 49_990]) == 2)
        #expect(ConsumptionInformation.dollarRange(["USD": 50_000]) == 3)
        #expect(ConsumptionInformation.dollarRange(["USD": 100_000]) == 4)
        #expect(ConsumptionInformation.dollarRange(["USD": 999_990]) == 5)
        #expect(ConsumptionInformation.dollarRange(["USD": 1_000_000]) == 6)
        #expect(ConsumptionInformation.dollarRange(["USD": 2_000_000]) == 7)
        #expect(ConsumptionInformation.dollarRange(["USD": 10_000, "JPY": 120_000]) == 0, "no conversion: undeclared")
        let day: Int64 = 86_400_000
        #expect([0, 3, 10, 30, 90, 180, 365].map { ConsumptionInformation.tenureRange($0 * day) } == [1, 2, 3, 4, 5, 6, 7])
        #expect(ConsumptionInformation.tenureRange(3 * day - 1) == 1)
    }

    @Test func theCurrentBodySaysDeliveryAndTheShareUsedOnlyForCoins() {
        let coins = ConsumptionFacts(productKind: .consumable, delivered: true,
                                     coins: PaidCoinLots.Lot(reference: "a", credited: 500, remaining: 400))
        #expect(ConsumptionInformation.request(coins, sampleContentProvided: false).json
            == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": false, "consumptionPercentage": 20_000])
        let undelivered = ConsumptionFacts(productKind: .consumable, delivered: false)
        #expect(ConsumptionInformation.request(undelivered, sampleContentProvided: true).json
            == ["customerConsented": true, "deliveryStatus": "UNDELIVERED_OTHER", "sampleContentProvided": true, "consumptionPercentage": 0])
        for kind in [ProductKind.autoRenewable, .nonConsumable, .nonRenewing] {
            #expect(ConsumptionInformation.request(ConsumptionFacts(productKind: kind, delivered: true), sampleContentProvided: false)
                .consumptionPercentage == nil, "\(kind)")
        }
    }

    @Test func theV1BodyLeavesUnknownsUndeclared() {
        let facts = ConsumptionFacts(productKind: .consumable, delivered: true,
                                     coins: PaidCoinLots.Lot(reference: "a", credited: 500, remaining: 0),
                                     lifetimePurchasedMilli: ["JPY": 600_000], accountAgeMs: 400 * 86_400_000, appAccountToken: nil)
        let v1 = ConsumptionInformation.requestV1(facts, sampleContentProvided: false)
        #expect(v1.consumptionStatus == 3)
        #expect(v1.lifetimeDollarsPurchased == 0)
        #expect(v1.lifetimeDollarsRefunded == 1)
        #expect(v1.accountTenure == 7)
        #expect(v1.playTime == 0)
        #expect(v1.appAccountToken == "")
        #expect(v1.deliveryStatus == 0)
        let partly = ConsumptionFacts(productKind: .consumable, delivered: true, coins: PaidCoinLots.Lot(reference: "a", credited: 500, remaining: 1))
        #expect(ConsumptionInformation.requestV1(partly, sampleContentProvided: false).consumptionStatus == 2)
        #expect(ConsumptionInformation.requestV1(ConsumptionFacts(productKind: .consumable, delivered: false), sampleContentProvided: false)
            .deliveryStatus == 5)
    }
}
