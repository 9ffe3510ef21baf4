import KakinCore
import Testing

/// A status read loads only the transactions `StatusInputs.select` picks; the status must be the one the whole
/// history gives, whatever order the copies were stored in.
@Suite struct StatusInputsTests {
    typealias F = StatusFixtures

    static func json(_ status: CustomerStatus) -> String {
        status.json(customerId: "u", appAccountToken: nil, wallet: WalletBalance()).jsonString
    }

    /// Stores copies the way the database does (the newest copy of each id wins) and keeps the selection the
    /// way `KakinStore+StatusInputs` does: from the selection and the new copy, or from everything stored when
    /// the replaced copy was selected and `canReplace` says no.
    struct IncrementalStore {
        var stored: [String: TransactionPayload] = [:]
        var selected: Set<String> = []

        mutating func receive(_ copy: TransactionPayload) {
            let previous = stored[copy.transactionId]
            if let previous {
                let newest = CustomerHistory(transactions: [previous, copy]).deduplicated().transactions[0]
                guard newest == copy, newest != previous else { return }
            }
            stored[copy.transactionId] = copy
            if let previous, selected.contains(previous.transactionId), !StatusInputs.canReplace(previous, with: copy) {
                selected = StatusInputs.select(Array(stored.values))
                return
            }
            let candidates = selected.compactMap { stored[$0] }.filter { $0.transactionId != copy.transactionId } + [copy]
            selected.subtract(candidates.map(\.transactionId))
            selected.formUnion(StatusInputs.select(candidates))
        }

        var selection: [TransactionPayload] { selected.compactMap { stored[$0] } }
    }

    /// `StatusOrderIndependenceTests.randomHistory`, plus repeated purchases of one non-consumable or pass, some
    /// refunded by a later copy: the first or last of a product then hands its place to another.
    static func randomHistory(_ rng: inout SeededRandom) -> CustomerHistory {
        var history = StatusOrderIndependenceTests.randomHistory(&rng)
        let (product, type): (String, AppleProductType) = Bool.random(using: &rng) ? ("noads", .nonConsumable) : ("season.pass", .nonRenewing)
        for i in 0..<Int.random(in: 0...5, using: &rng) {
            let purchase = F.t0 + Int64.random(in: 0...300, using: &rng) * F.dayMs
            let shared = Int.random(in: 0..<4, using: &rng) == 0
            history.transactions.append(F.transaction("8\(i)", product: product, type: type, purchase: purchase, familyShared: shared))
            if Bool.random(using: &rng) {
                history.transactions.append(F.transaction("8\(i)", product: product, type: type, purchase: purchase,
                                                          signed: purchase + F.dayMs, revoked: purchase + F.dayMs, familyShared: shared))
            }
        }
        return history
    }

    @Test func theSelectedTransactionsGiveTheStatusOfTheWholeHistory() {
        var rng = SeededRandom(seed: 0x4B41_4B49_4E00_0011)
        var compared = 0
        var wholeHistoryNeeded = 0
        for _ in 0..<1_000 {
            let history = Self.randomHistory(&rng)
            let nowMs = F.t0 + Int64.random(in: 0...500, using: &rng) * F.dayMs + Int64.random(in: 0..<F.dayMs, using: &rng)
            let expected = StatusEngine.evaluate(history, catalog: F.catalog, nowMs: nowMs)

            var store = IncrementalStore()
            for copy in StatusOrderIndependenceTests.rearranged(history, &rng).transactions { store.receive(copy) }
            let newest = history.deduplicated().transactions
            let selection = store.selection
            #expect(Set(selection.map(\.transactionId)) == StatusInputs.select(newest),
                    "the selection kept copy by copy differs from the selection of the whole history")
            #expect(StatusInputs.needsWholeHistory(selection) == StatusInputs.needsWholeHistory(newest))
            if StatusInputs.needsWholeHistory(selection) {
                wholeHistoryNeeded += 1
                continue
            }
            // The selection, and any set between it and the whole history (rows marked but not needed).
            let extra = newest.filter { _ in Int.random(in: 0..<3, using: &rng) == 0 }
            for transactions in [selection, selection + extra] {
                let status = StatusEngine.evaluate(CustomerHistory(transactions: transactions, renewalInfos: history.renewalInfos),
                                                   catalog: F.catalog, nowMs: nowMs)
                guard status == expected else {
                    Issue.record("the selection changed the status at \(nowMs):\nwhole history \(Self.json(expected))\nselection \(Self.json(status))")
                    return
                }
            }
            compared += 1
        }
        // Most histories are compared, and the generator does reach the whole-history case.
        #expect(compared > 600 && wholeHistoryNeeded > 0, "compared \(compared), whole history needed \(wholeHistoryNeeded)")
    }

    @Test func tenYearsOfMonthlyRenewalsSelectOneTransactionPerSubscription() {
        var transactions: [TransactionPayload] = []
        for instance in 0..<3 {
            let original = String(1000 + instance * 1000)
            for month in 0..<120 {
                let id = month == 0 ? original : String(1000 + instance * 1000 + month)
                transactions.append(F.transaction(id, original: original, product: instance == 2 ? "extras.monthly" : "premium.monthly",
                                                  purchase: F.t0 + Int64(month) * 30 * F.dayMs,
                                                  expires: F.t0 + Int64(month + 1) * 30 * F.dayMs))
            }
        }
        let selected = StatusInputs.select(transactions)
        #expect(selected == ["1119", "2119", "3119"])
        let nowMs = F.t0 + 3_599 * F.dayMs
        #expect(StatusEngine.evaluate(CustomerHistory(transactions: transactions.filter { selected.contains($0.transactionId) }),
                                      catalog: F.catalog, nowMs: nowMs)
            == StatusEngine.evaluate(CustomerHistory(transactions: transactions), catalog: F.catalog, nowMs: nowMs))
    }
}
