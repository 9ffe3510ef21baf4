import Foundation
import KakinCore
import KakinService
import KakinServer

/// Builds App Store payloads and signed notifications for tests, like Apple would send them.
extension TestAppStore {
    static let day: Int64 = 86_400_000

    func subscriptionTransaction(id: String, original: String, productId: String = "premium.monthly", token: String?,
                                 purchaseMs: Int64, expiresMs: Int64, signedMs: Int64, offerType: Int? = nil, offerId: String? = nil,
                                 revokedMs: Int64? = nil, isUpgraded: Bool = false, familyShared: Bool = false) throws -> String {
        var extra: [String: JSONValue] = ["subscriptionGroupIdentifier": "premium", "webOrderLineItemId": .string("w\(id)")]
        if let offerType { extra["offerType"] = .int(Int64(offerType)) }
        if let offerId { extra["offerIdentifier"] = .string(offerId) }
        if isUpgraded { extra["isUpgraded"] = true }
        if familyShared { extra["inAppOwnershipType"] = "FAMILY_SHARED" }
        if revokedMs != nil { extra["revocationType"] = familyShared ? "FAMILY_REVOKE" : "REFUND_FULL" }
        return try transaction(id: id, productId: productId, type: "Auto-Renewable Subscription", appAccountToken: token,
                               purchaseMs: purchaseMs, signedMs: signedMs, expiresMs: expiresMs, original: original,
                               revokedMs: revokedMs, extra: extra).jws
    }

    func renewalInfo(original: String, productId: String = "premium.monthly", autoRenewProductId: String? = nil,
                     autoRenew: Bool = true, signedMs: Int64, renewalMs: Int64, expirationIntent: Int? = nil,
                     billingRetry: Bool = false, graceUntilMs: Int64? = nil, pendingOfferId: String? = nil,
                     priceIncreaseStatus: Int? = nil) throws -> String {
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(original), "productId": .string(productId),
            "autoRenewProductId": .string(autoRenewProductId ?? productId), "autoRenewStatus": autoRenew ? 1 : 0,
            "isInBillingRetryPeriod": .bool(billingRetry), "signedDate": .int(signedMs), "environment": "Sandbox",
            "renewalDate": .int(renewalMs), "recentSubscriptionStartDate": .int(renewalMs - 30 * Self.day),
        ]
        if let expirationIntent { o["expirationIntent"] = .int(Int64(expirationIntent)) }
        if let graceUntilMs { o["gracePeriodExpiresDate"] = .int(graceUntilMs) }
        if let pendingOfferId {
            o["offerType"] = 2
            o["offerIdentifier"] = .string(pendingOfferId)
            o["offerDiscountType"] = "FREE_TRIAL"
            o["offerPeriod"] = "P6M"
        }
        if let priceIncreaseStatus { o["priceIncreaseStatus"] = .int(Int64(priceIncreaseStatus)) }
        return try ca.signer().sign(.object(o))
    }

    /// A signed `responseBodyV2DecodedPayload` with a `data` block.
    func notification(_ type: String, _ subtype: String? = nil, uuid: String = UUID().uuidString.lowercased(),
                      transaction: String?, renewal: String? = nil, status: Int? = nil, signedMs: Int64,
                      bundleId: String = TestAppStore.bundleId) throws -> String {
        var data: [String: JSONValue] = ["bundleId": .string(bundleId), "environment": "Sandbox", "appAppleId": 1_234_567_890, "bundleVersion": "1.0"]
        if let transaction { data["signedTransactionInfo"] = .string(transaction) }
        if let renewal { data["signedRenewalInfo"] = .string(renewal) }
        if let status { data["status"] = .int(Int64(status)) }
        var o: [String: JSONValue] = ["notificationType": .string(type), "notificationUUID": .string(uuid), "version": "2.0",
                                      "signedDate": .int(signedMs), "data": .object(data)]
        if let subtype { o["subtype"] = .string(subtype) }
        return try ca.signer().sign(.object(o))
    }

    /// A notification whose payload carries `summary`, `externalPurchaseToken` or `appData` instead of `data`.
    func notification(_ type: String, _ subtype: String?, block name: String, _ block: [String: JSONValue], signedMs: Int64) throws -> String {
        var o: [String: JSONValue] = ["notificationType": .string(type), "notificationUUID": .string(UUID().uuidString.lowercased()),
                                      "version": "2.0", "signedDate": .int(signedMs), name: .object(block)]
        if let subtype { o["subtype"] = .string(subtype) }
        return try ca.signer().sign(.object(o))
    }
}

struct NotificationRefused: Error, CustomStringConvertible {
    var status: Int
    var body: String
    var description: String { "notification refused: \(status) \(body)" }
}

extension TestKakin {
    func postNotification(_ jws: String) async throws -> Response {
        try await request("POST", "/v1/notifications/appstore", json: ["signedPayload": .string(jws)])
    }

    /// Posts each notification and waits until the inbox has applied them.
    func deliver(_ notifications: [String]) async throws {
        for n in notifications {
            let r = try await postNotification(n)
            guard r.status == 200 else { throw NotificationRefused(status: r.status, body: String(decoding: r.body, as: UTF8.self)) }
        }
        await runtime.app.services.notifications.drain()
    }

    func customer(_ id: String) async throws -> JSONValue {
        try await request("GET", "/v1/customers/\(id)").json
    }

    func token(_ id: String) async throws -> String {
        try await customer(id)["appAccountToken"]?.stringValue ?? ""
    }
}
