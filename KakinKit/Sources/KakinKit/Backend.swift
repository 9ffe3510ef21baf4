import Foundation

/// Kakin's HTTP API as the app uses it. `URLSessionBackend` is the real one; tests use an in-memory Kakin.
/// Every throw is a `KakinKitError` with a `KKN-…` ID.
public protocol Backend: Sendable {
    /// `GET /v1/customers/{id}` (creates the customer and its `appAccountToken` on first use).
    func customer(_ customerID: String) async throws(KakinKitError) -> CustomerStatus
    /// `POST /v1/customers/{id}/transactions` with the signed transaction and `X-Purchase-Process-Id`.
    func submit(_ transaction: StoreTransaction, customerID: String, processID: String) async throws(KakinKitError) -> SubmitResult
    /// `POST /v1/customers/{id}/restore`, with a transaction of the account when the device has one (Kakin
    /// then reads that account's whole history from the App Store).
    func restore(_ customerID: String, transactionID: String?) async throws(KakinKitError) -> CustomerStatus
    /// `GET /v1/customers/{id}/wallet`.
    func wallet(_ customerID: String) async throws(KakinKitError) -> Wallet
    /// `POST /v1/customers/{id}/offers/signatures`. A server without offers answers 404: that is
    /// `ClientError.offersNotSupported`.
    func offerSignature(_ customerID: String, productID: String, offerID: String,
                        format: OfferSignatureFormat) async throws(KakinKitError) -> SignedOffer
    /// `POST /v1/customers/{id}/offers/introductory-eligibility`: the eligibility JWS for a subscription, or nil when
    /// this Kakin has none to give (no such route yet, no key to sign with, or no transaction to name the
    /// customer by: then the App Store's own eligibility applies).
    /// - Parameter appTransactionID: from the store, for a customer who never bought.
    func introductoryOfferEligibility(_ customerID: String, productID: String, appTransactionID: String?) async throws(KakinKitError) -> String?
    /// `GET /v1/customers/{id}/offerings?placement=…&platform=ios[&appVersion][&country]`: what the placement shows.
    func offering(_ customerID: String, placement: String, appVersion: String?, country: String?) async throws(KakinKitError) -> PaywallOffering
    /// `POST /v1/customers/{id}/transactions` `{"store": "googlePlay", "packageName", "productId", "purchaseToken"}`: a
    /// purchase another store's billing library completed (Google Play's), handed to Kakin, which reads it from that
    /// store, credits it once and acknowledges it there. 201 and 409 `already_processed` are done; anything else is not.
    func submitPlayPurchase(_ purchase: PlayPurchase, customerID: String) async throws(KakinKitError) -> SubmitResult
}

/// A Google Play purchase as Play Billing hands it to the app (`Purchase.getPurchaseToken()`, its product and the
/// app's package). Kakin needs nothing else: it reads the purchase from Google with these.
public struct PlayPurchase: Sendable, Equatable {
    public var packageName: String
    public var productID: String
    public var purchaseToken: String

    public init(packageName: String, productID: String, purchaseToken: String) {
        self.packageName = packageName
        self.productID = productID
        self.purchaseToken = purchaseToken
    }
}

/// Kakin's answers after which the transaction may be finished.
public enum SubmitResult: Sendable, Equatable {
    /// 201: credited now.
    case credited(Submission)
    /// 409 `already_processed`: credited before (a notification, a restore, an earlier try whose answer was lost).
    case alreadyProcessed(Submission)
    /// 422 `transaction_revoked`: refunded or revoked; Kakin recorded it and grants nothing.
    case revoked(KakinKitError)
}

/// Which promotional-offer signature to ask Kakin for.
public enum OfferSignatureFormat: String, Sendable {
    /// The U+2063-joined ECDSA signature: StoreKit's `promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`,
    /// available with every SDK (deprecated from iOS 26).
    case legacy
    /// Promotional offer V2 (a compact JWS): `promotionalOffer(_:compactJWS:)`, in SDKs from Xcode 26 and
    /// back-deployed to iOS 15.
    case jws
}
