/// What a status read loads instead of a JWS: the decoded payload's fields that Kakin's rules read, kept at
/// ingest as compact JSON beside the signed copy (`status_json`). A read then parses a few hundred bytes per
/// row instead of base64-decoding a JWS whose header alone (three certificates) is several kilobytes.
///
/// The fields are a whitelist of the payload's own keys, so a value stored is a value Apple signed (the JWS stays
/// stored beside it as the proof), and decoding goes through the same `init(json:)` as a verified payload. A key
/// added to `TransactionPayload` or `RenewalInfoPayload` that the status, offers or reports read must be added
/// here too; rows stored before keep the older set until their next copy arrives.
public enum StoredStatusFields {
    public static let transactionKeys: Set<String> = [
        "transactionId", "originalTransactionId", "webOrderLineItemId", "bundleId", "productId", "subscriptionGroupIdentifier",
        "purchaseDate", "originalPurchaseDate", "expiresDate", "quantity", "type", "appAccountToken", "inAppOwnershipType",
        "signedDate", "revocationDate", "revocationReason", "revocationType", "revocationPercentage", "isUpgraded", "offerType",
        "offerIdentifier", "offerDiscountType", "offerPeriod", "environment", "transactionReason", "storefront", "price",
        "currency", "billingPlanType", "commitmentInfo", "appTransactionId",
    ]
    public static let renewalInfoKeys: Set<String> = [
        "originalTransactionId", "productId", "autoRenewProductId", "autoRenewStatus", "expirationIntent", "isInBillingRetryPeriod",
        "gracePeriodExpiresDate", "priceIncreaseStatus", "offerType", "offerIdentifier", "offerDiscountType", "offerPeriod",
        "recentSubscriptionStartDate", "renewalDate", "signedDate", "environment", "appAccountToken", "eligibleWinBackOfferIds",
        "renewalBillingPlanType", "commitmentInfo", "renewalPrice", "currency", "appTransactionId",
    ]

    public static func json(of payload: TransactionPayload) -> String { compact(payload.raw, keys: transactionKeys) }
    public static func json(of payload: RenewalInfoPayload) -> String { compact(payload.raw, keys: renewalInfoKeys) }

    /// A stored value: the compact JSON, or (rows stored before the column existed) the signed copy itself.
    public static func transaction(_ stored: String) -> TransactionPayload? {
        decode(stored).flatMap { try? TransactionPayload(json: $0) }
    }

    public static func renewalInfo(_ stored: String) -> RenewalInfoPayload? {
        decode(stored).flatMap { try? RenewalInfoPayload(json: $0) }
    }

    static func compact(_ raw: JSONValue, keys: Set<String>) -> String {
        guard case .object(let o) = raw else { return raw.jsonString }
        return JSONValue.object(o.filter { keys.contains($0.key) }).jsonString
    }

    static func decode(_ stored: String) -> JSONValue? {
        if stored.utf8.first == UInt8(ascii: "{") { return try? JSONParser.parse(stored) }
        return StoredJWS.payload(stored)
    }
}
