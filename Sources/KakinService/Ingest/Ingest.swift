import AppStoreSecurity
import KakinCore
import KakinStorage

/// A signed transaction that passed Apple's rules, decoded once.
public struct VerifiedTransaction: Sendable, Hashable {
    public var payload: TransactionPayload
    public var jws: String

    public init(payload: TransactionPayload, jws: String) {
        self.payload = payload
        self.jws = jws
    }
}

/// A signed renewal info that passed Apple's rules, decoded once.
public struct VerifiedRenewalInfo: Sendable, Hashable {
    public var payload: RenewalInfoPayload
    public var jws: String
}

/// What applying a transaction did.
public enum IngestOutcome: Sendable, Hashable {
    /// First time: 201.
    case applied(AppliedPurchase)
    /// Applied before, by any path: 409 with the same fields.
    case alreadyProcessed(AppliedPurchase)
    /// Refunded or revoked before it was ever applied: nothing is granted (422), but the transaction is kept and
    /// linked, so the customer's status shows the revocation whatever order the purchase and its refund arrive in.
    case revoked(revocationDateMs: Int64)
    /// Stored, not applied (the path's options said so).
    case notApplied(NotApplied)

    /// Why a stored fact was not applied (`IngestPlan.NotApplied`): nobody owns it yet, its chain is another customer's,
    /// or its product is not in the app's catalog.
    public typealias NotApplied = IngestPlan.NotApplied
}

extension IngestOutcome {
    /// 201 and 409 carry the customer's status.
    var isAnsweredWithStatus: Bool {
        switch self {
        case .applied, .alreadyProcessed: return true
        case .revoked, .notApplied: return false
        }
    }
}

/// One state change the ingest made, typed: what later capabilities (events, numbers) are made of.
public enum IngestChange: Sendable, Hashable {
    case customerCreated(customerId: String)
    case renewalInfoStored(originalTransactionId: String)
    case transactionStored(transactionId: String)
    case linked(originalTransactionId: String, customerId: String)
    case transferred(originalTransactionId: String, from: String, to: String)
    case purchaseApplied(AppliedPurchase, PurchaseGrant)
    case refundReconciled(transactionId: String, customerId: String, RefundReconciliation.Step)
}

public struct IngestResult: Sendable {
    /// Nil when the facts held no transaction (a renewal info alone).
    public var outcome: IngestOutcome?
    /// The customer the facts belong to now, if anyone.
    public var owner: String?
    public var changes: [IngestChange]
    /// The facts are stored but can't apply yet (`IngestOptions.UnknownProduct.retryLater`): the ingest fails after its
    /// write, so the caller retries.
    public var retryLater = false
    /// The owner's status as the write left it, when asked for and read in the write (`withStatus`): evaluated once,
    /// by the events' diff when the write changed something.
    public var status: EvaluatedCustomer?
    /// Events the write appended (for every customer it changed).
    public var eventsAppended = 0
    /// The owner as the write ensured them (what an extra that needs the customer's row reads).
    var ownerRow: KakinStore.Customer?

    init(outcome: IngestOutcome?, owner: String?, changes: [IngestChange], retryLater: Bool = false) {
        self.outcome = outcome
        self.owner = owner
        self.changes = changes
        self.retryLater = retryLater
    }
}


/// One signed App Store fact to ingest: a transaction, its subscription's renewal info, or both.
public struct IngestItem: Sendable {
    public var transaction: VerifiedTransaction?
    public var renewalInfo: VerifiedRenewalInfo?

    public init(transaction: VerifiedTransaction?, renewalInfo: VerifiedRenewalInfo? = nil) {
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }
}

/// The one apply: verify (once) → the store's adapter turns the payload into a `PurchaseFact` → ONE database transaction
/// in which the write reads what the plan needs, the core decides (`IngestPlan`: newest copy, owner, grant, refunds) and
/// a small, fixed set of repository calls carries it out (keep the copy, link, claim, move coins, record), the events
/// and the path's registered extras (`IngestRegistry`) beside it → the typed change. Every App Store path uses it (the
/// app's POST, the notification worker, restores, receipts, subscription refreshes, the desk, import rows); they differ
/// only by `IngestPath.options` and their row in the path table (extras, and whether events are told). Purchases outside
/// the App Store move coins through the same ledger calls (`IngestLedger`).
public struct Ingest: Sendable {
    let store: any PurchaseRepository
    let verifier: SignedDataVerifier
    let catalogs: [String: Catalog]
    let walletPolicy: WalletPolicy
    let transferPolicy: TransferPolicy
    let metrics: Metrics
    /// Whether Set App Account Token can be called for the app (its App Store Server API is configured).
    let setsAppAccountTokens: @Sendable (_ bundleId: String) -> Bool
    /// Wakes the worker that makes the calls Kakin owes the App Store.
    let wakeAppStoreJobs: @Sendable () -> Void
    /// What the changes tell the customers' backends (appended in the same write).
    let events: CustomerEvents
    /// Apple's 2026 extras (server finish, app transaction links).
    let apple2026: Apple2026Ingest

    // MARK: Verification, once per signed payload

    /// Verifies a signed transaction; a refusal is the contract's verification error (422, `retryable_failure` 503),
    /// counted once in `kakin_verification_failures_total`.
    public func verifyTransaction(_ jws: String) throws(KakinError) -> VerifiedTransaction {
        do {
            return VerifiedTransaction(payload: try verifier.verifyTransaction(jws), jws: jws)
        } catch {
            throw refused(error)
        }
    }

    /// Verifies a signed renewal info for `path`: a refusal fails the ingest, or (`skipUnverifiable`) answers nil.
    public func verifyRenewalInfo(_ jws: String, for path: IngestPath) throws(KakinError) -> VerifiedRenewalInfo? {
        do {
            return VerifiedRenewalInfo(payload: try verifier.verifyRenewalInfo(jws), jws: jws)
        } catch {
            let kakinError = refused(error)
            if path.options.renewalInfo == .skipUnverifiable { return nil }
            throw kakinError
        }
    }

    /// Verifies a signed notification (Apple's push body or a Notification History entry): refusals are 400, as
    /// Apple expects for a body it should not retry; `retryable_failure` stays 503.
    public func verifyNotification(_ jws: String) throws(KakinError) -> NotificationPayload {
        do {
            return try verifier.verifyNotification(jws)
        } catch {
            var kakinError = refused(error)
            if error.code != .retryableFailure { kakinError.httpStatus = 400 }
            throw kakinError
        }
    }

    private func refused(_ failure: VerificationFailure) -> KakinError {
        metrics.countVerificationFailure(failure.code)
        return failure.kakinError
    }

    // MARK: Apply

    /// The owner's status read in the write itself, for an answer that carries it (SQLite only: one writer, nothing to
    /// conflict with; on PostgreSQL the caller reads it after the commit). The events' evaluation is the answer's when the
    /// write changed something; nil when the answer carries no status.
    static func answerStatus(_ r: Records, _ result: IngestResult, owner: String?, evaluatedByEvents: EvaluatedCustomer?,
                             catalog: Catalog) throws -> EvaluatedCustomer? {
        guard r.dialect == .sqlite, result.outcome?.isAnsweredWithStatus == true, let owner else { return result.status }
        if let evaluatedByEvents { return evaluatedByEvents }
        guard var snapshot = try r.statusInputs(owner) else { return result.status }
        if StatusInputs.needsWholeHistory(snapshot.history.transactions) { snapshot = try r.wholeHistory(snapshot.customer) }
        return EvaluatedCustomer(snapshot, StatusEngine.evaluate(snapshot.history, catalog: catalog, nowMs: r.nowMs))
    }

    /// Stores the facts and applies their effects in one database transaction.
    /// - Parameters:
    ///   - presenter: the customer presenting the facts (required when the path's owner is `presenter`).
    ///   - withStatus: the caller answers with the owner's status: on SQLite (one writer, nothing to conflict with) its
    ///     rows are read in the same write, saving a read of their own after it; on PostgreSQL the caller reads them after
    ///     the commit (a SERIALIZABLE write reading them would lock index pages other customers' purchases write).
    ///   - context: what the path's extras need from the caller (a notification's id and job), and whether events were
    ///     asked for on a path that tells them only when asked.
    public func apply(transaction: VerifiedTransaction?, renewalInfo: VerifiedRenewalInfo? = nil, path: IngestPath,
                      presenter: String? = nil, purchaseProcessId: String? = nil, withStatus: Bool = false,
                      context: IngestContext = IngestContext()) async throws(KakinError) -> IngestResult {
        try await applyAll([IngestItem(transaction: transaction, renewalInfo: renewalInfo)], path: path, presenter: presenter,
                           purchaseProcessId: purchaseProcessId, withStatus: withStatus, context: context)[0]
    }

    /// Applies several facts in ONE write, each as `apply` would, in order: a refusal (another customer's chain under
    /// `keepFirstOwner` on a refusing path) refuses them all, with nothing applied. A restore is one such write.
    public func applyAll(_ items: [IngestItem], path: IngestPath, presenter: String? = nil, purchaseProcessId: String? = nil,
                         withStatus: Bool = false, context: IngestContext = IngestContext()) async throws(KakinError) -> [IngestResult] {
        let write = try checkedWrite(items, path: path, presenter: presenter, purchaseProcessId: purchaseProcessId)
        let row = IngestRegistry.row(store: "appStore", path: path)
        precondition(!context.eventsAsked || row.events == .whenAsked, "path \(path) tells its events always")
        let tellsEvents = row.events == .always || context.eventsAsked
        let runner = ExtrasRunner(extras: row.extras, path: path, context: context, tellsEvents: tellsEvents, apple2026: apple2026,
                                  setsToken: { setsAppAccountTokens($0) })
        let events = events
        let results = try await store.transaction { r in
            var results: [IngestResult] = []
            for item in items {
                var result = try write.run(r, item)
                let recorded = tellsEvents
                    ? try events.record(r, result.changes, transaction: item.transaction?.payload, renewalInfo: item.renewalInfo?.payload,
                                        owner: result.owner)
                    : (appended: 0, owner: nil)
                result.eventsAppended = recorded.appended
                try runner.run(r, result, item)
                if withStatus, items.count == 1 {
                    result.status = try Self.answerStatus(r, result, owner: result.owner, evaluatedByEvents: recorded.owner, catalog: events.catalog)
                }
                results.append(result)
            }
            return results
        }
        var wakeJobs = false
        for (item, result) in zip(items, results) {
            switch result.outcome {
            case .applied?: metrics.increment(.purchasesApplied)
            case .alreadyProcessed?: metrics.increment(.purchasesDuplicate)
            default: break
            }
            if result.retryLater, let tx = item.transaction?.payload {
                throw KakinError(.unknownProduct, detail: "product \(tx.productId) of transaction \(tx.transactionId) is not in the catalog")
            }
            if result.owner != nil, let tx = item.transaction?.payload, runner.schedulesToken(tx) { wakeJobs = true }
        }
        if wakeJobs || context.notification?.consumption?.state == .pending { wakeAppStoreJobs() }
        if results.contains(where: { $0.eventsAppended > 0 }) { events.wake() }
        return results
    }

    /// Whether `applyAll` would change anything, decided by the same plan over what it would read, on a snapshot, with
    /// nothing written (an import's dry run): throws what the write would refuse with (an unknown product on a refusing
    /// path, another customer's chain). Each fact is decided over what is stored, not over what the facts before it in
    /// the same call would have written.
    public func wouldChange(_ items: [IngestItem], path: IngestPath, presenter: String? = nil) async throws(KakinError) -> Bool {
        let write = try checkedWrite(items, path: path, presenter: presenter, purchaseProcessId: nil)
        return try await store.snapshot { r in try items.contains { try write.wouldChange(r, $0) } }
    }

    /// The write for `items` on `path`, once what it refuses before reading anything is checked: more facts than one
    /// write holds, a product the catalog does not know on a path that refuses them.
    private func checkedWrite(_ items: [IngestItem], path: IngestPath, presenter: String?,
                              purchaseProcessId: String?) throws(KakinError) -> IngestWrite {
        let options = path.options
        precondition(options.owner == .currentOwner || presenter != nil, "path \(path) needs the presenting customer")
        precondition(!items.isEmpty, "a write applies at least one fact")
        guard items.count <= Self.factsPerWriteMax else {
            throw KakinError(.restoreTooLarge, detail: "\(items.count) signed copies, more than \(Self.factsPerWriteMax) in one write")
        }
        for item in items {
            if let tx = item.transaction?.payload, catalogs[tx.bundleId]?[tx.productId] == nil, options.unknownProduct == .refuse {
                throw KakinError(.unknownProduct, "Product \(tx.productId) is not in this server's catalog.")
            }
        }
        return IngestWrite(options: options, presenter: options.owner == .presenter ? presenter : nil, via: path.via,
                           purchaseProcessId: purchaseProcessId, walletPolicy: walletPolicy, transferPolicy: transferPolicy, catalogs: catalogs)
    }
}

/// The one apply's write for one fact of any store: reads what the plan needs, asks the core (`IngestPlan`), carries the
/// plan out. A body that may run again on PostgreSQL: it decides only from what it reads there.
struct IngestWrite: Sendable {
    let options: IngestOptions
    let presenter: String?
    /// How the fact entered, recorded with a signed store's claim (`IngestPath.via`).
    let via: String
    let purchaseProcessId: String?
    let walletPolicy: WalletPolicy
    let transferPolicy: TransferPolicy
    let catalogs: [String: Catalog]

    func run(_ r: Records, _ item: IngestItem) throws -> IngestResult {
        var changes: [IngestChange] = []
        if let info = item.renewalInfo?.payload {
            let stored = try r.storedRenewalCopy(of: info)
            if stored.map({ NewestCopy.isNewer(info.signedDate, info.raw, than: $0.signedAtMs, $0.raw ?? .null) }) ?? true {
                try r.keepRenewalInfo(info, jws: item.renewalInfo!.jws)
                changes.append(.renewalInfoStored(originalTransactionId: info.originalTransactionId))
            }
        }
        guard let transaction = item.transaction else {
            let owner = try item.renewalInfo.flatMap { try r.linkOwner(originalTransactionId: $0.payload.originalTransactionId) }
            return IngestResult(outcome: nil, owner: owner, changes: changes)
        }
        let fact = PurchaseFact(appStore: transaction.payload)
        var copies = try AppStoreCopies(r, transaction)
        return try apply(r, fact, product: catalogs[fact.appId]?[fact.productId], copies: &copies, changes: changes)
    }

    /// The one apply's sequence for one fact of any store: read what the plan needs, ask the core (`IngestPlan`), carry the
    /// plan out with the store's copies (`StoreCopies`: keep, link, claim) and the store-neutral calls (customer, ledger,
    /// timeline).
    func apply(_ r: Records, _ fact: PurchaseFact, product: Product?, copies: inout some StoreCopies,
               changes: [IngestChange]) throws -> IngestResult {
        var changes = changes
        let linkOwner = try copies.linkOwner(r, chainId: fact.chainId)
        // Every customer the plan may name as the owner (the token's, the presenter, the link's), in one read.
        let candidates = try r.ownerCandidates(token: fact.owner.accountToken, ids: [presenter, linkOwner].compactMap { $0 })
        let plan = try decide(fact, product: product, stored: copies.stored, linkOwner: linkOwner, tokenOwner: candidates.tokenOwner)
        if plan.keepsCopy {
            try copies.keep(r, owner: plan.copyOwner)
            changes.append(.transactionStored(transactionId: fact.periodId))
        }
        let owner: String
        switch plan.step {
        case .refuseOwnerConflict:
            preconditionFailure("refused above")
        case .keep(let reason, let keptFor, let retryLater):
            return IngestResult(outcome: .notApplied(reason), owner: keptFor, changes: changes, retryLater: retryLater)
        case .claim(let o, _), .revoked(let o, _):
            owner = o
        }

        let (customer, created) = try r.ensureCustomer(owner, among: candidates)
        if created { changes.append(.customerCreated(customerId: owner)) }
        if try copies.link(r, plan.ownership, linkedBefore: linkOwner) {
            if case .transfer(let from, let to) = plan.ownership {
                changes.append(.transferred(originalTransactionId: fact.chainId, from: from, to: to))
            } else {
                changes.append(.linked(originalTransactionId: fact.chainId, customerId: owner))
            }
        }
        var result = IngestResult(outcome: nil, owner: owner, changes: changes)
        result.ownerRow = customer
        if case .claim(_, let grant) = plan.step {
            // Claim at once: a claim that inserts nothing means it was applied before (by any path, process or thread).
            let applied = AppliedPurchase(transactionId: fact.periodId, customerId: owner, grant: grant.json, appliedAtMs: r.nowMs)
            if try copies.claim(r, applied, via: via, purchaseProcessId: purchaseProcessId) {
                let credit = copies.credit(fact, grant: grant, via: via, purchaseProcessId: purchaseProcessId)
                try IngestLedger.credit(r, fact, grant: grant, customerId: owner, reference: fact.periodId, effectKey: credit.effectKey,
                                        detail: credit.ledgerDetail)
                try r.recordTimeline(customerId: owner, kind: credit.timelineKind, reference: fact.periodId, detail: credit.timelineDetail)
                result.changes.append(.purchaseApplied(applied, grant))
                result.outcome = .applied(applied)
                return result
            }
        }
        guard let existing = try copies.applied(r, periodId: fact.periodId) else {
            guard case .revoked(_, let at) = plan.step else {
                throw KakinError(.internalError, detail: "transaction \(fact.periodId) claimed but not found")
            }
            // Revoked before it was ever applied: kept and linked, nothing granted.
            result.outcome = .revoked(revocationDateMs: at)
            return result
        }
        if let step = try IngestLedger.reconcileRefunds(r, fact, revocation: plan.revocation, policy: walletPolicy) {
            result.changes.append(.refundReconciled(transactionId: fact.periodId, customerId: step.customerId, step.step))
        }
        result.outcome = .alreadyProcessed(existing)
        return result
    }

    /// What the write reads for one fact, and the core's plan over it; another customer's chain on a refusing path throws
    /// `belongs_to_another_customer`.
    private func decide(_ fact: PurchaseFact, product: Product?, stored: IngestPlan.StoredCopy?, linkOwner: String?,
                        tokenOwner: String?) throws -> IngestPlan {
        let read = IngestPlan.Read(stored: stored, linkOwner: linkOwner, tokenOwner: tokenOwner)
        let plan = IngestPlan.decide(fact, product: product, options: options, presenter: presenter, policy: transferPolicy, read: read)
        if case .refuseOwnerConflict = plan.step {
            throw KakinError(.belongsToAnotherCustomer, detail: "original transaction \(fact.chainId) is linked to another customer")
        }
        return plan
    }

    /// Whether `run` would change anything for `item` over what is stored now (`Ingest.wouldChange`): a newer signed copy
    /// kept, a chain linked or moved, a purchase claimed.
    func wouldChange(_ r: Records, _ item: IngestItem) throws -> Bool {
        if let info = item.renewalInfo?.payload,
           try r.storedRenewalCopy(of: info).map({ NewestCopy.isNewer(info.signedDate, info.raw, than: $0.signedAtMs, $0.raw ?? .null) }) ?? true {
            return true
        }
        guard let tx = item.transaction?.payload else { return false }
        let fact = PurchaseFact(appStore: tx)
        let chain = try r.storedChain(of: tx)
        let linkOwner = chain.linkOwner
        let plan = try decide(fact, product: catalogs[fact.appId]?[fact.productId], stored: chain.copy?.plan, linkOwner: linkOwner,
                              tokenOwner: try fact.owner.accountToken.flatMap(r.customerOwning(appAccountToken:)))
        switch plan.step {
        case .refuseOwnerConflict, .keep:
            return plan.keepsCopy
        case .claim(let owner, _):
            return try plan.keepsCopy || linkOwner != owner || r.appliedPurchase(fact.periodId) == nil
        case .revoked(let owner, _):
            return plan.keepsCopy || linkOwner != owner
        }
    }

    static func purchaseDetail(_ fact: PurchaseFact, via: String, purchaseProcessId: String?) -> JSONValue {
        var detail: [String: JSONValue] = ["productId": .string(fact.productId), "quantity": .int(Int64(fact.quantity)), "via": .string(via)]
        if let p = purchaseProcessId { detail["purchaseProcessId"] = .string(p) }
        return .object(detail)
    }
}

/// What differs per store in the one apply's write: where the period's copy is kept, what moves with a chain's link, how
/// a period is claimed once and what its credit is keyed by (the App Store's signed transactions; Play's orders and
/// tokens, `PlayCopies`; a provider's purchase row, `ExternalCopies`). Everything else is store-neutral. The signed
/// stores share the defaults below (`original_links`, `applied_transactions`, the ledger's `purchase:<period>` key).
protocol StoreCopies {
    /// The period's copy stored before this write, as the plan needs it.
    var stored: IngestPlan.StoredCopy? { get }
    /// The customer the fact's chain is linked to.
    func linkOwner(_ r: Records, chainId: String) throws -> String?
    /// Keeps the fact's copy (the plan said it is the newest) for `owner`, or the chain's link.
    mutating func keep(_ r: Records, owner: String?) throws
    /// Carries out the ownership decision for the chain; whether its link changed.
    func link(_ r: Records, _ decision: Ownership.Decision, linkedBefore: String?) throws -> Bool
    /// Claims the period for its owner at once: false when it was applied before (by any path, process or thread).
    mutating func claim(_ r: Records, _ applied: AppliedPurchase, via: String, purchaseProcessId: String?) throws -> Bool
    /// The period as it was applied before, nil when it never was.
    func applied(_ r: Records, periodId: String) throws -> AppliedPurchase?
    /// What a claimed period's ledger credit and timeline entry say.
    func credit(_ fact: PurchaseFact, grant: PurchaseGrant, via: String, purchaseProcessId: String?) -> StoreCredit
}

/// A claimed period's ledger credit (its effect key and detail) and its timeline entry.
struct StoreCredit {
    var effectKey: String
    var ledgerDetail: JSONValue
    var timelineKind: String
    var timelineDetail: JSONValue
}

extension StoreCopies {
    func linkOwner(_ r: Records, chainId: String) throws -> String? {
        try r.linkOwner(originalTransactionId: chainId)
    }

    mutating func claim(_ r: Records, _ applied: AppliedPurchase, via: String, purchaseProcessId: String?) throws -> Bool {
        try r.claimPurchase(applied, via: via, purchaseProcessId: purchaseProcessId)
    }

    func applied(_ r: Records, periodId: String) throws -> AppliedPurchase? {
        try r.appliedPurchase(periodId)
    }

    func credit(_ fact: PurchaseFact, grant: PurchaseGrant, via: String, purchaseProcessId: String?) -> StoreCredit {
        StoreCredit(effectKey: "purchase:\(fact.periodId)", ledgerDetail: IngestWrite.purchaseDetail(fact, via: via, purchaseProcessId: purchaseProcessId),
                    timelineKind: "purchase.applied", timelineDetail: [
                        "productId": .string(fact.productId), "via": .string(via), "grant": grant.json,
                        "purchaseProcessId": .string(purchaseProcessId),
                    ])
    }
}

/// The App Store's copies: the newest signed transaction per transaction id, linked by original transaction. What the
/// write needs of the chain before deciding is read in one statement (`Records.storedChain`).
struct AppStoreCopies: StoreCopies {
    let transaction: VerifiedTransaction
    let chain: StoredChain
    /// Whom `keep` stored a new row for in this write (nil: it stored none).
    private var keptNewRowFor: String?

    init(_ r: Records, _ transaction: VerifiedTransaction) throws {
        self.transaction = transaction
        chain = try r.storedChain(of: transaction.payload)
    }

    var stored: IngestPlan.StoredCopy? { chain.copy?.plan }

    func linkOwner(_ r: Records, chainId: String) throws -> String? {
        precondition(chainId == transaction.payload.originalTransactionId, "the chain read is this transaction's")
        return chain.linkOwner
    }

    mutating func keep(_ r: Records, owner: String?) throws {
        try r.keepTransaction(transaction.payload, jws: transaction.jws, owner: owner, replacing: chain.copy)
        // A new row takes `owner`, else the chain's link (its owner kept by a replaced row, read in `chain`).
        if chain.copy == nil { keptNewRowFor = owner ?? chain.linkOwner }
    }

    func link(_ r: Records, _ decision: Ownership.Decision, linkedBefore: String?) throws -> Bool {
        // The chain's only stored transaction is this one: whoever it was stored for owns every row of the chain.
        let rowsOwner = chain.hasOtherTransactions ? nil : chain.copy.map(\.customerId) ?? keptNewRowFor
        return try r.apply(decision, for: transaction.payload, linkedBefore: linkedBefore, rowsOwner: rowsOwner)
    }
}

/// Carries out the path's registered extras (`IngestRegistry`) in the one apply's write.
struct ExtrasRunner: Sendable {
    let extras: [IngestExtra]
    let path: IngestPath
    let context: IngestContext
    /// Whether the write tells its events (the path's `IngestEvents`), which an extra's own events follow.
    let tellsEvents: Bool
    let apple2026: Apple2026Ingest
    let setsToken: @Sendable (_ bundleId: String) -> Bool

    /// Whether the `appAccountToken` extra schedules Set App Account Token for `tx` once it has an owner.
    func schedulesToken(_ tx: TransactionPayload) -> Bool {
        extras.contains(.appAccountToken) && (tx.appAccountToken ?? "").isEmpty && tx.inAppOwnershipType != .familyShared
            && setsToken(tx.bundleId)
    }

    func run(_ r: Records, _ result: IngestResult, _ item: IngestItem) throws {
        let tx = item.transaction?.payload
        for extra in extras {
            switch extra {
            case .appAccountToken:
                if let tx, let customer = result.ownerRow, schedulesToken(tx) { try r.scheduleAppAccountToken(for: tx, customer: customer) }
            case .serverFinish:
                if !result.retryLater, let tx, case .applied(let applied)? = result.outcome {
                    try apple2026.scheduleServerFinish(r, tx, customerId: applied.customerId)
                }
            case .serverFinishAppSent:
                if let tx, tx.type == .consumable, case .alreadyProcessed? = result.outcome { try r.serverFinishAppSent(transactionId: tx.transactionId) }
            case .appTransactionLink:
                if !result.retryLater, let tx { try apple2026.linkAppTransaction(r, tx, owner: result.owner, tellsEvents: tellsEvents) }
            case .consumptionJob:
                guard let notification = context.notification else { preconditionFailure("path \(path) applies a notification") }
                if !result.retryLater, var job = notification.consumption {
                    job.customerId = result.owner
                    try r.scheduleConsumptionAnswer(job, nextAttemptMs: notification.firstAttemptMs)
                }
            case .playAcknowledgement, .playNotificationState:
                preconditionFailure("Google Play's extras are carried out by Ingest.applyPlay")
            case .notificationState:
                guard let notification = context.notification else { preconditionFailure("path \(path) applies a notification") }
                if !result.retryLater {
                    try r.markNotification(notification.notificationUUID, state: .applied, customerId: result.owner,
                                           originalTransactionId: tx?.originalTransactionId ?? item.renewalInfo?.payload.originalTransactionId)
                }
            }
        }
    }
}
