/// The named choices that tell one ingest path from another (`KakinService`'s `IngestPath.options`).
public struct IngestOptions: Sendable, Hashable {
    /// Who gets the purchase.
    public enum Owner: String, Sendable {
        /// The customer presenting it (the route's `{customerId}`), per the transfer policy.
        case presenter
        /// Whoever owns its chain now (`Ownership.currentOwner`); nobody yet: stored, linked when presented.
        case currentOwner
    }

    /// A product missing from the app's catalog.
    public enum UnknownProduct: String, Sendable {
        /// 422 `unknown_product`; nothing stored.
        case refuse
        /// Stored (support sees it; a later presentation applies it once the product is configured), not applied.
        case keepUnclaimed
        /// Stored; when the purchase has an owner the ingest fails with `unknown_product`, so the notification is
        /// retried (the operator may add the product) and ends `dead`, never dropped. Without an owner: kept.
        case retryLater
    }

    /// The purchase's chain belongs to a customer other than the presenter, and the policy keeps the first owner.
    public enum OwnerConflict: String, Sendable {
        /// 403 `belongs_to_another_customer`; nothing stored.
        case refuse
        /// Stored for its owner; nothing applied for the presenter.
        case keepUnclaimed
    }

    /// Renewal info that fails verification.
    public enum RenewalInfo: String, Sendable {
        /// The ingest fails with the verification error (a notification is retried, then dead).
        case mustVerify
        /// Skipped and counted (`kakin_verification_failures_total`); the rest of the facts still apply.
        case skipUnverifiable
    }

    public var owner: Owner
    public var unknownProduct: UnknownProduct
    public var ownerConflict: OwnerConflict
    public var renewalInfo: RenewalInfo

    public init(owner: Owner, unknownProduct: UnknownProduct, ownerConflict: OwnerConflict, renewalInfo: RenewalInfo) {
        self.owner = owner
        self.unknownProduct = unknownProduct
        self.ownerConflict = ownerConflict
        self.renewalInfo = renewalInfo
    }
}

/// The one apply's decisions, pure: given a purchase fact, the catalog's product, the path's options and what the write
/// read (the stored copy, the chain's link, the token's owner), what the write does. `KakinService`'s `Ingest` reads,
/// asks the plan, and carries the answer out with a small, fixed set of repository calls (keep the copy, link, claim,
/// move coins, record), so the rows a write touches are decided here, for every store alike.
///
/// The sequence: keep the newest copy (`NewestCopy`) → who owns the chain (`Ownership`) → what the purchase grants
/// (`PurchaseGrant`) → claim the period once; applied before → one step of its refunds (`RefundReconciliation`), the
/// coins taken back under the wallet policy (`clawback`, the one clawback rule and floor check every source uses).
public struct IngestPlan: Sendable, Hashable {
    /// What the write read before deciding.
    public struct Read: Sendable, Hashable {
        /// The copy of the period stored before this write, if any.
        public var stored: StoredCopy?
        /// The customer the chain is linked to.
        public var linkOwner: String?
        /// The customer owning the fact's account token.
        public var tokenOwner: String?

        public init(stored: StoredCopy?, linkOwner: String?, tokenOwner: String?) {
            self.stored = stored
            self.linkOwner = linkOwner
            self.tokenOwner = tokenOwner
        }
    }

    /// The stored copy as the plan needs it: its date (and text, read only when the dates tie) and its revocation.
    public struct StoredCopy: Sendable, Hashable {
        public var signedAtMs: Int64
        /// The stored copy's JSON, needed only when `signedAtMs` ties with the new copy's (nil otherwise).
        public var raw: JSONValue?
        public var revocation: PurchaseFact.Revocation?

        public init(signedAtMs: Int64, raw: JSONValue?, revocation: PurchaseFact.Revocation?) {
            self.signedAtMs = signedAtMs
            self.raw = raw
            self.revocation = revocation
        }
    }

    /// What the write does with the fact once its copy is kept (or not) and the chain's owner decided.
    public enum Step: Sendable, Hashable {
        /// Refuse the whole write (`belongs_to_another_customer`): nothing stored.
        case refuseOwnerConflict(owner: String)
        /// Stored, not applied.
        case keep(NotApplied, owner: String?, retryLater: Bool)
        /// Claim the period for `owner` with `grant`: a claim that inserts nothing means it was applied before, then
        /// reconcile its refunds instead.
        case claim(owner: String, grant: PurchaseGrant)
        /// The newest copy is revoked: a purchase applied before follows its refund; a new one grants nothing.
        case revoked(owner: String, atMs: Int64)
    }

    public enum NotApplied: Sendable, Hashable {
        case noOwner
        case ownedByAnother(String)
        case unknownProduct
    }

    /// Whether this fact's copy becomes the stored one (new, newer than the stored one, or a final store's copy bringing
    /// a refund the stored one lacks).
    public var keepsCopy: Bool
    public var ownership: Ownership.Decision
    /// The owner the stored copy is written for (nil: its chain's link, if any; an unknown product is never linked).
    public var copyOwner: String?
    public var step: Step
    /// The revocation the newest copy carries (this one when it is kept, else the stored one).
    public var revocation: PurchaseFact.Revocation?

    /// - Parameters:
    ///   - presenter: the customer presenting the fact, nil when it arrived on its own (`IngestOptions.Owner.currentOwner`).
    ///   - product: the catalog's product, nil when the app's catalog does not know it.
    public static func decide(_ fact: PurchaseFact, product: Product?, options: IngestOptions, presenter: String?,
                              policy: TransferPolicy, read: Read) -> IngestPlan {
        precondition(options.owner == .currentOwner || presenter != nil, "a presenting path names its presenter")
        // A final refund (Play's) is kept even when its read ties with, or trails, the stored one: reads are dated by
        // Kakin's clock, and a refund told in the same millisecond as the purchase's read must not be lost to the tie.
        let bringsFinalRefund = fact.store.revocationsAreFinal && fact.revocation.map { new in
            read.stored?.revocation.map { new.shareMilli(ofQuantity: fact.quantity) > $0.shareMilli(ofQuantity: fact.quantity) } ?? true
        } == true
        let keepsCopy = bringsFinalRefund || read.stored.map { stored in
            NewestCopy.isNewer(fact.signedAtMs, fact.raw, than: stored.signedAtMs, stored.raw ?? .null)
        } ?? true
        let ownership = Ownership.decide(presenter: options.owner == .presenter ? presenter : nil, linkOwner: read.linkOwner,
                                         tokenOwner: read.tokenOwner, policy: policy)
        let revocation = keepsCopy ? fact.revocation : read.stored?.revocation
        var plan = IngestPlan(keepsCopy: keepsCopy, ownership: ownership, copyOwner: product != nil ? ownership.owner : nil,
                              step: .keep(.noOwner, owner: nil, retryLater: false), revocation: revocation)
        if case .refuse(let owner) = ownership {
            plan.step = options.ownerConflict == .refuse ? .refuseOwnerConflict(owner: owner) : .keep(.ownedByAnother(owner), owner: owner, retryLater: false)
            return plan
        }
        guard let owner = ownership.owner else { return plan }
        guard let product else {
            plan.step = .keep(.unknownProduct, owner: owner, retryLater: options.unknownProduct == .retryLater)
            return plan
        }
        if let revocation {
            plan.step = .revoked(owner: owner, atMs: revocation.atMs)
        } else {
            plan.step = .claim(owner: owner, grant: PurchaseGrant.of(product, quantity: fact.quantity, originalTransactionId: fact.chainId,
                                                                     purchaseDateMs: fact.purchasedAtMs, expiresAtMs: fact.expiresAtMs))
        }
        return plan
    }

    /// A period applied before: one step of its refunds toward what the newest copy says (`revocation`, from the plan).
    public static func reconcile(_ ledger: RefundReconciliation.Ledger, revocation: PurchaseFact.Revocation?, quantity: Int,
                                 balance: WalletBalance, policy: WalletPolicy) -> RefundReconciliation.Step {
        RefundReconciliation.step(ledger, revoked: revocation != nil,
                                  revokedShareMilli: revocation?.shareMilli(ofQuantity: quantity) ?? WalletRules.fullShareMilli,
                                  balance: balance, policy: policy)
    }

    /// The one clawback rule: a refund takes back `paid` + `free` of what a purchase credited, stopped at zero under
    /// the floor-at-zero policy (the rest is the shortfall). Every source's refunds debit through it.
    public static func clawback(paid: Int64, free: Int64, balance: WalletBalance, policy: WalletPolicy) -> (paid: Int64, free: Int64, shortfall: Int64) {
        precondition(paid >= 0 && free >= 0, "a clawback takes back coins, never gives")
        return WalletRules.refundDebit(paid: paid, free: free, of: balance, policy: policy)
    }

    /// The one floor check after a refund's debit: under the floor-at-zero policy no balance goes below zero.
    public static func checkFloor(_ after: WalletBalance, policy: WalletPolicy) {
        precondition(policy.allowNegativeBalance || (after.paid >= 0 && after.free >= 0),
                     "a refund under the floor-at-zero policy never takes a balance below zero")
    }
}
