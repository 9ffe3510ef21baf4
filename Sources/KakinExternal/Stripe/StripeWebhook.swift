import KakinCore
import KakinCrypto

/// One app's Stripe webhook, from its config (`apps[].stripe`): `{"webhookSecretEnv", "customerIdMetadataKey":
/// "kakin_customer_id", "productIdMetadataKey": "kakin_product_id", "toleranceSeconds": 300}`.
public struct StripeWebhookConfiguration: Sendable {
    public static let defaultCustomerIdMetadataKey = "kakin_customer_id"
    public static let defaultProductIdMetadataKey = "kakin_product_id"
    public static let defaultToleranceSeconds: Int64 = 300

    /// The environment variable that holds the endpoint's signing secret (`whsec_…`); during a rotation it may
    /// hold several, separated by commas — a signature by any of them is accepted.
    public var webhookSecretEnv: String
    public var secrets: [[UInt8]]
    public var customerIdMetadataKey: String
    public var productIdMetadataKey: String
    /// |now − t| allowed for the header's timestamp; Stripe's libraries use 300 s.
    public var toleranceSeconds: Int64

    public init(webhookSecretEnv: String, secrets: [[UInt8]], customerIdMetadataKey: String = Self.defaultCustomerIdMetadataKey,
                productIdMetadataKey: String = Self.defaultProductIdMetadataKey, toleranceSeconds: Int64 = Self.defaultToleranceSeconds) {
        precondition(!secrets.isEmpty && secrets.count <= Self.secretsMax, "a Stripe webhook needs 1 to \(Self.secretsMax) secrets")
        precondition(toleranceSeconds > 0, "a tolerance of 0 would accept replays forever")
        self.webhookSecretEnv = webhookSecretEnv
        self.secrets = secrets
        self.customerIdMetadataKey = customerIdMetadataKey
        self.productIdMetadataKey = productIdMetadataKey
        self.toleranceSeconds = toleranceSeconds
    }

    /// The secrets an environment variable's value holds: comma-separated, spaces around them ignored.
    public static func secrets(fromEnvironmentValue value: String) -> [[UInt8]] {
        value.split(separator: ",").map { $0.trimmingCharacters(in: " ") }.filter { !$0.isEmpty }.map { Array($0.utf8) }
    }
}

/// Checks `Stripe-Signature` (Stripe's "Check the webhook signatures": `t=<unix seconds>,v1=<hex HMAC-SHA256
/// of "<t>.<raw body>">`, several `v1` while Stripe rolls the endpoint's secret) with the shared
/// `TimestampedSignature`. The raw body bytes are what is signed: verify before parsing.
public struct StripeWebhookVerifier: Sendable {
    public let configuration: StripeWebhookConfiguration

    public init(configuration: StripeWebhookConfiguration) { self.configuration = configuration }

    /// - Returns: the signed timestamp (unix seconds).
    /// - Throws: KKN-3055 (no or malformed header), KKN-3056 (outside the tolerance), KKN-3057 (no match).
    @discardableResult
    public func verify(signatureHeader: String?, body: [UInt8], nowSeconds: Int64) throws(KakinError) -> Int64 {
        do {
            return try TimestampedSignature.verify(header: signatureHeader, body: body, secrets: configuration.secrets,
                                                   nowSeconds: nowSeconds, toleranceSeconds: configuration.toleranceSeconds)
        } catch {
            switch error {
            case .malformedHeader: throw KakinError(.stripeSignatureMalformed)
            case .timestampOutsideTolerance:
                throw KakinError(.stripeSignatureOutsideTolerance,
                                 "The Stripe-Signature timestamp is more than \(configuration.toleranceSeconds) s from now (a replay, or a clock far off).")
            case .noMatchingSignature: throw KakinError(.stripeSignatureMismatch)
            }
        }
    }
}

extension Substring {
    func trimmingCharacters(in set: Character) -> String {
        var s = self
        while s.first == set { s.removeFirst() }
        while s.last == set { s.removeLast() }
        return String(s)
    }
}
