import KakinCore
import Testing

/// A prorated refund claws back that share of a coin pack, under the wallet policy.
@Suite struct RevocationClawbackTests {
    static let negativeAllowed = WalletPolicy(allowNegativeBalance: true)
    static let floorAtZero = WalletPolicy(allowNegativeBalance: false)

    @Test func shareFollowsTheRevocationType() {
        #expect(WalletRules.revokedShareMilli(type: .refundProrated, percentage: 25_000) == 25_000)
        #expect(WalletRules.revokedShareMilli(type: .refundFull, percentage: 25_000) == 100_000)
        #expect(WalletRules.revokedShareMilli(type: .familyRevoke, percentage: nil) == 100_000)
        #expect(WalletRules.revokedShareMilli(type: nil, percentage: nil) == 100_000, "before API 1.19: a refund is whole")
        #expect(WalletRules.revokedShareMilli(type: .refundProrated, percentage: nil) == 100_000)
        #expect(WalletRules.revokedShareMilli(type: .refundProrated, percentage: 250_000) == 100_000, "clamped")
        #expect(WalletRules.revokedShareMilli(type: RevocationType(rawValue: "REFUND_SOMEDAY"), percentage: 10_000) == 10_000)
    }

    /// coins.500: 500 paid + 50 bonus. Half refunded: 250 paid and 25 free come back out.
    @Test func halfRefundTakesBackHalfOfPaidAndBonusCoins() {
        let c = WalletRules.revocationDebit(paid: 500, free: 50, shareMilli: 50_000, of: WalletBalance(paid: 500, free: 50), policy: Self.floorAtZero)
        #expect((c.shareMilli, c.paid, c.free, c.debitPaid, c.debitFree, c.shortfall) == (50_000, 250, 25, 250, 25, 0))
        #expect(c.isProrated)
    }

    @Test func roundingIsDownSoNeverMoreThanRefunded() {
        // 33.333 %: 166.665 paid coins' worth of money came back → 166 coins; 16.6665 bonus → 16.
        let c = WalletRules.revocationDebit(paid: 500, free: 50, shareMilli: 33_333, of: WalletBalance(paid: 1000, free: 1000), policy: Self.negativeAllowed)
        #expect((c.paid, c.free) == (166, 16))
        // 0.001 % of 500 coins: nothing.
        #expect(WalletRules.revocationDebit(paid: 500, free: 0, shareMilli: 1, of: WalletBalance(), policy: Self.negativeAllowed).paid == 0)
        // 100 %: exactly everything, whatever the amounts.
        let all = WalletRules.revocationDebit(paid: Int64.max / 2, free: 7, shareMilli: 100_000, of: WalletBalance(), policy: Self.negativeAllowed)
        #expect((all.paid, all.free) == (Int64.max / 2, 7))
    }

    @Test func walletPolicyDecidesWhatHappensToCoinsAlreadySpent() {
        // 400 of the 500 paid coins and all 50 bonus coins were spent: 100 paid left. A 60 % refund takes 300 + 30.
        let balance = WalletBalance(paid: 100, free: 0)
        let negative = WalletRules.revocationDebit(paid: 500, free: 50, shareMilli: 60_000, of: balance, policy: Self.negativeAllowed)
        #expect((negative.debitPaid, negative.debitFree, negative.shortfall) == (300, 30, 0))
        let floor = WalletRules.revocationDebit(paid: 500, free: 50, shareMilli: 60_000, of: balance, policy: Self.floorAtZero)
        #expect((floor.debitPaid, floor.debitFree, floor.shortfall) == (100, 0, 230))
        // The ledger a store would write from it: the balance after each policy.
        #expect(balance.paid - negative.debitPaid == -200 && balance.free - negative.debitFree == -30)
        #expect(balance.paid - floor.debitPaid == 0 && balance.free - floor.debitFree == 0)
    }

    @Test func fromARevokedTransaction() throws {
        let t0 = StatusFixtures.t0
        let refunded = StatusFixtures.transaction("7", product: "coins.500", type: .consumable, purchase: t0, revoked: t0 + 1000,
                                                  revocationType: "REFUND_PRORATED")
        var o = refunded.raw.objectValue!
        o["revocationPercentage"] = 20_000
        let t = try TransactionPayload(json: .object(o))
        let c = try #require(WalletRules.revocationDebit(of: t, credited: (500, 50), balance: WalletBalance(paid: 500, free: 50), policy: Self.floorAtZero))
        #expect((c.paid, c.free) == (100, 10))
        let standing = StatusFixtures.transaction("8", product: "coins.500", type: .consumable, purchase: t0)
        #expect(WalletRules.revocationDebit(of: standing, credited: (500, 50), balance: WalletBalance(), policy: Self.floorAtZero) == nil)
    }
}

/// Consumption answers (V2): the refund preference, only when asked for.
@Suite struct ConsumptionRefundPreferenceTests {
    static func facts(spent: Int64, credited: Int64 = 500, delivered: Bool = true) -> ConsumptionFacts {
        ConsumptionFacts(productKind: .consumable, delivered: delivered, coins: PaidCoinLots.Lot(reference: "1", credited: credited, remaining: credited - spent))
    }

    @Test func noPreferenceByDefault() {
        let r = ConsumptionInformation.request(Self.facts(spent: 100), sampleContentProvided: false)
        #expect(r.refundPreference == nil)
        #expect(r.json["refundPreference"] == nil)
    }

    @Test func preferenceFromUsage() throws {
        func pref(_ f: ConsumptionFacts) -> RefundPreference? {
            ConsumptionInformation.request(f, sampleContentProvided: false, refundPreference: .fromUsage).refundPreference
        }
        #expect(pref(Self.facts(spent: 0)) == .grantFull)
        #expect(pref(Self.facts(spent: 100)) == .grantProrated)
        #expect(pref(Self.facts(spent: 500)) == .decline)
        #expect(pref(ConsumptionFacts(productKind: .consumable, delivered: false)) == .grantFull)
        #expect(pref(ConsumptionFacts(productKind: .autoRenewable, delivered: true)) == nil)
        let prorated = ConsumptionInformation.request(Self.facts(spent: 100), sampleContentProvided: true, refundPreference: .fromUsage)
        // Apple's V2 body (its library's ConsumptionRequest fields), GRANT_PRORATED with the percentage it needs.
        #expect(prorated.json == ["customerConsented": true, "deliveryStatus": "DELIVERED", "sampleContentProvided": true,
                                  "consumptionPercentage": 20_000, "refundPreference": "GRANT_PRORATED"])
        #expect(try ConsumptionRequest(json: prorated.json) == prorated)
    }
}

/// The app's `retentionMessaging` rules pick the answer to Get Retention Message.
@Suite struct RetentionMessagingRuleTests {
    typealias F = StatusFixtures
    static let halfOffMessage = "7d4a1c2e-0b9f-4f6e-8d2a-1c3b5e7f9a01"
    static let stayMessage = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
    static let defaultMessage = "11111111-2222-4333-8444-555555555555"

    static let config = RetentionMessagingConfig(rules: [
        .init(productIds: ["premium.monthly"], messageId: halfOffMessage, offerId: "promo.3m.half"),
        .init(productIds: ["premium.yearly"], messageId: stayMessage, alternateProductId: "premium.monthly"),
        .init(productIds: ["premium.plus.monthly"], messageId: stayMessage),
    ], defaultMessageId: defaultMessage)

    static func facts(product: String, transactions: [TransactionPayload], offerRules: [String: OfferRule] = [:]) -> RetentionMessaging.Facts {
        let history = CustomerHistory(transactions: transactions)
        let status = StatusEngine.evaluate(history, catalog: Catalog.demo, nowMs: F.t0 + 10 * F.dayMs)
        return RetentionMessaging.Facts(productId: product, originalTransactionId: transactions.first?.originalTransactionId ?? "1",
                                        status: status, history: history, catalog: Catalog.demo, offerRules: offerRules)
    }

    static func subscribed(_ product: String) -> [TransactionPayload] {
        [F.transaction("1", product: product, purchase: F.t0, expires: F.t0 + 30 * F.dayMs)]
    }

    @Test func monthlySubscriberIsOfferedTheHalfPriceOffer() throws {
        try RetentionMessagingConfig.validate(Self.config)
        let (answer, rule) = RetentionMessaging.choose(Self.config, facts: Self.facts(product: "premium.monthly", transactions: Self.subscribed("premium.monthly")))
        #expect(answer == .promotionalOffer(productId: "premium.monthly", offerId: "promo.3m.half", messageId: Self.halfOffMessage))
        #expect(rule == 0)
    }

    @Test func anOfferTheCustomerMayNotHaveFallsThroughToTheNextRuleOrTheDefault() {
        // The app's offer rule keeps promo.3m.half for lapsed subscribers: this current one is not offered it.
        let rules = ["promo.3m.half": OfferRule(offerId: "promo.3m.half", eligibility: .lapsed)]
        let (answer, rule) = RetentionMessaging.choose(Self.config, facts: Self.facts(product: "premium.monthly", transactions: Self.subscribed("premium.monthly"),
                                                                                      offerRules: rules))
        #expect(answer == .message(messageId: Self.defaultMessage))
        #expect(rule == nil)
    }

    @Test func alternateProductAndMessage() {
        let yearly = RetentionMessaging.choose(Self.config, facts: Self.facts(product: "premium.yearly", transactions: Self.subscribed("premium.yearly")))
        #expect(yearly.answer == .alternateProduct(productId: "premium.monthly", messageId: Self.stayMessage))
        let plus = RetentionMessaging.choose(Self.config, facts: Self.facts(product: "premium.plus.monthly", transactions: Self.subscribed("premium.plus.monthly")))
        #expect(plus.answer == .message(messageId: Self.stayMessage))
    }

    @Test func noRuleAndNoDefaultIsNoAnswer() {
        let bare = RetentionMessagingConfig(rules: [.init(productIds: ["premium.yearly"], messageId: Self.stayMessage)])
        #expect(RetentionMessaging.choose(bare, facts: Self.facts(product: "premium.monthly", transactions: Self.subscribed("premium.monthly"))).answer == .none)
        // An alternate that is the product itself is never suggested.
        let selfAlternate = RetentionMessagingConfig(rules: [.init(alternateProductId: "premium.monthly")])
        #expect(RetentionMessaging.choose(selfAlternate, facts: Self.facts(product: "premium.monthly", transactions: Self.subscribed("premium.monthly"))).answer == .none)
    }

    @Test func validationRefusesWhatCannotBeAnswered() {
        func refused(_ c: RetentionMessagingConfig) -> Bool {
            (try? RetentionMessagingConfig.validate(c)) == nil
        }
        #expect(refused(RetentionMessagingConfig(rules: [.init(productIds: ["premium.monthly"])])), "says nothing")
        #expect(refused(RetentionMessagingConfig(rules: [.init(messageId: "not-a-uuid")])))
        #expect(refused(RetentionMessagingConfig(rules: [.init(productIds: ["coins.100"], messageId: Self.stayMessage)])))
        #expect(refused(RetentionMessagingConfig(rules: [.init(offerId: "no.such.offer")])))
        #expect(refused(RetentionMessagingConfig(rules: [.init(alternateProductId: "noads")])))
        #expect(refused(RetentionMessagingConfig(defaultMessageId: "x")))
        #expect(refused(RetentionMessagingConfig(rules: Array(repeating: .init(messageId: Self.stayMessage), count: 101))))
    }
}

extension RetentionMessagingConfig {
    static func validate(_ c: RetentionMessagingConfig) throws(ConfigurationError) {
        try c.validate(catalog: Catalog.demo, path: "apps[0].retentionMessaging")
    }
}
