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

    public enum NotApplied: Sendable, Hashable {
        /// Nobody owns it yet: the customer's POST or restore links it later.
        case noOwner
        /// Its chain belongs to this other customer.
        case ownedByAnother(String)
        /// Its product is not in the app's catalog.
        case unknownProduct
    }
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
    /// The owner's status inputs as the write left them, when asked for and read in the write (`withStatus`).
    public var statusSnapshot: CustomerSnapshot?
    /// Events the write appended (for every customer it changed).
    public var eventsAppended = 0

    init(outcome: IngestOutcome?, owner: String?, changes: [IngestChange], retryLater: Bool = false) {
        self.outcome = outcome
        self.owner = owner
        self.changes = changes
        self.retryLater = retryLater
    }
}

/// The one ingest path of App Store facts: verify (once) → decode → resolve the owner → plan the effect with the
/// core's pure rules → apply it all in ONE database transaction → return the typed change. Every path uses it:
/// the app's POST, the notification worker, restores, receipts, subscription refreshes, the desk; they differ
/// only by `IngestPath.options`.
public struct Ingest: Sendable {
    let store: KakinStore
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

    /// Stores the facts and applies their effects in one database transaction.
    /// - Parameters:
    ///   - presenter: the customer presenting the facts (required when the path's owner is `presenter`).
    ///   - withStatus: the caller answers with the owner's status: on SQLite (one writer, nothing to conflict with) its
    ///     rows are read in the same write, saving a read of their own after it; on PostgreSQL the caller reads them after
    ///     the commit (a SERIALIZABLE write reading them would lock index pages other customers' purchases write).
    ///   - alsoInWrite: more records the caller writes in the same transaction (a notification's state), given what
    ///     the ingest decided.
    ///   - recordsEvents: whether the changes are told as events (an import tells them only when asked).
    public func apply(transaction: VerifiedTransaction?, renewalInfo: VerifiedRenewalInfo? = nil, path: IngestPath,
                      presenter: String? = nil, purchaseProcessId: String? = nil, withStatus: Bool = false, recordsEvents: Bool = true,
                      alsoInWrite: (@Sendable (Records, IngestResult) throws -> Void)? = nil) async throws(KakinError) -> IngestResult {
        let options = path.options
        precondition(options.owner == .currentOwner || presenter != nil, "path \(path) needs the presenting customer")
        let product = transaction.flatMap { catalogs[$0.payload.bundleId]?[$0.payload.productId] }
        if let tx = transaction?.payload, product == nil, options.unknownProduct == .refuse {
            throw KakinError(.unknownProduct, "Product \(tx.productId) is not in this server's catalog.")
        }
        let setsToken = transaction.map { ($0.payload.appAccountToken ?? "").isEmpty && setsAppAccountTokens($0.payload.bundleId) } ?? false
        let plan = Plan(options: options, presenter: options.owner == .presenter ? presenter : nil, product: product, path: path,
                        purchaseProcessId: purchaseProcessId, walletPolicy: walletPolicy, transferPolicy: transferPolicy, setsToken: setsToken)
        let result = try await store.transaction { r in
            var result = try plan.run(r, transaction: transaction, renewalInfo: renewalInfo)
            let recorded = recordsEvents
                ? try events.record(r, result.changes, transaction: transaction?.payload ?? nil, renewalInfo: renewalInfo?.payload, owner: result.owner)
                : (appended: 0, ownerSnapshot: nil)
            result.eventsAppended = recorded.appended
            try alsoInWrite?(r, result)
            if withStatus, r.dialect == .sqlite, result.outcome?.isAnsweredWithStatus == true, let owner = result.owner {
                // The events' read of the owner's status inputs is the answer's, when the write changed something.
                if let snapshot = recorded.ownerSnapshot {
                    result.statusSnapshot = snapshot
                } else if var snapshot = try r.statusInputs(owner) {
                    if StatusInputs.needsWholeHistory(snapshot.history.transactions) { snapshot = try r.wholeHistory(snapshot.customer) }
                    result.statusSnapshot = snapshot
                }
            }
            return result
        }
        switch result.outcome {
        case .applied?: metrics.increment(.purchasesApplied)
        case .alreadyProcessed?: metrics.increment(.purchasesDuplicate)
        default: break
        }
        if result.retryLater, let tx = transaction?.payload {
            throw KakinError(.unknownProduct, detail: "product \(tx.productId) of transaction \(tx.transactionId) is not in the catalog")
        }
        if setsToken, result.owner != nil { wakeAppStoreJobs() }
        if result.eventsAppended > 0 { events.wake() }
        return result
    }

    /// The decisions of one ingest, run inside the write (a body that may run again on PostgreSQL: it decides only
    /// from what it reads there).
    struct Plan: Sendable {
        let options: IngestOptions
        let presenter: String?
        let product: Product?
        let path: IngestPath
        let purchaseProcessId: String?
        let walletPolicy: WalletPolicy
        let transferPolicy: TransferPolicy
        let setsToken: Bool

        func run(_ r: Records, transaction: VerifiedTransaction?, renewalInfo: VerifiedRenewalInfo?) throws -> IngestResult {
            var changes: [IngestChange] = []
            if let info = renewalInfo, try r.storeRenewalInfo(info.payload, jws: info.jws) {
                changes.append(.renewalInfoStored(originalTransactionId: info.payload.originalTransactionId))
            }
            guard let transaction else {
                let owner = try renewalInfo.flatMap { try r.linkOwner(originalTransactionId: $0.payload.originalTransactionId) }
                return IngestResult(outcome: nil, owner: owner, changes: changes)
            }
            let tx = transaction.payload
            let linkOwner = try r.linkOwner(originalTransactionId: tx.originalTransactionId)
            let decision = Ownership.decide(
                presenter: presenter, linkOwner: linkOwner,
                tokenOwner: try tx.appAccountToken.flatMap(r.customerOwning(appAccountToken:)), policy: transferPolicy)
            if case .refuse = decision, options.ownerConflict == .refuse {
                throw KakinError(.belongsToAnotherCustomer, detail: "original transaction \(tx.originalTransactionId) is linked to another customer")
            }
            // A product this server doesn't know is kept, never linked: its effect is unknown until it is configured.
            let applying = product != nil ? decision.owner : nil
            let stored = try r.storeTransaction(tx, jws: transaction.jws, owner: applying)
            if stored { changes.append(.transactionStored(transactionId: tx.transactionId)) }
            if case .refuse(let owner) = decision {
                return IngestResult(outcome: .notApplied(.ownedByAnother(owner)), owner: owner, changes: changes)
            }
            guard let owner = decision.owner else { return IngestResult(outcome: .notApplied(.noOwner), owner: nil, changes: changes) }
            guard let product else {
                return IngestResult(outcome: .notApplied(.unknownProduct), owner: owner, changes: changes,
                                    retryLater: options.unknownProduct == .retryLater)
            }

            let (customer, created) = try r.ensureCustomer(owner)
            if created { changes.append(.customerCreated(customerId: owner)) }
            if try r.apply(decision, for: tx, linkedBefore: linkOwner) {
                if case .transfer(let from, let to) = decision {
                    changes.append(.transferred(originalTransactionId: tx.originalTransactionId, from: from, to: to))
                } else {
                    changes.append(.linked(originalTransactionId: tx.originalTransactionId, customerId: owner))
                }
            }
            // Apple takes the token for the purchaser's own copy only (not a family member's).
            if setsToken, tx.inAppOwnershipType != .familyShared { try r.scheduleAppAccountToken(for: tx, customer: customer) }

            // The newest stored copy decides (a refund may have arrived before the purchase was presented): this one
            // when it was stored, else the newer one already there.
            let revokedAt = stored ? tx.revocationDate : try r.storedRevocationDate(tx.transactionId)
            let grant = PurchaseGrant.of(product, transaction: tx)
            let applied = AppliedPurchase(transactionId: tx.transactionId, customerId: owner, grant: grant.json, appliedAtMs: r.nowMs)
            // Not revoked: claim at once (a claim that inserts nothing means it was applied before); revoked: only a
            // purchase applied before moves (its refund), a new one is kept and grants nothing.
            guard revokedAt == nil, try r.claimPurchase(applied, via: path.via, purchaseProcessId: purchaseProcessId) else {
                guard let existing = try r.appliedPurchase(tx.transactionId) else {
                    guard let revokedAt else { throw KakinError(.internalError, detail: "transaction \(tx.transactionId) claimed but not found") }
                    return IngestResult(outcome: .revoked(revocationDateMs: revokedAt), owner: owner, changes: changes)
                }
                if let step = try reconcileRefunds(r, tx.transactionId) {
                    changes.append(.refundReconciled(transactionId: tx.transactionId, customerId: step.customerId, step.step))
                }
                return IngestResult(outcome: .alreadyProcessed(existing), owner: owner, changes: changes)
            }
            if case .coins(let paid, let free) = grant {
                var detail: [String: JSONValue] = ["productId": .string(tx.productId), "quantity": .int(Int64(tx.quantity)), "via": .string(path.via)]
                if let p = purchaseProcessId { detail["purchaseProcessId"] = .string(p) }
                try r.moveCoins(LedgerMovement(
                    entryId: r.newEntryId(), customerId: owner, atMs: r.nowMs, kind: .purchase, paid: paid, free: free,
                    reference: tx.transactionId, effectKey: "purchase:\(tx.transactionId)", priceMilli: tx.price, currency: tx.currency,
                    detail: .object(detail)))
            }
            try r.recordTimeline(customerId: owner, kind: "purchase.applied", reference: tx.transactionId, detail: [
                "productId": .string(tx.productId), "via": .string(path.via), "grant": grant.json, "purchaseProcessId": .string(purchaseProcessId),
            ])
            precondition(applied.customerId == owner && decision.owner == owner, "a purchase is applied to its chain's owner")
            changes.append(.purchaseApplied(applied, grant))
            return IngestResult(outcome: .applied(applied), owner: owner, changes: changes)
        }

        /// Moves a credited consumable's coins one step toward what the newest stored copy says (`RefundReconciliation`).
        func reconcileRefunds(_ r: Records, _ transactionId: String) throws -> (customerId: String, step: RefundReconciliation.Step)? {
            guard let purchase = try r.purchaseLedger(transactionId) else { return nil }
            let revokedAt = try r.storedRevocationDate(transactionId)
            // A prorated refund (API 1.19) takes back its share only: read from the newest copy when it is revoked.
            let share = revokedAt == nil ? WalletRules.fullShareMilli : try r.storedRevokedShareMilli(transactionId)
            let step = RefundReconciliation.step(purchase.ledger, revoked: revokedAt != nil, revokedShareMilli: share,
                                                 balance: try r.wallet(purchase.customerId), policy: walletPolicy)
            switch step {
            case .none:
                return nil
            case .refund(let paid, let free, let shortfall, let number):
                var detail: [String: JSONValue] = ["revocationDate": .int(revokedAt ?? 0)]
                if shortfall > 0 { detail["shortfall"] = .int(shortfall) }
                if share < WalletRules.fullShareMilli { detail["revokedShareMilli"] = .int(Int64(share)) }
                let after = try r.moveCoins(LedgerMovement(
                    entryId: r.newEntryId(), customerId: purchase.customerId, atMs: r.nowMs, kind: .refund, paid: paid, free: free,
                    reference: transactionId, effectKey: "refund:\(transactionId):\(number)", priceMilli: purchase.priceMilli.map { -$0 },
                    currency: purchase.currency, detail: .object(detail)))
                precondition(walletPolicy.allowNegativeBalance || (after.paid >= 0 && after.free >= 0),
                             "a refund under the floor-at-zero policy never takes a balance below zero")
                try r.recordTimeline(customerId: purchase.customerId, kind: "purchase.refunded", reference: transactionId, detail: .object(detail))
            case .reverse(let paid, let free, let number):
                try r.moveCoins(LedgerMovement(
                    entryId: r.newEntryId(), customerId: purchase.customerId, atMs: r.nowMs, kind: .refundReversed, paid: paid, free: free,
                    reference: transactionId, effectKey: "refundReversed:\(transactionId):\(number)", priceMilli: purchase.priceMilli,
                    currency: purchase.currency))
                try r.recordTimeline(customerId: purchase.customerId, kind: "purchase.refundReversed", reference: transactionId, detail: .null)
            }
            return (purchase.customerId, step)
        }
    }
}
