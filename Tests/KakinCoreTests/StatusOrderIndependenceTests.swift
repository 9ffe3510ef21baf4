import KakinCore
import Testing

/// The server stores signed copies as they arrive — late, twice, out of order. The status must be a function
/// of the set of copies only.
@Suite struct StatusOrderIndependenceTests {
    typealias F = StatusFixtures

    static let groups: [[String]] = [["premium.monthly", "premium.yearly", "premium.plus.monthly"], ["extras.monthly"]]

    /// A few subscription instances with renewals, offers, refunds, upgrades and several signed copies of each
    /// payload (later copies may add a revocation; some copies share a signedDate), plus one-time purchases.
    static func randomHistory(_ rng: inout SeededRandom) -> CustomerHistory {
        func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
        func day(_ range: ClosedRange<Int64>) -> Int64 { F.t0 + Int64.random(in: range, using: &rng) * F.dayMs }
        var transactions: [TransactionPayload] = []
        var renewals: [RenewalInfoPayload] = []

        for instance in 0..<Int.random(in: 1...3, using: &rng) {
            let original = String(1000 + instance * 100)
            let products = groups[Int.random(in: 0...1, using: &rng)]
            let familyShared = chance(0.15)
            var purchase = day(0...60)
            for period in 0..<Int.random(in: 1...4, using: &rng) {
                let product = products.randomElement(using: &rng)!
                let expires = purchase + Int64.random(in: 3...400, using: &rng) * F.dayMs
                let offerType: Int? = chance(0.5) ? Int.random(in: 1...4, using: &rng) : nil
                let id = period == 0 ? original : String(1000 + instance * 100 + period)
                let copies = Int.random(in: 1...3, using: &rng)
                var signed = purchase
                for copy in 0..<copies {
                    let revoked: Int64? = copy > 0 && chance(0.3) ? signed + F.dayMs : nil
                    transactions.append(F.transaction(
                        id, original: original, product: product, purchase: purchase, expires: expires, signed: signed,
                        revoked: revoked, upgraded: copy > 0 && chance(0.2), offerType: offerType,
                        offerId: offerType.flatMap { $0 == 1 ? nil : "offer.\($0)" }, familyShared: familyShared))
                    if !chance(0.2) { signed += Int64.random(in: 1...20, using: &rng) * F.dayMs }  // else: same signedDate, other content
                }
                // Sometimes the next period starts at the same instant (ties broken by transaction id).
                purchase = chance(0.1) ? purchase : purchase + Int64.random(in: 1...120, using: &rng) * F.dayMs
            }
            for _ in 0..<Int.random(in: 0...3, using: &rng) {
                let offerType: Int? = chance(0.4) ? 2 : nil
                renewals.append(F.renewal(
                    original, product: products[0], autoRenewProduct: products.randomElement(using: &rng)!,
                    autoRenew: Int.random(in: 0...1, using: &rng), intent: chance(0.3) ? Int.random(in: 1...5, using: &rng) : nil,
                    retry: chance(0.4), grace: chance(0.3) ? day(0...300) : nil, offerType: offerType,
                    offerId: offerType.map { _ in "promo.\(Int.random(in: 1...3, using: &rng))" }, offerPeriod: offerType.map { _ in "P6M" },
                    signed: day(0...300)))
            }
        }
        for i in 0..<Int.random(in: 0...3, using: &rng) {
            let (product, type): (String, AppleProductType) = [("noads", .nonConsumable), ("season.pass", .nonRenewing), ("coins.100", .consumable)]
                .randomElement(using: &rng)!
            let purchase = day(0...300)
            transactions.append(F.transaction("9\(i)", product: product, type: type, purchase: purchase, familyShared: chance(0.3)))
            if chance(0.3) {
                transactions.append(F.transaction("9\(i)", product: product, type: type, purchase: purchase, signed: purchase + F.dayMs,
                                                  revoked: purchase + F.dayMs))
            }
        }
        return CustomerHistory(transactions: transactions, renewalInfos: renewals)
    }

    /// The same copies, shuffled, with some of them received again.
    static func rearranged(_ h: CustomerHistory, _ rng: inout SeededRandom) -> CustomerHistory {
        var t = h.transactions
        var r = h.renewalInfos
        for _ in 0..<Int.random(in: 0...4, using: &rng) { if let x = h.transactions.randomElement(using: &rng) { t.append(x) } }
        for _ in 0..<Int.random(in: 0...2, using: &rng) { if let x = h.renewalInfos.randomElement(using: &rng) { r.append(x) } }
        return CustomerHistory(transactions: t.shuffled(using: &rng), renewalInfos: r.shuffled(using: &rng))
    }

    @Test func arrivalOrderAndDuplicatesNeverChangeTheStatus() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0004)
        var statesSeen = Set<SubscriptionState>()
        for _ in 0..<1_000 {
            let history = Self.randomHistory(&rng)
            let nowMs = F.t0 + Int64.random(in: 0...500, using: &rng) * F.dayMs + Int64.random(in: 0..<F.dayMs, using: &rng)
            let expected = StatusEngine.evaluate(history, catalog: F.catalog, nowMs: nowMs)
            let expectedJSON = expected.json(customerId: "u", appAccountToken: nil, wallet: WalletBalance()).jsonString
            statesSeen.formUnion(expected.subscriptions.map(\.state))
            for _ in 0..<3 {
                let again = StatusEngine.evaluate(Self.rearranged(history, &rng), catalog: F.catalog, nowMs: nowMs)
                let json = again.json(customerId: "u", appAccountToken: nil, wallet: WalletBalance()).jsonString
                guard json == expectedJSON, again == expected else {
                    Issue.record("order changed the status at \(nowMs):\n\(expectedJSON)\n\(json)")
                    return
                }
            }
        }
        // The generator reaches every state, so the property covers every branch of the rules.
        #expect(statesSeen == Set(SubscriptionState.allCases))
    }
}
