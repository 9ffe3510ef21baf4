/// What Kakin tells Apple when a customer asks for a refund (CONSUMPTION_REQUEST, reference §6.7):
/// facts read from the ledger, turned into Apple's request bodies. Pure: the store gathers the facts,
/// the server sends the body.

/// Everything Kakin knows about one purchase and its customer when Apple asks.
public struct ConsumptionFacts: Sendable, Hashable {
    /// Nil when the product is not in the catalog.
    public var productKind: ProductKind?
    /// Kakin applied the purchase (credited the coins or granted the entitlement).
    public var delivered: Bool
    /// For a credited consumable: its paid coins and how many of them are used (first in, first out: `PaidCoinLots`).
    public var coins: PaidCoinLots.Lot?
    /// Prices of the customer's coin purchases and of refunds, from the ledger, in milliunits per currency.
    public var lifetimePurchasedMilli: [String: Int64]
    public var lifetimeRefundedMilli: [String: Int64]
    /// Since the customer was first seen by Kakin (nil: Kakin does not know the customer).
    public var accountAgeMs: Int64?
    public var appAccountToken: String?

    public init(productKind: ProductKind?, delivered: Bool, coins: PaidCoinLots.Lot? = nil,
                lifetimePurchasedMilli: [String: Int64] = [:], lifetimeRefundedMilli: [String: Int64] = [:],
                accountAgeMs: Int64? = nil, appAccountToken: String? = nil) {
        self.productKind = productKind
        self.delivered = delivered
        self.coins = coins
        self.lifetimePurchasedMilli = lifetimePurchasedMilli
        self.lifetimeRefundedMilli = lifetimeRefundedMilli
        self.accountAgeMs = accountAgeMs
        self.appAccountToken = appAccountToken
    }

    /// For the support timeline: the facts as JSON.
    public var json: JSONValue {
        var o: [String: JSONValue] = ["delivered": .bool(delivered), "productType": .string(productKind?.rawValue)]
        if let coins { o["coins"] = ["paid": .int(coins.credited), "used": .int(coins.spent)] }
        o["lifetimePurchasedMilli"] = .object(lifetimePurchasedMilli.mapValues { .int($0) })
        o["lifetimeRefundedMilli"] = .object(lifetimeRefundedMilli.mapValues { .int($0) })
        o["accountAgeMs"] = .int(accountAgeMs)
        return .object(o)
    }
}

public enum ConsumptionInformation {
    /// Apple wants the answer within 12 hours of the request.
    public static let answerWindowMs: Int64 = 12 * 3_600_000

    /// The current (V2) body: delivery and, for a credited consumable, the share of its paid coins used.
    /// Auto-renewables never carry a percentage (Apple computes it and refuses one). `refundPreference` is
    /// sent only when the app asks for it (`policy`): by default Kakin states facts and the App Store decides.
    public static func request(_ facts: ConsumptionFacts, sampleContentProvided: Bool,
                               refundPreference policy: RefundPreferencePolicy = .none) -> ConsumptionRequest {
        var percentage: Int?
        if facts.productKind == .consumable {
            if let coins = facts.coins { percentage = milliPercentage(used: coins.spent, of: coins.credited) }
            else if !facts.delivered { percentage = 0 }
        }
        var preference: RefundPreference?
        if policy == .fromUsage { preference = suggestedRefundPreference(facts, consumptionPercentage: percentage) }
        let request = ConsumptionRequest(customerConsented: true, deliveryStatus: facts.delivered ? .delivered : .undeliveredOther,
                                         sampleContentProvided: sampleContentProvided, consumptionPercentage: percentage,
                                         refundPreference: preference)
        // Apple refuses GRANT_PRORATED without a consumption percentage above 0 (reference §6.7).
        precondition(request.refundPreference != .grantProrated || (request.consumptionPercentage ?? 0) > 0,
                     "GRANT_PRORATED needs a consumptionPercentage above 0")
        return request
    }

    /// Whether Kakin tells Apple which refund it would prefer (`ConsumptionRequest.refundPreference`, V2).
    public enum RefundPreferencePolicy: String, Sendable, CaseIterable {
        /// No preference: Apple decides from the facts (the default).
        case none
        /// From the ledger (`suggestedRefundPreference`).
        case fromUsage
    }

    /// The refund the ledger argues for: nothing delivered, or a coin pack none of whose paid coins were used
    /// → `GRANT_FULL`; a pack partly used → `GRANT_PRORATED` (Apple refunds the unused share); a pack used up →
    /// `DECLINE`. Anything else (a delivered subscription or non-consumable) → no preference: Kakin can't
    /// tell how much of it was used.
    public static func suggestedRefundPreference(_ facts: ConsumptionFacts, consumptionPercentage: Int? = nil) -> RefundPreference? {
        guard facts.delivered else { return .grantFull }
        guard facts.productKind == .consumable, let coins = facts.coins else { return nil }
        let used = consumptionPercentage ?? milliPercentage(used: coins.spent, of: coins.credited)
        if coins.spent <= 0 || used == 0 { return .grantFull }
        if coins.spent >= coins.credited { return .decline }
        return .grantProrated
    }

    /// The deprecated V1 body, which also carries the customer's lifetime spend and refunds (USD ranges;
    /// undeclared when any amount is in another currency, as Kakin converts nothing), account age
    /// (from when Kakin first saw the customer) and play time (never known: undeclared).
    public static func requestV1(_ facts: ConsumptionFacts, sampleContentProvided: Bool) -> ConsumptionRequestV1 {
        var status = 0
        if facts.productKind == .consumable {
            if let coins = facts.coins {
                status = coins.spent <= 0 ? 1 : (coins.spent >= coins.credited ? 3 : 2)
            } else if !facts.delivered {
                status = 1
            }
        }
        return ConsumptionRequestV1(
            customerConsented: true, consumptionStatus: status, platform: 1, sampleContentProvided: sampleContentProvided,
            deliveryStatus: facts.delivered ? 0 : 5, appAccountToken: facts.appAccountToken ?? "",
            accountTenure: facts.accountAgeMs.map(tenureRange) ?? 0, playTime: 0,
            lifetimeDollarsRefunded: dollarRange(facts.lifetimeRefundedMilli), lifetimeDollarsPurchased: dollarRange(facts.lifetimePurchasedMilli),
            userStatus: 0, refundPreference: 0)
    }

    /// `used / credited` in Apple's milliunits (0–100000), rounded down; 0 when nothing was credited.
    public static func milliPercentage(used: Int64, of credited: Int64) -> Int {
        Int(Milli.share(100_000, min(used, credited), of: credited))
    }

    /// Apple's `lifetimeDollars…` ranges (1 = $0 … 7 = over $2000) of amounts in milliunits per currency;
    /// 0 (undeclared) unless every amount is in USD.
    public static func dollarRange(_ milliByCurrency: [String: Int64]) -> Int {
        let nonZero = milliByCurrency.filter { $0.value != 0 }
        guard nonZero.keys.allSatisfy({ $0 == "USD" }) else { return 0 }
        let usd = max(0, nonZero["USD"] ?? 0)
        switch usd {
        case 0: return 1
        case ..<50_000: return 2
        case ..<100_000: return 3
        case ..<500_000: return 4
        case ..<1_000_000: return 5
        case ..<2_000_000: return 6
        default: return 7
        }
    }

    /// Apple's `accountTenure` ranges: 1 under 3 days … 7 over 365 days.
    public static func tenureRange(_ ageMs: Int64) -> Int {
        let days = max(0, ageMs) / 86_400_000
        switch days {
        case ..<3: return 1
        case ..<10: return 2
        case ..<30: return 3
        case ..<90: return 4
        case ..<180: return 5
        case ..<365: return 6
        default: return 7
        }
    }
}
