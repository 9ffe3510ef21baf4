import KakinCore

/// Builders for the status tests: small JSON payloads decoded the way the server decodes Apple's.
enum StatusFixtures {
    static let dayMs: Int64 = 86_400_000
    static let t0: Int64 = Timestamp.parseDate("2026-06-01")!

    /// The demo catalog plus a second subscription group.
    static let catalog: Catalog = {
        var c = Catalog.demo
        c.upsert(Product(productId: "extras.monthly", kind: .autoRenewable, groupId: "extras", period: ISOPeriod(months: 1), level: 1))
        return c
    }()

    static func groupOf(_ productId: String) -> String? {
        catalog[productId]?.groupId
    }

    /// A signed transaction. Auto-renewables get their group from the catalog unless `group` is given.
    static func transaction(
        _ id: String, original: String? = nil, product: String, type: AppleProductType = .autoRenewable,
        group: String? = nil, purchase: Int64, expires: Int64? = nil, signed: Int64? = nil, revoked: Int64? = nil,
        revocationType: String? = nil, upgraded: Bool = false, offerType: Int? = nil, offerId: String? = nil,
        discount: String? = nil, offerPeriod: String? = nil, familyShared: Bool = false, price: Int64? = nil
    ) -> TransactionPayload {
        var o: [String: JSONValue] = [
            "transactionId": .string(id), "originalTransactionId": .string(original ?? id),
            "bundleId": "dev.kakin.demo", "productId": .string(product), "type": .string(type.rawValue),
            "purchaseDate": .int(purchase), "originalPurchaseDate": .int(purchase), "quantity": 1,
            "inAppOwnershipType": familyShared ? "FAMILY_SHARED" : "PURCHASED",
            "signedDate": .int(signed ?? purchase), "environment": "Sandbox", "storefront": "JPN",
        ]
        if type == .autoRenewable, let g = group ?? groupOf(product) { o["subscriptionGroupIdentifier"] = .string(g) }
        if let expires { o["expiresDate"] = .int(expires) }
        if let revoked {
            o["revocationDate"] = .int(revoked)
            o["revocationReason"] = 0
            o["revocationType"] = .string(revocationType ?? (familyShared ? "FAMILY_REVOKE" : "REFUND_FULL"))
        }
        if upgraded { o["isUpgraded"] = true }
        if let offerType { o["offerType"] = .int(offerType) }
        if let offerId { o["offerIdentifier"] = .string(offerId) }
        if let discount { o["offerDiscountType"] = .string(discount) }
        if let offerPeriod { o["offerPeriod"] = .string(offerPeriod) }
        if let price { o["price"] = .int(price); o["currency"] = "JPY" }
        return try! TransactionPayload(json: .object(o))
    }

    /// A signed renewal info.
    static func renewal(
        _ original: String, product: String, autoRenewProduct: String? = nil, autoRenew: Int = 1, intent: Int? = nil,
        retry: Bool = false, grace: Int64? = nil, offerType: Int? = nil, offerId: String? = nil, offerPeriod: String? = nil,
        renewalDate: Int64? = nil, winBack: [String] = [], signed: Int64
    ) -> RenewalInfoPayload {
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(original), "productId": .string(product),
            "autoRenewProductId": .string(autoRenewProduct ?? product), "autoRenewStatus": .int(autoRenew),
            "isInBillingRetryPeriod": .bool(retry), "signedDate": .int(signed), "environment": "Sandbox",
        ]
        if let intent { o["expirationIntent"] = .int(intent) }
        if let grace { o["gracePeriodExpiresDate"] = .int(grace) }
        if let offerType { o["offerType"] = .int(offerType) }
        if let offerId { o["offerIdentifier"] = .string(offerId) }
        if let offerPeriod { o["offerPeriod"] = .string(offerPeriod) }
        if let renewalDate { o["renewalDate"] = .int(renewalDate) }
        if !winBack.isEmpty { o["eligibleWinBackOfferIds"] = .array(winBack.map { .string($0) }) }
        return try! RenewalInfoPayload(json: .object(o))
    }

    /// A monthly period of `premium.monthly` starting `start` days after `t0`.
    static func monthly(_ id: String, original: String = "1000", startDay: Int64, days: Int64 = 30, signedDay: Int64? = nil,
                        offerType: Int? = nil, offerId: String? = nil, discount: String? = nil) -> TransactionPayload {
        transaction(id, original: original, product: "premium.monthly", purchase: t0 + startDay * dayMs,
                    expires: t0 + (startDay + days) * dayMs, signed: signedDay.map { t0 + $0 * dayMs },
                    offerType: offerType, offerId: offerId, discount: discount)
    }

    static func evaluate(_ transactions: [TransactionPayload], _ renewals: [RenewalInfoPayload] = [], atDay day: Double) -> CustomerStatus {
        StatusEngine.evaluate(CustomerHistory(transactions: transactions, renewalInfos: renewals), catalog: catalog,
                              nowMs: t0 + Int64(day * Double(dayMs)))
    }

    static func at(day: Double) -> Int64 { t0 + Int64(day * Double(dayMs)) }
}
