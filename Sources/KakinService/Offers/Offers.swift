import AppStoreSecurity
import KakinCore
import KakinStorage

/// A promotional offer to sign: `POST /v1/customers/{id}/offers/signatures`.
public struct OfferSignatureRequest: Sendable {
    public enum Format: String, Sendable { case legacy, jws }
    public var customerId: String
    public var productId: String
    public var offerId: String
    public var format: Format
    /// From StoreKit's `AppTransaction`: names a customer who never bought (JWS only).
    public var appTransactionId: String?

    public init(customerId: String, productId: String, offerId: String, format: Format, appTransactionId: String?) {
        self.customerId = customerId
        self.productId = productId
        self.offerId = offerId
        self.format = format
        self.appTransactionId = appTransactionId
    }
}

/// Who gets a promotional offer is Kakin's decision, made before anything is signed: the customer's status from the
/// signed data Kakin holds, and the app's `offerRules` (`OfferRules` in the core). Then the In-App Purchase key
/// signs: the legacy signature or the promotional offer V2 JWS; and the introductory-offer eligibility JWS with
/// Kakin's own eligibility.
public struct Offers: Sendable {
    let store: any SupportRepository
    let access: AppStoreAccess
    let statusReads: CustomerStatusReads
    let apps: [AppSettings]
    let catalog: Catalog
    let clock: any Clock
    let metrics: Metrics

    /// 201's body: the legacy fields StoreKit takes, or `{"jws"}`; 403 `offer_not_eligible` when the rules say no.
    public func sign(_ o: OfferSignatureRequest) async throws(KakinError) -> JSONValue {
        let (app, product, groupId) = try subscriptionProduct(o.productId)
        guard product.promotionalOffer(id: o.offerId) != nil else {
            throw KakinError(.unknownOffer, "\(o.productId) has no promotional offer \(o.offerId) in this server's catalog.")
        }
        let signer = try access.signer(forJWS: o.format == .jws)
        let evaluated = try await statusReads.statusFromWholeHistory(o.customerId)
        let rule = app.offerRules[o.offerId] ?? OfferRule(offerId: o.offerId)
        if let refusal = OfferRules.refusal(rule: rule, groupId: groupId, status: evaluated.status, history: evaluated.history, catalog: catalog) {
            throw KakinError(refusal.errorKind, refusal.message, detail: "offer \(o.offerId) rule \(rule.eligibility.rawValue)")
        }
        let nonce = store.ids.uuid().lowercased()
        let nowMs = clock.nowMs()
        let token = evaluated.customer.appAccountToken.lowercased()
        var answer: JSONValue
        do {
            switch o.format {
            case .legacy:
                let fields = PromotionalOfferSignature(bundleId: app.bundleId, keyIdentifier: signer.keyId, productIdentifier: o.productId,
                                                       offerIdentifier: o.offerId, appAccountToken: token, nonce: nonce, timestampMs: nowMs)
                answer = ["keyIdentifier": .string(signer.keyId), "nonce": .string(nonce), "timestamp": .int(nowMs),
                          "signature": .string(try fields.signature(key: signer.key)), "appAccountToken": .string(token)]
            case .jws:
                let transactionId = OfferRules.transactionIdForSigning(groupId: groupId, history: evaluated.history, catalog: catalog) ?? o.appTransactionId
                answer = ["jws": .string(try SignedRequestJWS.promotionalOffer(
                    productId: o.productId, offerIdentifier: o.offerId, transactionId: transactionId, bundleId: app.bundleId,
                    key: .init(privateKey: signer.key, keyId: signer.keyId, issuerId: signer.issuerId!), nonce: nonce,
                    issuedAtSeconds: nowMs / 1000))]
            }
        } catch {
            throw KakinError(.internalError, "The offer could not be signed.", detail: error.description)
        }
        try await store.recordOfferSigned(customerId: o.customerId, nonce: nonce, detail: [
            "productId": .string(o.productId), "offerId": .string(o.offerId), "format": .string(o.format.rawValue), "keyId": .string(signer.keyId),
        ])
        metrics.increment(.offersSigned)
        return answer
    }

    /// StoreKit's introductory-offer eligibility JWS, with `allowIntroductoryOffer` from Kakin's own eligibility.
    public func introductoryEligibility(customerId: String, productId: String, appTransactionId: String?) async throws(KakinError) -> String {
        let (app, _, groupId) = try subscriptionProduct(productId)
        let signer = try access.signer(forJWS: true)
        let evaluated = try await statusReads.statusFromWholeHistory(customerId)
        guard let transactionId = OfferRules.transactionIdForSigning(groupId: groupId, history: evaluated.history, catalog: catalog) ?? appTransactionId
        else {
            throw KakinError(.invalidField, "This customer has no purchase yet: send appTransactionId (from AppTransaction) to name them.")
        }
        let allow = evaluated.status.introductoryOfferEligibility[groupId] ?? true
        let nonce = store.ids.uuid().lowercased()
        let jws: String
        do {
            jws = try SignedRequestJWS.introductoryOfferEligibility(
                productId: productId, allowIntroductoryOffer: allow, transactionId: transactionId, bundleId: app.bundleId,
                key: .init(privateKey: signer.key, keyId: signer.keyId, issuerId: signer.issuerId!), nonce: nonce,
                issuedAtSeconds: clock.nowMs() / 1000)
        } catch {
            throw KakinError(.internalError, "The eligibility could not be signed.", detail: error.description)
        }
        metrics.increment(.offersSigned)
        return jws
    }

    /// The app and group of an auto-renewable product (the first app in the config that sells it).
    func subscriptionProduct(_ productId: String) throws(KakinError) -> (AppSettings, Product, String) {
        guard let app = apps.first(where: { $0.catalog[productId] != nil }), let product = app.catalog[productId] else {
            throw KakinError(.unknownProduct, "Product \(productId) is not in this server's catalog.")
        }
        guard product.kind == .autoRenewable, let groupId = product.groupId else {
            throw KakinError(.invalidField, "\(productId) is not an auto-renewable subscription: only those have offers.")
        }
        return (app, product, groupId)
    }
}
