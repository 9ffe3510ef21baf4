/// The store a purchase fact comes from. Each has an adapter that turns its verified payload into `PurchaseFact`s
/// (the App Store's: `PurchaseFact(appStore:)`; the external sources': `KakinService/External`; Google Play's: its
/// subscription and product purchases, one fact per order) and a row per ingest path in the path table
/// (`docs/architecture.md`, "One ingest path for every signed fact").
public enum PurchaseStore: Sendable, Hashable {
    case appStore
    /// Google Play: a chain is the first purchase token of a `linkedPurchaseToken` chain, a period its order
    /// (`GPA.…`, renewals `..0`, `..1`), the owner hint `obfuscatedExternalAccountId`.
    case googlePlay
    /// A source outside the stores (`stripe`, the generic source's provider name).
    case external(provider: String)

    /// Whether a refund the store told is never taken back: Google Play's voided purchases are final (a read of the
    /// purchase does not even say it was voided), while Apple reverses refunds (`REFUND_REVERSED`) and a provider may
    /// too. A final store's copy that brings a refund the stored copy lacks is kept whatever the copies' dates
    /// (`IngestPlan.decide`).
    public var revocationsAreFinal: Bool { self == .googlePlay }

    /// The name kept with what the fact left (a ledger entry's `source`: nil for the App Store, as it always was).
    public var ledgerSource: String? {
        switch self {
        case .appStore: return nil
        case .googlePlay: return "googlePlay"
        case .external(let provider): return provider
        }
    }
}

/// What any store says about one purchase (one period of a chain), store-neutral: the one apply
/// (`IngestPlan`, carried out by `KakinService`'s `Ingest`) decides owner, grant and refunds from these fields only;
/// the store-specific copy stays beside it (`raw`) for what only that store needs (status fields, support pages).
public struct PurchaseFact: Sendable, Hashable {
    public var store: PurchaseStore
    /// The app: a bundle id, a package name.
    public var appId: String
    /// The chain's stable id, what ownership links: an original transaction id, the first token of a Play chain,
    /// a provider's subscription id (or the purchase's own id when it has no chain).
    public var chainId: String
    /// This period's id, what is applied once: a transaction id, a Play order id, a provider's payment id.
    public var periodId: String
    public var productId: String
    /// What the store says the product is (the catalog decides what it grants).
    public var storeKind: ProductKind?
    public var quantity: Int
    public var owner: OwnerHints
    public var purchasedAtMs: Int64
    public var expiresAtMs: Int64?
    /// Price in milli-units of `currency` (Apple's unit), when the store tells it.
    public var priceMilli: Int64?
    public var currency: String?
    public var offer: Offer?
    public var revocation: Revocation?
    /// When the store signed (or last changed) this copy: with `raw`, which copy is the newest (`NewestCopy`).
    public var signedAtMs: Int64
    /// Another person's copy of a purchase (Family Sharing): the store's account calls are the buyer's only.
    public var sharedWithFamily: Bool
    /// The store's own copy, as verified (Apple's transaction JSON, Play's purchase resource, a provider's object).
    public var raw: JSONValue

    public init(store: PurchaseStore, appId: String, chainId: String, periodId: String, productId: String, storeKind: ProductKind?,
                quantity: Int, owner: OwnerHints, purchasedAtMs: Int64, expiresAtMs: Int64?, priceMilli: Int64?, currency: String?,
                offer: Offer?, revocation: Revocation?, signedAtMs: Int64, sharedWithFamily: Bool = false, raw: JSONValue) {
        precondition(!chainId.isEmpty && !periodId.isEmpty, "a fact names its chain and its period")
        self.store = store
        self.appId = appId
        self.chainId = chainId
        self.periodId = periodId
        self.productId = productId
        self.storeKind = storeKind
        self.quantity = max(1, quantity)
        self.owner = owner
        self.purchasedAtMs = purchasedAtMs
        self.expiresAtMs = expiresAtMs
        self.priceMilli = priceMilli
        self.currency = currency
        self.offer = offer
        self.revocation = revocation
        self.signedAtMs = signedAtMs
        self.sharedWithFamily = sharedWithFamily
        self.raw = raw
    }

    /// Who the store says the buyer is. Each is a hint: `Ownership` decides, the chain's link first.
    public struct OwnerHints: Sendable, Hashable {
        /// The account token the app set in the purchase flow: App Store `appAccountToken`, Play
        /// `obfuscatedExternalAccountId`. Kakin hands each customer its own.
        public var accountToken: String?
        /// The Kakin customer the source names itself (a provider's customer, mapped by its adapter).
        public var customerId: String?

        public init(accountToken: String? = nil, customerId: String? = nil) {
            self.accountToken = accountToken.flatMap { $0.isEmpty ? nil : $0 }
            self.customerId = customerId
        }
    }

    public struct Offer: Sendable, Hashable {
        /// The store's kind of offer (`AppleOfferType`'s raw value, Play's `offerPhase`, …).
        public var type: String
        public var id: String?

        public init(type: String, id: String?) {
            self.type = type
            self.id = id
        }
    }

    /// A refund or revocation of the period, as the store says it.
    public struct Revocation: Sendable, Hashable {
        public var atMs: Int64
        public var refund: Refund

        public init(atMs: Int64, refund: Refund) {
            self.atMs = atMs
            self.refund = refund
        }

        public enum Refund: Sendable, Hashable {
            /// Everything (Apple's `REFUND_FULL`, `FAMILY_REVOKE`, Play's full refund, a provider's full refund).
            case full
            /// A share in milliunits 0–100000 (Apple's `REFUND_PRORATED` with `revocationPercentage`).
            case prorated(shareMilli: Int)
            /// Some units of a multi-quantity purchase (Play's quantity-based partial refund, `voidedQuantity`).
            case quantity(Int)
        }

        /// The refunded share of a purchase of `quantity` units, in milliunits (what `WalletRules.revocationDebit` takes).
        /// Units refunded are a share rounded up: `revocationDebit` rounds the coins down, so u of q units take back
        /// exactly u units' coins (1 of 3 × 550 coins: 33,334 → 550, where 33,333 took 549) while a unit credits fewer
        /// than 100,000 / (q − 1) coins; never more than the purchase credited.
        public func shareMilli(ofQuantity quantity: Int) -> Int {
            switch refund {
            case .full: return WalletRules.fullShareMilli
            case .prorated(let share): return min(max(share, 0), WalletRules.fullShareMilli)
            case .quantity(let units):
                let q = Int64(max(1, quantity))
                let part = Int64(WalletRules.fullShareMilli) * Int64(min(max(units, 0), Int(q)))
                return Int((part + q - 1) / q)
            }
        }
    }
}

extension PurchaseFact {
    /// The App Store's adapter: one verified signed transaction → one fact (a period of its original transaction's chain).
    public init(appStore tx: TransactionPayload) {
        self.init(store: .appStore, appId: tx.bundleId, chainId: tx.originalTransactionId, periodId: tx.transactionId,
                  productId: tx.productId, storeKind: ProductKind(appleType: tx.type), quantity: tx.quantity,
                  owner: OwnerHints(accountToken: tx.appAccountToken), purchasedAtMs: tx.purchaseDate, expiresAtMs: tx.expiresDate,
                  priceMilli: tx.price, currency: tx.currency,
                  offer: tx.offerType.map { Offer(type: String($0.rawValue), id: tx.offerIdentifier) }, revocation: Revocation(appStore: tx),
                  signedAtMs: tx.signedDate, sharedWithFamily: tx.inAppOwnershipType == .familyShared, raw: tx.raw)
    }
}

extension PurchaseFact.Revocation {
    /// The revocation a signed transaction carries, if revoked (`PurchaseFact(appStore:)`'s, without the rest of the fact).
    public init?(appStore tx: TransactionPayload) {
        guard let at = tx.revocationDate else { return nil }
        let share = tx.revokedShareMilli ?? WalletRules.fullShareMilli
        self.init(atMs: at, refund: share == WalletRules.fullShareMilli ? .full : .prorated(shareMilli: share))
    }
}

/// "Keep the newest copy", the one rule every store's copies follow wherever they are kept (the stored signed copies,
/// a customer's history in the status engine): the later `signedAtMs` wins; equal dates fall to the copy's canonical
/// JSON text, so the pick never depends on arrival order or on how many times a copy arrived.
public enum NewestCopy {
    public static func isNewer(_ signedAtMs: Int64, _ raw: JSONValue, than keptSignedAtMs: Int64, _ keptRaw: JSONValue) -> Bool {
        if signedAtMs != keptSignedAtMs { return signedAtMs > keptSignedAtMs }
        return raw.jsonString > keptRaw.jsonString
    }
}
