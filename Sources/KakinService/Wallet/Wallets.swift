import KakinCore
import KakinEvents
import KakinStorage

/// A coin spend: `POST …/wallet/spend`.
public struct SpendRequest: Sendable {
    public var customerId: String
    public var idempotencyKey: String
    /// The request's fields in canonical form, compared when the key is used again.
    public var canonicalRequest: String
    public var amount: Int64
    public var item: String
    public var recipient: String?

    public init(customerId: String, idempotencyKey: String, canonicalRequest: String, amount: Int64, item: String, recipient: String?) {
        precondition(amount > 0 && amount <= WalletRules.amountMax, "the adapter validates the amount")
        self.customerId = customerId
        self.idempotencyKey = idempotencyKey
        self.canonicalRequest = canonicalRequest
        self.amount = amount
        self.item = item
        self.recipient = recipient
    }
}

/// Free coins: `POST …/wallet/grants` (backend), or the support desk (which names who granted).
public struct GrantRequest: Sendable {
    public var customerId: String
    public var idempotencyKey: String
    public var amount: Int64
    public var reason: String
    /// The support desk's actor: the customer must exist, and the timeline records who granted (`admin.grant`).
    public var deskActor: String?

    public init(customerId: String, idempotencyKey: String, amount: Int64, reason: String, deskActor: String? = nil) {
        precondition(amount > 0 && amount <= WalletRules.amountMax, "the adapter validates the amount")
        self.customerId = customerId
        self.idempotencyKey = idempotencyKey
        self.amount = amount
        self.reason = reason
        self.deskActor = deskActor
    }

    /// What the key's request is compared by: the grant's own fields, whichever adapter sent them.
    var canonicalRequest: String { JSONValue.object(["amount": .int(amount), "reason": .string(reason)]).jsonString }
}

/// The wallet's use cases: spends and grants with Stripe's idempotency semantics (the answer stored with the key and
/// replayed byte for byte), the ledger, a recipient's support, and the ledger check. The coin rules are the core's
/// (`WalletRules`); each movement and its key commit together.
public struct Wallets: Sendable {
    let store: any WalletRepository
    let spendOrder: SpendOrder
    let metrics: Metrics
    let logger: Logger
    let events: CustomerEvents

    public func balance(_ customerId: String) async throws(KakinError) -> WalletBalance {
        try await store.wallet(customerId)
    }

    /// Spends coins: 201 with the split, or 409 `insufficient_balance` with nothing spent (both stored under the key).
    /// - Parameter requestId: named in a stored 409's error body (the first request's, replayed).
    public func spend(_ s: SpendRequest, requestId: String) async throws(KakinError) -> IdempotentAnswer {
        let order = spendOrder
        let events = events
        let answer = try await store.transaction { r in
            try r.idempotently(customerId: s.customerId, scope: "spend", key: s.idempotencyKey, request: s.canonicalRequest) {
                // One read for the balance and for the events the spend tells.
                let customer = try r.statusInputs(s.customerId)
                let balance = customer?.wallet ?? WalletBalance()
                guard let split = WalletRules.split(amount: s.amount, of: balance, order: order), let customer else {
                    let error = KakinError(.insufficientBalance, "Not enough coins: \(balance.total) available, \(s.amount) needed; nothing was spent.")
                    return IdempotentEffect(status: 409, body: error.body(requestId: requestId).serialized()) {}
                }
                let after = WalletBalance(paid: balance.paid - split.paid, free: balance.free - split.free)
                let spendId = r.newID(prefix: "sp_")
                let json: JSONValue = ["spendId": .string(spendId), "amount": .int(s.amount), "paidUsed": .int(split.paid),
                                       "freeUsed": .int(split.free), "wallet": after.json]
                return IdempotentEffect(status: 201, body: json.serialized()) {
                    var data: [String: JSONValue] = ["spendId": .string(spendId), "amount": .int(s.amount), "item": .string(s.item)]
                    if let recipient = s.recipient { data["recipient"] = .string(recipient) }
                    let moved = try Self.move(r, LedgerMovement(
                        entryId: r.newEntryId(), customerId: s.customerId, atMs: r.nowMs, kind: .spend, paid: -split.paid, free: -split.free,
                        reference: spendId, effectKey: nil, item: s.item, recipient: s.recipient), of: customer, events: events,
                        telling: [.coins(.coinsSpent, paid: -split.paid, free: -split.free, reference: spendId, data)])
                    precondition(moved == after, "the answered balance is the balance the spend left")
                }
            }
        }
        if answer.status == 201, !answer.replayed {
            metrics.increment(.spends)
            events.wake()
        }
        return answer
    }

    /// Grants free coins: 201 `{grantId, amount, reason, wallet}`, replayed for the same key.
    public func grant(_ g: GrantRequest) async throws(KakinError) -> IdempotentAnswer {
        let events = events
        let request = g.canonicalRequest  // here, not on the writer's thread
        let answer = try await store.transaction { r in
            try r.idempotently(customerId: g.customerId, scope: "grant", key: g.idempotencyKey, request: request) {
                // One read for the balance and for the events the grant tells; nil: a new customer.
                let customer = try r.statusInputs(g.customerId)
                if g.deskActor != nil, customer == nil { throw KakinError(.customerNotFound) }
                let balance = customer?.wallet ?? WalletBalance()
                let after = WalletBalance(paid: balance.paid, free: balance.free + g.amount)
                let entryId = r.newEntryId()
                return IdempotentEffect(status: 201, body: Self.grantAnswer(grantId: entryId, g, wallet: after)) {
                    let movement = LedgerMovement(entryId: entryId, customerId: g.customerId, atMs: r.nowMs, kind: .grant, paid: 0,
                                                  free: g.amount, reference: g.idempotencyKey, effectKey: nil, item: g.reason)
                    let granted = EventDraft.coins(.coinsGranted, paid: 0, free: g.amount, reference: entryId, ["reason": .string(g.reason)])
                    // A new customer is created in the same batch as its first coins.
                    var batch = WriteBatch()
                    let (snapshot, facts) = customer.map { ($0, [granted]) }
                        ?? (r.createCustomer(g.customerId, in: &batch), [EventDraft(type: .customerCreated), granted])
                    let moved = try Self.move(r, movement, of: snapshot, events: events, telling: facts, in: batch)
                    precondition(moved == after, "the answered balance is the balance the grant left")
                    if let actor = g.deskActor {
                        try r.recordTimeline(customerId: g.customerId, kind: "admin.grant", reference: entryId,
                                             detail: ["by": .string(actor), "amount": .int(g.amount), "reason": .string(g.reason)])
                    }
                }
            }
        }
        if !answer.replayed {
            metrics.increment(.grants)
            events.wake()
        }
        return answer
    }

    /// The grant's 201 body, `{"amount", "grantId", "reason", "wallet"}` (members in key order, as a `JSONValue` object
    /// serializes), written straight to bytes.
    static func grantAnswer(grantId: String, _ g: GrantRequest, wallet: WalletBalance) -> [UInt8] {
        var w = JSONBytesWriter(capacity: 128 + g.reason.utf8.count)
        w.object { w in
            w.member("amount", g.amount)
            w.member("grantId", grantId)
            w.member("reason", g.reason)
            w.key("wallet")
            wallet.write(to: &w)
        }
        return w.bytes
    }

    /// Moves coins for `customer`, whose status inputs this write read before deciding, and tells `facts` with the
    /// status after: the movement's and the events' writes join `batch` and go to the database together (with the write's
    /// next round trip on PostgreSQL). Returns the balance after.
    static func move(_ r: Records, _ movement: LedgerMovement, of customer: CustomerSnapshot, events: CustomerEvents,
                     telling facts: [EventDraft], in batch: WriteBatch = WriteBatch()) throws -> WalletBalance {
        var batch = batch
        var after = customer
        after.wallet = r.moveCoins(movement, from: customer.wallet, in: &batch)
        _ = try events.append(r, to: &batch, after, facts: facts, environment: nil, bundleId: nil)
        try r.write(batch)
        return after.wallet
    }

    /// What moving in one old balance did (`importBalances`).
    public enum BalanceImportOutcome: Sendable {
        /// The entry was written (a dry run: would be).
        case applied
        /// The reference was imported before with the same customer and amounts: nothing changed.
        case alreadyPresent
        /// The reference was imported before for another customer or other amounts.
        case conflict(KakinError)
    }

    /// Moves in balances from the old coin system: one ledger entry of kind `import` (source `import`, dated `atMs`, the
    /// moment the old system held it) per reference, exactly once (its effect key), written by the one apply's
    /// `IngestLedger.importBalance`. All in ONE write, with whatever
    /// `alsoInWrite` adds (the import's row outcomes), so a row is applied and recorded together or not at all. A dry
    /// run reads the same on a snapshot and writes nothing.
    /// - Parameter recordsEvents: tell `coins.credited` (`coins.clawed_back` for a debt) with `"source": "import"`.
    public func importBalances(_ balances: [(balance: ImportedBalance, atMs: Int64)], recordsEvents: Bool, dryRun: Bool,
                               alsoInWrite: @escaping @Sendable (Records, [BalanceImportOutcome]) throws -> Void)
        async throws(KakinError) -> [BalanceImportOutcome]
    {
        let events = events
        @Sendable func decide(_ r: Records, _ b: ImportedBalance) throws -> BalanceImportOutcome? {
            guard let existing = try r.importedBalance(effectKey: b.effectKey) else { return nil }
            guard existing == (b.customerId, b.paid, b.free) else {
                return .conflict(KakinError(.importReferenceConflict, "reference \(b.reference.prefix(60)) was imported for customer \(existing.customerId) with paid \(existing.paid), free \(existing.free)."))
            }
            return .alreadyPresent
        }
        if dryRun {
            return try await store.snapshot { r in try balances.map { try decide(r, $0.balance) ?? .applied } }
        }
        let outcomes = try await store.transaction { r in
            var outcomes: [BalanceImportOutcome] = []
            for (b, atMs) in balances {
                if let known = try decide(r, b) {
                    outcomes.append(known)
                    continue
                }
                let createdCustomer = try IngestLedger.importBalance(r, b, atMs: atMs)
                if recordsEvents {
                    let coins = EventDraft.coins(b.paid + b.free >= 0 ? .coinsCredited : .coinsClawedBack, paid: b.paid, free: b.free,
                                                 reference: b.reference, ["source": "import"])
                    try events.record(r, customerId: b.customerId, facts: (createdCustomer ? [EventDraft(type: .customerCreated)] : []) + [coins])
                }
                outcomes.append(.applied)
            }
            try alsoInWrite(r, outcomes)
            return outcomes
        }
        if recordsEvents, outcomes.contains(where: { if case .applied = $0 { return true } else { return false } }) { events.wake() }
        return outcomes
    }

    /// Newest first; `cursor` continues after the previous page.
    public func ledger(customerId: String, limit: Int, cursor: String?) async throws(KakinError) -> LedgerPage {
        try await store.ledger(customerId: customerId, limit: limit, cursor: cursor)
    }

    public func recipientSupport(_ recipient: String, top: Int) async throws(KakinError) -> RecipientSupport {
        try await store.recipientSupport(recipient, top: top)
    }

    /// Proves every balance equals the sum of its entries; a failure is logged as an error, and the outcome is in
    /// `/metrics` (`kakin_ledger_check_ok`, what the ledger alert watches).
    public func checkLedger() async throws(KakinError) -> LedgerCheckReport {
        let report = try await store.checkLedger()
        metrics.recordLedgerCheck(problems: report.problems.count)
        if !report.ok { logger.error("ledger check failed", ["ledger.problems": .int(Int64(report.problems.count))]) }
        return report
    }
}
