import KakinCore
import KakinCrypto

/// The legacy promotional-offer signature (reference §8.1) used by StoreKit 1 `SKPaymentDiscount`,
/// StoreKit 2 `promotionalOffer(offerID:signature:)` and Retention Messaging: ECDSA P-256 with SHA-256
/// over seven fields joined by U+2063, DER, standard base64.
public struct PromotionalOfferSignature: Sendable, Hashable {
    /// U+2063 INVISIBLE SEPARATOR.
    public static let separator = "\u{2063}"

    public var bundleId: String
    public var keyIdentifier: String
    public var productIdentifier: String
    public var offerIdentifier: String
    /// The customer's UUID; nil signs an empty string (leaving the field out makes the purchase fail).
    public var appAccountToken: String?
    /// A fresh UUID per signature.
    public var nonce: String
    /// ms since the epoch; the signature is usable for 24 hours.
    public var timestampMs: Int64

    public init(
        bundleId: String, keyIdentifier: String, productIdentifier: String, offerIdentifier: String,
        appAccountToken: String?, nonce: String, timestampMs: Int64
    ) {
        self.bundleId = bundleId
        self.keyIdentifier = keyIdentifier
        self.productIdentifier = productIdentifier
        self.offerIdentifier = offerIdentifier
        self.appAccountToken = appAccountToken
        self.nonce = nonce
        self.timestampMs = timestampMs
    }

    /// The signed bytes: the seven fields, UUIDs lower-cased, joined by U+2063, UTF-8.
    public var message: [UInt8] {
        let fields = [
            bundleId, keyIdentifier, productIdentifier, offerIdentifier, (appAccountToken ?? "").lowercased(),
            nonce.lowercased(), String(timestampMs),
        ]
        return Array(fields.joined(separator: Self.separator).utf8)
    }

    /// The signature as the app passes it to StoreKit: DER, standard base64.
    public func signature(key: P256PrivateKey) throws(CryptoError) -> String {
        Base64.encode(try key.signDER(message))
    }

    /// Whether `signature` (standard base64 DER) signs these fields under `publicKey`.
    public func isValidSignature(_ signature: String, publicKey: P256PublicKey) -> Bool {
        guard let der = Base64.decode(signature) else { return false }
        return publicKey.isValidDERSignature(der, for: message)
    }
}
