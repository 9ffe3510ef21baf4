import Foundation

/// The App Store as the app sees it: StoreKit 2's role. `KakinKitStoreKit` is the real one,
/// `KakinKitSimulator` plays it against Kakin's App Store simulator. The coordinator never looks inside a
/// transaction beyond these fields: Kakin verifies the signed copy.
public protocol Store: Sendable {
    /// `Transaction.updates`: purchases made elsewhere (Ask to Buy approvals, other devices, offer codes),
    /// renewals, refunds and revocations, and every unfinished transaction once when listening starts.
    /// Ends when the caller stops iterating.
    func updates() -> AsyncStream<StoreTransaction>
    /// `Transaction.unfinished`: paid (or changed) and not yet finished, oldest first.
    func unfinished() async -> [StoreTransaction]
    /// `Transaction.currentEntitlements`: what the account owns now (never consumables).
    func currentEntitlements() async -> [StoreTransaction]
    /// `Product.products(for:)`.
    func products(for ids: [String]) async throws(KakinKitError) -> [StoreProduct]
    /// `Product.purchase(options:)`. Cancelled and pending are results, not errors; a throw means the store
    /// charged nothing.
    func purchase(_ productID: String, options: StorePurchaseOptions) async throws(KakinKitError) -> StorePurchaseResult
    /// `Transaction.finish()`: only after Kakin answered 201 or 409 (or recorded a revocation).
    func finish(_ transaction: StoreTransaction) async
    /// `AppStore.sync()`: asks the App Store for the account's latest transactions (may ask for a password).
    func sync() async throws(KakinKitError)
    /// `AppTransaction.shared`'s `appTransactionID`: names a customer who never bought anything, so Kakin can sign
    /// their introductory-offer eligibility. Nil when the store cannot tell (an older OS).
    func appTransactionID() async -> String?
}

/// A signed transaction as the store handed it over.
public struct StoreTransaction: Sendable, Equatable, Hashable, Codable {
    /// `transactionId` (StoreKit's `id`, as a decimal string like Kakin and Apple's server use).
    public var id: String
    public var originalID: String
    public var productID: String
    public var productType: ProductType
    public var expirationDate: Date?
    /// Set when refunded or revoked (the App Store re-signs the transaction).
    public var revocationDate: Date?
    /// `jwsRepresentation`: what Kakin verifies and credits.
    public var jwsRepresentation: String

    public init(id: String, originalID: String, productID: String, productType: ProductType, expirationDate: Date? = nil,
                revocationDate: Date? = nil, jwsRepresentation: String) {
        self.id = id
        self.originalID = originalID
        self.productID = productID
        self.productType = productType
        self.expirationDate = expirationDate
        self.revocationDate = revocationDate
        self.jwsRepresentation = jwsRepresentation
    }
}

/// StoreKit's product types, by the names Apple's signed data uses (`type` in a transaction).
public enum ProductType: String, Sendable, Codable, CaseIterable {
    case consumable = "Consumable"
    case nonConsumable = "Non-Consumable"
    case nonRenewable = "Non-Renewing Subscription"
    case autoRenewable = "Auto-Renewable Subscription"
}

/// A product the store sells, for the shop screen.
public struct StoreProduct: Sendable, Equatable, Codable {
    public var id: String
    public var type: ProductType
    public var displayName: String
    /// Localized by the store (`¥600`); empty when the store gave none.
    public var displayPrice: String

    public init(id: String, type: ProductType, displayName: String, displayPrice: String) {
        self.id = id
        self.type = type
        self.displayName = displayName
        self.displayPrice = displayPrice
    }
}

/// What a purchase carries besides the product.
public struct StorePurchaseOptions: Sendable, Equatable {
    /// The customer's `appAccountToken` from Kakin: links the transaction to the customer.
    public var appAccountToken: UUID
    public var quantity: Int
    /// A promotional offer signed by Kakin.
    public var offer: SignedOffer?
    /// Kakin's signed decision on the introductory offer (compact JWS): StoreKit's
    /// `.introductoryOfferEligibility(compactJWS:)`, which the App Store follows instead of its own.
    public var introductoryOfferEligibility: String?

    public init(appAccountToken: UUID, quantity: Int = 1, offer: SignedOffer? = nil, introductoryOfferEligibility: String? = nil) {
        self.appAccountToken = appAccountToken
        self.quantity = quantity
        self.offer = offer
        self.introductoryOfferEligibility = introductoryOfferEligibility
    }
}

/// A promotional offer signature made by Kakin (`POST /v1/customers/{id}/offers/signatures`).
public enum SignedOffer: Sendable, Equatable {
    /// StoreKit's `.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`; `signature` is base64 DER.
    case legacy(offerID: String, keyID: String, nonce: UUID, signature: String, timestamp: Int64)
    /// StoreKit's `.promotionalOffer(_:compactJWS:)` (promotional offer V2).
    case jws(offerID: String, compactJWS: String)

    public var offerID: String {
        switch self {
        case .legacy(let id, _, _, _, _), .jws(let id, _): return id
        }
    }
}

public enum StorePurchaseResult: Sendable, Equatable {
    /// Paid: the transaction is unfinished until `finish`.
    case purchased(StoreTransaction)
    /// Waiting for someone (Ask to Buy, Strong Customer Authentication); the outcome arrives in `updates()`.
    case pending
    case cancelled
}
