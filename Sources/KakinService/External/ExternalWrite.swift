import KakinCore
import KakinEvents
import KakinExternal
import KakinStorage

/// What one write for purchases outside the App Store decided, per customer: the facts their backends are told
/// (with the status's transitions, by `CustomerEvents`) in the same write.
struct ExternalFacts {
    private(set) var customers: [String] = []
    private(set) var drafts: [String: [EventDraft]] = [:]
    /// Customers whose status may have changed without a fact (an entitlement refreshed).
    mutating func touch(_ customerId: String) {
        if !customers.contains(customerId) { customers.append(customerId) }
    }

    mutating func add(_ customerId: String, _ draft: EventDraft) {
        touch(customerId)
        drafts[customerId, default: []].append(draft)
    }
}

/// The decisions of the external purchase use cases, run inside one write (a body that may run again on PostgreSQL:
/// it decides only from what it reads there). The rules are KakinCore's and KakinExternal's (`PurchaseGrant`,
/// `WalletRules.refundDebit`, `ExternalRefundPlan`, `ExternalSubscriptionState`, `ExternalPurchaseReportSchedule`);
/// this type carries them out on the records.
struct ExternalWrite: Sendable {
    let apps: [String: AppSettings]
    let walletPolicy: WalletPolicy

    func product(_ bundleId: String, _ productId: String?) -> Product? {
        productId.flatMap { apps[bundleId]?.catalog[$0] }
    }

    // MARK: Purchases

    /// Applies a stored purchase's effects for its customer through the one apply (`IngestWrite.apply` with
    /// `ExternalCopies`: the customer, the claim, coins into the ledger with `source`, the timeline), then refreshes the
    /// entitlement it belongs to; its token is joined by the claim. The purchase's row must name its customer.
    func apply(_ r: Records, _ row: inout ExternalPurchaseRow, product: Product, facts: inout ExternalFacts) throws {
        guard let customerId = row.customerId else { preconditionFailure("a purchase is applied to its customer") }
        precondition(!row.applied, "a purchase is applied once")
        // The source names the customer: it presents the purchase, and no chain link is read or written.
        let write = IngestWrite(options: IngestOptions(owner: .presenter, unknownProduct: .refuse, ownerConflict: .refuse, renewalInfo: .mustVerify),
                                presenter: customerId, via: row.provider, purchaseProcessId: nil, walletPolicy: walletPolicy,
                                transferPolicy: .keepFirstOwner, catalogs: [:])
        var copies = ExternalCopies(row: row, product: product, rules: self)
        let result = try write.apply(r, Self.fact(row, product: product), product: product, copies: &copies, changes: [])
        row = copies.row
        precondition(row.applied, "a purchase the source names is claimed for its customer")
        for (c, draft) in CustomerEvents.drafts(result.changes, productId: row.productId, source: row.provider) { facts.add(c, draft) }
        if row.grant["coins"] == nil { try refreshEntitlement(r, of: row, facts: &facts) }
    }

    static func purchaseEffectKey(_ row: ExternalPurchaseRow) -> String { "ext:purchase:\(row.provider):\(row.externalId)" }

    /// The external sources' adapter: a stored purchase → the store-neutral fact (a period of its subscription's chain,
    /// or a chain of its own). Refunds are not in the fact: they are amounts, reconciled by refunded total (`refund`, with
    /// `ExternalRefundPlan`), and a period refunded before it could be applied is still applied (its entitlement carries
    /// the refund, `refreshEntitlement`).
    static func fact(_ row: ExternalPurchaseRow, product: Product) -> PurchaseFact {
        PurchaseFact(store: .external(provider: row.provider), appId: row.bundleId, chainId: row.subscriptionId ?? row.externalId,
                     periodId: row.externalId, productId: product.productId, storeKind: nil, quantity: 1,
                     owner: PurchaseFact.OwnerHints(customerId: row.customerId), purchasedAtMs: row.purchasedAtMs, expiresAtMs: row.expiresAtMs,
                     priceMilli: milli(row.price, row.currency), currency: row.currency, offer: nil,
                     revocation: nil, signedAtMs: row.purchasedAtMs,
                     raw: .null)
    }

    /// Minor units → Apple's milli-units (the ledger's `price_milli`), nil beyond limits or for an unknown currency.
    static func milli(_ minor: Int64, _ currency: String) -> Int64? {
        CurrencyCode(currency)?.milliUnits(fromMinor: minor)
    }

    /// Joins the purchase to an Apple external purchase token: the one it named (recorded now if new), else the one
    /// `ExternalPurchaseReportSchedule.tokenForPurchase` picks among the customer's tokens; the token's report is due now.
    func attachToken(_ r: Records, _ row: inout ExternalPurchaseRow, named token: ExternalPurchaseToken? = nil) throws {
        if let token {
            let inserted = try r.insertExternalToken(Self.tokenRow(token, customerId: row.customerId, nowMs: r.nowMs))
            if !inserted, var known = try r.externalToken(token.externalPurchaseId), known.customerId == nil, let c = row.customerId {
                known.customerId = c
                try r.updateExternalToken(known)
            }
            row.externalPurchaseId = token.externalPurchaseId
        } else if row.externalPurchaseId == nil, let customerId = row.customerId {
            let tokens = try r.externalTokens(customerId: customerId).filter { $0.bundleId == row.bundleId }
                .compactMap { try? ExternalPurchaseToken(notificationSection: $0.token) }
            row.externalPurchaseId = ExternalPurchaseReportSchedule.tokenForPurchase(among: tokens, atMs: row.purchasedAtMs)?.externalPurchaseId
        }
        if let id = row.externalPurchaseId { try markTokenDue(r, id, atMs: r.nowMs) }
    }

    static func tokenRow(_ token: ExternalPurchaseToken, customerId: String?, nowMs: Int64) -> ExternalTokenRow {
        ExternalTokenRow(externalPurchaseId: token.externalPurchaseId, bundleId: token.bundleId, customerId: customerId, token: token.json,
                         tokenType: token.tokenType?.rawValue, tokenCreatedAtMs: token.tokenCreationDateMs, recordedAtMs: nowMs,
                         reportDueMs: ExternalPurchaseReportSchedule.noPurchaseReportDueMs(token))
    }

    /// A token owes Apple a report at `atMs` (or earlier, if it already did).
    func markTokenDue(_ r: Records, _ externalPurchaseId: String, atMs: Int64) throws {
        guard var t = try r.externalToken(externalPurchaseId) else { return }
        let due = min(t.reportDueMs ?? atMs, atMs)
        guard due != t.reportDueMs else { return }
        t.reportDueMs = due
        try r.updateExternalToken(t)
    }

    // MARK: Entitlements

    /// Sets what the status reads of the entitlement `row` belongs to (its own, or its subscription's).
    func refreshEntitlement(_ r: Records, of row: ExternalPurchaseRow, facts: inout ExternalFacts) throws {
        guard let customerId = row.customerId, let product = product(row.bundleId, row.productId) else { return }
        switch product.kind {
        case .consumable:
            return
        case .autoRenewable:
            try refreshSubscription(r, provider: row.provider, subscriptionId: row.subscriptionId ?? row.externalId, bundleId: row.bundleId,
                                    facts: &facts)
        case .nonConsumable, .nonRenewing:
            let entitlement = ExternalEntitlement(
                source: row.provider, id: row.externalId, productId: product.productId, kind: product.kind, latestId: row.externalId,
                purchasedAtMs: row.purchasedAtMs, expiresAtMs: row.expiresAtMs, standing: .active, willAutoRenew: false,
                revokedAtMs: Self.fullRefundMs(row))
            try r.setExternalEntitlement(source: row.provider, id: row.externalId, customerId: customerId, entitlement: entitlement.json)
            facts.touch(customerId)
        }
    }

    /// When a purchase was refunded in full, if it was.
    static func fullRefundMs(_ row: ExternalPurchaseRow) -> Int64? {
        guard row.price > 0, row.refundedTotal >= row.price else { return nil }
        return row.refunds.arrayValue?.last?["atMs"]?.int64Value
    }

    /// A subscription's entitlement from everything known of it: the provider's observations merged order-free
    /// (`ExternalSubscriptionState`), and its paid periods (the newest names the renewal; a refund in full of the
    /// newest revokes it). The generic source sends no state: its periods alone say until when it is served.
    func refreshSubscription(_ r: Records, provider: String, subscriptionId: String, bundleId: String, facts: inout ExternalFacts) throws {
        let periods = try r.externalPurchases(provider: provider, subscriptionId: subscriptionId).filter(\.applied)
        let known = try r.externalSubscription(provider: provider, subscriptionId: subscriptionId)
        let state = ExternalSubscriptionState.merge(
            try r.subscriptionObservations(provider: provider, subscriptionId: subscriptionId).compactMap(ExternalSubscriptionObservation.init(json:)))
        guard let customerId = known?.customerId ?? state?.customerId ?? periods.last?.customerId,
              let productId = known?.productId ?? state?.productId ?? periods.last?.productId,
              let product = product(bundleId, productId), product.kind == .autoRenewable else { return }
        // A subscription's events may name its customer before any payment did: the customer exists from then on.
        if try r.ensureCustomer(customerId).created { facts.add(customerId, EventDraft(type: .customerCreated)) }
        let latest = periods.max { ($0.purchasedAtMs, $0.externalId) < ($1.purchasedAtMs, $1.externalId) }
        let standing: ExternalEntitlement.Standing
        let expiresAtMs: Int64?
        let willAutoRenew: Bool
        if let state {
            if state.isEnded {
                standing = .ended
            } else if let status = state.status {
                switch status {
                case .active, .trialing: standing = .active
                case .pastDue: standing = .pastDue
                default: standing = .pending
                }
            } else {
                standing = latest == nil ? .pending : .active
            }
            expiresAtMs = state.isEnded ? (state.endedAtMs ?? state.currentPeriodEndMs) : (state.currentPeriodEndMs ?? latest?.expiresAtMs)
            willAutoRenew = !state.cancelAtPeriodEnd && !state.isEnded
        } else {
            standing = .active
            expiresAtMs = periods.filter { Self.fullRefundMs($0) == nil }.compactMap(\.expiresAtMs).max()
            willAutoRenew = true
        }
        // The paid period is named by its end, whichever event told of it first (an update may precede its invoice):
        // a later end is a renewal.
        let periodEnd = state?.currentPeriodEndMs ?? periods.compactMap(\.expiresAtMs).max()
        let entitlement = ExternalEntitlement(
            source: provider, id: subscriptionId, productId: productId, kind: .autoRenewable,
            latestId: periodEnd.map { "\(subscriptionId)@\($0)" } ?? subscriptionId,
            purchasedAtMs: periods.first?.purchasedAtMs ?? (state.map { $0.lastObservedAtSeconds * 1000 } ?? r.nowMs), expiresAtMs: expiresAtMs,
            standing: standing, willAutoRenew: willAutoRenew, revokedAtMs: latest.flatMap(Self.fullRefundMs))
        try r.setExternalEntitlement(source: provider, id: subscriptionId, customerId: customerId, entitlement: entitlement.json)
        facts.touch(customerId)
    }

    // MARK: Refunds

    /// Carries out a refund plan on a purchase: its refunded total, the coins taken back under the wallet policy
    /// (paid coins in proportion; a refund in full also takes the bonus), a revoked entitlement, the token's report.
    func refund(_ r: Records, _ row: inout ExternalPurchaseRow, plan: ExternalRefundPlan, refundedAtMs: Int64, facts: inout ExternalFacts) throws {
        guard plan.amount > 0 else { return }
        precondition(plan.refundedTotal <= row.price && plan.refundedTotal >= row.refundedTotal, "refunds only grow, up to the price")
        var refunds = row.refunds.arrayValue ?? []
        refunds.append(["key": .string(String(plan.refundedTotal)), "amount": .int(plan.amount), "atMs": .int(refundedAtMs)])
        row.refunds = .array(refunds)
        row.refundedTotal = plan.refundedTotal
        try r.updateExternalPurchase(row)
        guard let customerId = row.customerId, row.applied else { return }
        var clawed: (paid: Int64, free: Int64, shortfall: Int64) = (0, 0, 0)
        if let coins = row.grant["coins"] {
            let creditedPaid = coins["paid"]?.int64Value ?? 0, creditedFree = coins["free"]?.int64Value ?? 0
            clawed = try IngestLedger.clawBack(
                r, customerId: customerId, paid: min(plan.coinsToClawBack, creditedPaid), free: plan.isFull ? creditedFree : 0,
                policy: walletPolicy, reference: row.externalId, effectKey: "ext:refund:\(row.provider):\(row.externalId):\(plan.refundedTotal)",
                priceMilli: Self.milli(plan.amount, row.currency).map { -$0 }, currency: row.currency,
                detail: ["provider": .string(row.provider), "amount": .int(plan.amount), "refundedTotal": .int(plan.refundedTotal)],
                source: row.provider)
            if clawed.paid > 0 || clawed.free > 0 || clawed.shortfall > 0 {
                facts.add(customerId, .coins(.coinsClawedBack, paid: -clawed.paid, free: -clawed.free, reference: row.externalId,
                                             ["shortfall": .int(clawed.shortfall), "source": .string(row.provider)]))
            }
        } else {
            try refreshEntitlement(r, of: row, facts: &facts)
        }
        facts.add(customerId, EventDraft(type: .purchaseRefunded, data: [
            "transactionId": .string(row.externalId), "productId": .string(row.productId), "source": .string(row.provider),
            "amount": .int(plan.amount), "refundedTotal": .int(plan.refundedTotal), "currency": .string(row.currency),
        ]))
        try r.recordTimeline(customerId: customerId, kind: "externalPurchase.refunded", reference: row.externalId, detail: [
            "provider": .string(row.provider), "amount": .int(plan.amount), "refundedTotal": .int(plan.refundedTotal),
            "paid": .int(-clawed.paid), "free": .int(-clawed.free), "shortfall": .int(clawed.shortfall),
        ])
        if let id = row.externalPurchaseId { try markTokenDue(r, id, atMs: r.nowMs) }
    }

    /// The paid coins a purchase credited (what a refund takes back in proportion).
    static func creditedPaid(_ row: ExternalPurchaseRow) -> Int64 { row.grant["coins"]?["paid"]?.int64Value ?? 0 }
}

/// The external sources' copies in the one apply: the purchase's own row (`external_purchases`, recorded once by
/// `provider` + `externalId` before the apply: it is the copy, kept by the caller), no chain link (the source names the
/// customer), the row marked applied as the claim (with its grant and its token joined), the ledger's
/// `ext:purchase:<provider>:<externalId>` key.
struct ExternalCopies: StoreCopies {
    var row: ExternalPurchaseRow
    let product: Product
    let rules: ExternalWrite

    var stored: IngestPlan.StoredCopy? { nil }

    func linkOwner(_ r: Records, chainId: String) throws -> String? { nil }

    func keep(_ r: Records, owner: String?) throws {}

    func link(_ r: Records, _ decision: Ownership.Decision, linkedBefore: String?) throws -> Bool { false }

    mutating func claim(_ r: Records, _ applied: AppliedPurchase, via: String, purchaseProcessId: String?) throws -> Bool {
        precondition(!row.applied, "a purchase is applied once")
        row.applied = true
        row.grant = applied.grant
        row.productKind = product.kind.rawValue
        try rules.attachToken(r, &row)
        try r.updateExternalPurchase(row)
        return true
    }

    func applied(_ r: Records, periodId: String) throws -> AppliedPurchase? { nil }

    func credit(_ fact: PurchaseFact, grant: PurchaseGrant, via: String, purchaseProcessId: String?) -> StoreCredit {
        StoreCredit(effectKey: ExternalWrite.purchaseEffectKey(row),
                    ledgerDetail: ["productId": .string(row.productId), "provider": .string(row.provider)],
                    timelineKind: "externalPurchase.applied", timelineDetail: [
                        "provider": .string(row.provider), "productId": .string(row.productId), "price": .int(row.price),
                        "currency": .string(row.currency), "grant": grant.json, "externalPurchaseId": .string(row.externalPurchaseId),
                    ])
    }
}
