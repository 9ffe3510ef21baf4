import KakinCore
import KakinStorage

extension Ingest {
    /// Google Play's entry to the one apply: a token read from the Developer API → Play's adapter (`PlayPurchaseFacts`) →
    /// ONE write in which each order runs the same sequence as every store's fact (`IngestWrite.apply`: newest copy,
    /// owner, grant, refunds), the chain's entitlement is set from the chain's newest token, the customers' events are
    /// appended and the path's registered extras (`IngestRegistry`, store `googlePlay`) run.
    /// - Returns: the result of the token's newest order (nil outcome while it has none: a pending purchase).
    func applyPlay(_ read: PlayRead, product: Product, path: IngestPath, presenter: String?, withStatus: Bool,
                   context: IngestContext = IngestContext()) async throws(KakinError) -> IngestResult {
        let options = path.options
        precondition(options.owner == .currentOwner || presenter != nil, "path \(path) needs the presenting customer")
        let write = IngestWrite(options: options, presenter: options.owner == .presenter ? presenter : nil, via: path.via,
                                purchaseProcessId: nil, walletPolicy: walletPolicy, transferPolicy: transferPolicy, catalogs: [:])
        let extras = IngestRegistry.row(store: PlayPurchaseFacts.source, path: path).extras
        let events = events
        let result = try await store.transaction { r in
            let known = try r.playToken(read.purchaseToken)
            let linkedChain = try known?.chainId ?? read.linkedPurchaseToken.flatMap { try r.playToken($0)?.chainId }
            let facts = read.facts(linkedChainId: linkedChain)
            var result = IngestResult(outcome: nil, owner: nil, changes: [])
            var revocations: [String: PurchaseFact.Revocation] = [:]
            for var fact in facts {
                let copies = try PlayCopies(r, fact: fact, purchaseToken: read.purchaseToken)
                // Play never gives back what it voided: a read that no longer says so (the voided list is not in the
                // resource) keeps the stored revocation, so a later state change cannot undo a refund.
                if fact.revocation == nil { fact.revocation = copies.stored?.revocation }
                revocations[fact.periodId] = fact.revocation
                var kept = copies.with(fact)
                result = try write.apply(r, fact, product: product, copies: &kept, changes: result.changes)
            }
            let chainId = facts.first?.chainId ?? linkedChain ?? read.purchaseToken
            let owner = try result.owner ?? r.linkOwner(originalTransactionId: chainId)
            try r.keepPlayToken(PlayTokenRow(
                purchaseToken: read.purchaseToken, packageName: read.packageName, productId: product.productId,
                kind: product.kind == .autoRenewable ? .subscription : .product, chainId: chainId, linkedPurchaseToken: read.linkedPurchaseToken,
                customerId: owner, resource: read.resourceJSON, readAtMs: read.readAtMs))
            if let owner {
                try Self.setPlayEntitlement(r, read, product: product, chainId: chainId, revocations: revocations, owner: owner)
            }
            var recorded = try events.record(r, result.changes, productId: product.productId, environment: nil, appId: read.packageName, owner: owner)
            if result.changes.isEmpty, let owner {
                // A state Play changed (grace, hold, pause, cancel) moves no coins and stores no new order: the status tells it.
                let told = try events.recordKeepingSnapshot(r, customerId: owner, facts: [], environment: nil, bundleId: read.packageName)
                recorded = (told.appended, told.evaluated)
            }
            result.eventsAppended = recorded.appended
            for extra in extras {
                switch extra {
                case .playAcknowledgement:
                    if !read.isAcknowledged, owner != nil {
                        try r.schedulePlayAcknowledgement(
                            purchaseToken: read.purchaseToken, packageName: read.packageName, productId: product.productId,
                            kind: product.kind == .autoRenewable ? .subscription : .product, consume: product.kind == .consumable,
                            customerId: owner, deadlineMs: (facts.first?.purchasedAtMs ?? read.readAtMs) + GooglePlayPurchases.acknowledgementWindowMs,
                            nextAttemptMs: 0)
                    }
                case .playNotificationState:
                    guard let messageId = context.playMessageId else { preconditionFailure("path \(path) applies a notification") }
                    try r.markPlayNotificationApplied(messageId, customerId: owner)
                default:
                    preconditionFailure("extra \(extra) is the App Store's")
                }
            }
            if withStatus {
                result.status = try Self.answerStatus(r, result, owner: owner, evaluatedByEvents: recorded.owner, catalog: events.catalog)
            }
            return result
        }
        switch result.outcome {
        case .applied?: metrics.increment(.purchasesApplied)
        case .alreadyProcessed?: metrics.increment(.purchasesDuplicate)
        default: break
        }
        if result.eventsAppended > 0 { events.wake() }
        return result
    }

    /// What the status reads of a Play purchase: a subscription chain's entitlement from its newest token only (a token
    /// another one replaced never sets it: a later token links it, or its read says a replacement cancelled it, read
    /// before its successor arrived), a non-consumable's own; consumables are the wallet's.
    static func setPlayEntitlement(_ r: Records, _ read: PlayRead, product: Product, chainId: String,
                                   revocations: [String: PurchaseFact.Revocation], owner: String) throws {
        let entitlement: ExternalEntitlement?
        switch read.resource {
        case .subscription(let s):
            guard s.cancellation != .replacement, try !r.playTokenIsReplaced(read.purchaseToken) else { return }
            entitlement = PlayPurchaseFacts.entitlement(s, chainId: chainId, purchaseToken: read.purchaseToken, revocations: revocations)
        case .product:
            var facts = read.facts(linkedChainId: nil)
            for i in facts.indices where facts[i].revocation == nil { facts[i].revocation = revocations[facts[i].periodId] }
            entitlement = product.kind == .nonConsumable ? facts.first.map(PlayPurchaseFacts.entitlement(nonConsumable:)) : nil
        }
        guard let entitlement else { return }
        try r.setExternalEntitlement(source: PlayPurchaseFacts.source, id: entitlement.id, customerId: owner, entitlement: entitlement.json)
    }
}

/// Play's copies in the one apply: the newest read of each order (`play_orders`); a chain's link moves its tokens and
/// orders with it.
struct PlayCopies: StoreCopies {
    var fact: PurchaseFact
    let purchaseToken: String
    let stored: IngestPlan.StoredCopy?

    init(_ r: Records, fact: PurchaseFact, purchaseToken: String) throws {
        self.fact = fact
        self.purchaseToken = purchaseToken
        stored = try r.storedPlayOrder(fact.periodId)
    }

    /// The same copies keeping `fact` (the adapter's, with what the store said before carried over).
    func with(_ fact: PurchaseFact) -> PlayCopies {
        var copies = self
        copies.fact = fact
        return copies
    }

    func keep(_ r: Records, owner: String?) throws {
        try r.keepPlayOrder(fact, purchaseToken: purchaseToken, owner: owner)
    }

    func link(_ r: Records, _ decision: Ownership.Decision, linkedBefore: String?) throws -> Bool {
        try r.linkPlayChain(decision, chainId: fact.chainId, linkedBefore: linkedBefore)
    }
}

extension PlayRead {
    var resourceJSON: JSONValue {
        switch resource {
        case .subscription(let s): return s.raw
        case .product(let p): return p.raw
        }
    }
}
