import AppStoreSecurity
import Foundation
import KakinCore

/// The App Store stand-in: a signing CA with Apple's marker OIDs (its root goes in the config's
/// `trustedRoots`, so Kakin accepts what it signs) and the consumable coin packs the config sells.
struct BenchAppStore: Sendable {
    static let bundleId = "com.example.kakin.bench"

    struct CoinPack: Sendable {
        var productId: String
        var coins: Int64
        var bonusCoins: Int64
        var priceMilli: Int64
    }

    static let coinPacks = [
        CoinPack(productId: "coins.100", coins: 100, bonusCoins: 0, priceMilli: 120_000),
        CoinPack(productId: "coins.500", coins: 500, bonusCoins: 50, priceMilli: 600_000),
        CoinPack(productId: "coins.1200", coins: 1200, bonusCoins: 200, priceMilli: 1_400_000),
    ]

    let ca: SigningCertificateAuthority
    let signer: JWSSigner

    init(nowMs: Int64) throws {
        ca = try SigningCertificateAuthority(nowMs: nowMs)
        signer = ca.signer()
    }

    /// The config's `products`.
    static var productsJSON: JSONValue {
        .array(coinPacks.map { pack in
            ["productId": .string(pack.productId), "type": "consumable", "coins": .int(pack.coins), "bonusCoins": .int(pack.bonusCoins),
             "price": .double(Double(pack.priceMilli) / 1000), "currency": "JPY"]
        })
    }

    /// A StoreKit 2 `jwsRepresentation` of a consumable purchase, with every field Apple puts in one
    /// (app-store-reference §3, plus the device copy's verification fields).
    func consumableTransaction(id: String, pack: CoinPack, quantity: Int64, appAccountToken: String?, nowMs: Int64) throws -> String {
        var payload: [String: JSONValue] = [
            "transactionId": .string(id), "originalTransactionId": .string(id), "bundleId": .string(Self.bundleId),
            "productId": .string(pack.productId), "purchaseDate": .int(nowMs), "originalPurchaseDate": .int(nowMs),
            "quantity": .int(quantity), "type": "Consumable", "inAppOwnershipType": "PURCHASED", "signedDate": .int(nowMs),
            "environment": "Sandbox", "transactionReason": "PURCHASE", "storefront": "JPN", "storefrontId": "143462",
            "price": .int(pack.priceMilli * quantity), "currency": "JPY",
            "appTransactionId": .string(String(704_000_000_000_000_000 + Int64.random(in: 0..<1_000_000_000_000))),
            "deviceVerification": .string(Base64.encode((0..<48).map { _ in UInt8.random(in: 0...255) })),
            "deviceVerificationNonce": .string(UUID().uuidString.lowercased()),
        ]
        if let appAccountToken { payload["appAccountToken"] = .string(appAccountToken) }
        return try signer.sign(.object(payload))
    }

    /// Monthly subscriptions, one per group: the long-history status figure's customers hold all three.
    static let subscriptions = [("premium.monthly", "premium", "21000001"), ("extras.monthly", "extras", "21000002"),
                                ("news.monthly", "news", "21000003")]

    /// The coin packs and the subscriptions.
    static var productsWithSubscriptionsJSON: JSONValue {
        .array((productsJSON.arrayValue ?? []) + subscriptions.map { product, group, _ in
            ["productId": .string(product), "type": "autoRenewable", "groupId": .string(group), "period": "P1M",
             "price": 480, "currency": "JPY"]
        })
    }

    /// One period of subscription `subscription` (an index into `subscriptions`), as the app presents it.
    func subscriptionTransaction(id: String, originalId: String, subscription: Int, purchaseMs: Int64, expiresMs: Int64,
                                 appAccountToken: String, nowMs: Int64) throws -> String {
        let (product, _, appleGroup) = Self.subscriptions[subscription]
        return try signer.sign([
            "transactionId": .string(id), "originalTransactionId": .string(originalId), "webOrderLineItemId": .string("9\(id)"),
            "bundleId": .string(Self.bundleId), "productId": .string(product), "subscriptionGroupIdentifier": .string(appleGroup),
            "purchaseDate": .int(purchaseMs), "originalPurchaseDate": .int(purchaseMs), "expiresDate": .int(expiresMs), "quantity": 1,
            "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED", "signedDate": .int(nowMs),
            "environment": "Sandbox", "transactionReason": .string(id == originalId ? "PURCHASE" : "RENEWAL"),
            "storefront": "JPN", "storefrontId": "143462", "price": 480_000, "currency": "JPY",
            "appAccountToken": .string(appAccountToken),
            "appTransactionId": .string(String(704_000_000_000_000_000 + Int64.random(in: 0..<1_000_000_000_000))),
            "deviceVerification": .string(Base64.encode((0..<48).map { _ in UInt8.random(in: 0...255) })),
            "deviceVerificationNonce": .string(UUID().uuidString.lowercased()),
        ])
    }

    /// A DID_RENEW notification: the subscription's latest transaction and its renewal info (auto-renew on).
    func didRenewNotification(transaction: String, originalId: String, subscription: Int, renewalMs: Int64, startMs: Int64,
                              appAccountToken: String, nowMs: Int64) throws -> String {
        let product = Self.subscriptions[subscription].0
        let renewal = try signer.sign([
            "originalTransactionId": .string(originalId), "productId": .string(product), "autoRenewProductId": .string(product),
            "autoRenewStatus": 1, "signedDate": .int(nowMs), "environment": "Sandbox", "renewalDate": .int(renewalMs),
            "recentSubscriptionStartDate": .int(startMs), "appAccountToken": .string(appAccountToken), "renewalPrice": 480_000,
            "currency": "JPY",
        ])
        return try signer.sign([
            "notificationType": "DID_RENEW", "notificationUUID": .string(UUID().uuidString.lowercased()), "version": "2.0",
            "signedDate": .int(nowMs),
            "data": ["appAppleId": 1_234_567_890, "bundleId": .string(Self.bundleId), "bundleVersion": "1.0", "environment": "Sandbox",
                     "signedTransactionInfo": .string(transaction), "signedRenewalInfo": .string(renewal), "status": 1],
        ])
    }

    /// A signed App Store Server Notification V2 (`responseBodyV2DecodedPayload`) of type ONE_TIME_CHARGE:
    /// a consumable purchase, its signed transaction inside, as Apple POSTs it.
    func oneTimeChargeNotification(transaction: String, nowMs: Int64) throws -> String {
        try signer.sign([
            "notificationType": "ONE_TIME_CHARGE", "notificationUUID": .string(UUID().uuidString.lowercased()), "version": "2.0",
            "signedDate": .int(nowMs),
            "data": ["appAppleId": 1_234_567_890, "bundleId": .string(Self.bundleId), "bundleVersion": "1.0", "environment": "Sandbox",
                     "signedTransactionInfo": .string(transaction)],
        ])
    }
}
