import KakinCore
import KakinStorage

/// The one apply's coin movements: every purchase credit and every refund's clawback or reversal, of every store, and
/// every balance moved in from an old coin system (`kakin import balances`), is written here (inside the write that
/// decided it), with the one clawback rule (`IngestPlan.clawback`, `RefundReconciliation` for a store's newest copy) and
/// the one floor check (`IngestPlan.checkFloor`). Spends and grants are the wallet use cases' (`Wallets`); nothing else
/// writes the ledger.
enum IngestLedger {
    /// Credits what a purchase grants, when it grants coins: paid and bonus coins, the store's price, unique by `effectKey`.
    static func credit(_ r: Records, _ fact: PurchaseFact, grant: PurchaseGrant, customerId: String, reference: String, effectKey: String,
                       detail: JSONValue) throws {
        guard case .coins(let paid, let free) = grant else { return }
        try r.moveCoins(LedgerMovement(
            entryId: r.newEntryId(), customerId: customerId, atMs: r.nowMs, kind: .purchase, paid: paid, free: free,
            reference: reference, effectKey: effectKey, priceMilli: fact.priceMilli, currency: fact.currency, detail: detail,
            source: fact.store.ledgerSource))
    }

    /// Moves in one old balance (`Wallets.importBalances`, which checked its reference is new): an entry of kind `import`
    /// (source `import`) dated `atMs`, when the old system held it, unique by the reference's effect key; the customer is
    /// created when new. Returns whether it was. Not checked against the floor: a debt the old system held moves in as one.
    static func importBalance(_ r: Records, _ b: ImportedBalance, atMs: Int64) throws -> Bool {
        try r.moveCoinsCreatingCustomer(LedgerMovement(
            entryId: r.newEntryId(), customerId: b.customerId, atMs: atMs, kind: .import, paid: b.paid, free: b.free,
            reference: b.reference, effectKey: b.effectKey, detail: ["importedAtMs": .int(r.nowMs)], source: "import")).createdCustomer
    }

    /// Takes back up to `paid` + `free` coins for a refund (`IngestPlan.clawback` under the wallet policy), one entry unique
    /// by `effectKey` when anything is taken or short. Returns what was taken and what could not be.
    static func clawBack(_ r: Records, customerId: String, paid: Int64, free: Int64, policy: WalletPolicy, reference: String,
                         effectKey: String, priceMilli: Int64?, currency: String?, detail: [String: JSONValue],
                         source: String?) throws -> (paid: Int64, free: Int64, shortfall: Int64) {
        let clawed = IngestPlan.clawback(paid: paid, free: free, balance: try r.wallet(customerId), policy: policy)
        guard clawed.paid > 0 || clawed.free > 0 || clawed.shortfall > 0 else { return clawed }
        var detail = detail
        if clawed.shortfall > 0 { detail["shortfall"] = .int(clawed.shortfall) }
        try debit(r, customerId: customerId, paid: clawed.paid, free: clawed.free, policy: policy, reference: reference, effectKey: effectKey,
                  priceMilli: priceMilli, currency: currency, detail: .object(detail), source: source)
        return clawed
    }

    /// A refund entry (deltas ≤ 0), checked against the floor.
    private static func debit(_ r: Records, customerId: String, paid: Int64, free: Int64, policy: WalletPolicy, reference: String,
                              effectKey: String, priceMilli: Int64?, currency: String?, detail: JSONValue, source: String?) throws {
        let after = try r.moveCoins(LedgerMovement(
            entryId: r.newEntryId(), customerId: customerId, atMs: r.nowMs, kind: .refund, paid: -paid, free: -free,
            reference: reference, effectKey: effectKey, priceMilli: priceMilli, currency: currency, detail: detail, source: source))
        IngestPlan.checkFloor(after, policy: policy)
    }

    /// Moves a credited purchase's coins one step toward what the newest stored copy says (`IngestPlan.reconcile`).
    static func reconcileRefunds(_ r: Records, _ fact: PurchaseFact, revocation: PurchaseFact.Revocation?,
                                 policy: WalletPolicy) throws -> (customerId: String, step: RefundReconciliation.Step)? {
        let id = fact.periodId
        guard let purchase = try r.purchaseLedger(id) else { return nil }
        let step = IngestPlan.reconcile(purchase.ledger, revocation: revocation, quantity: fact.quantity,
                                        balance: try r.wallet(purchase.customerId), policy: policy)
        let source = fact.store.ledgerSource
        switch step {
        case .none:
            return nil
        case .refund(let paid, let free, let shortfall, let number):
            let share = revocation?.shareMilli(ofQuantity: fact.quantity) ?? WalletRules.fullShareMilli
            var detail: [String: JSONValue] = ["revocationDate": .int(revocation?.atMs ?? 0)]
            if shortfall > 0 { detail["shortfall"] = .int(shortfall) }
            if share < WalletRules.fullShareMilli { detail["revokedShareMilli"] = .int(Int64(share)) }
            try debit(r, customerId: purchase.customerId, paid: -paid, free: -free, policy: policy, reference: id, effectKey: "refund:\(id):\(number)",
                      priceMilli: purchase.priceMilli.map { -$0 }, currency: purchase.currency, detail: .object(detail), source: source)
            try r.recordTimeline(customerId: purchase.customerId, kind: "purchase.refunded", reference: id, detail: .object(detail))
        case .reverse(let paid, let free, let number):
            try r.moveCoins(LedgerMovement(
                entryId: r.newEntryId(), customerId: purchase.customerId, atMs: r.nowMs, kind: .refundReversed, paid: paid, free: free,
                reference: id, effectKey: "refundReversed:\(id):\(number)", priceMilli: purchase.priceMilli, currency: purchase.currency,
                source: source))
            try r.recordTimeline(customerId: purchase.customerId, kind: "purchase.refundReversed", reference: id, detail: .null)
        }
        return (purchase.customerId, step)
    }
}
