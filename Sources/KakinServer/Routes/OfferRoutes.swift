import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinStorage

/// The In-App Purchase key offers are signed with: `offerSigning` when configured, else the App Store Server
/// API's key (in local mode, the simulator's generated key, so the simulator accepts what Kakin signs).
struct OfferSigner: Sendable {
    let key: P256PrivateKey
    let keyId: String
    /// Needed for JWS signatures only.
    let issuerId: String?
    /// Came from `offerSigning`: connecting the App Store Server API later does not replace it.
    let configured: Bool

    init(keyId: String, privateKeyPEM: String, issuerId: String?, configured: Bool, keyName: String) throws(KakinError) {
        do {
            key = try P256PrivateKey(pemPKCS8: privateKeyPEM)
        } catch {
            throw KakinError(.invalidConfiguration, "\(keyName).privateKeyFile is not a PKCS#8 P-256 key (.p8).")
        }
        self.keyId = keyId
        self.issuerId = issuerId
        self.configured = configured
    }
}

extension KakinApp {
    /// Uses the configured `offerSigning` key (its issuer defaulting to `appStoreServerAPI`'s).
    func configureOfferSigning(_ signing: Configuration.OfferSigning, apiIssuerId: String?) throws(KakinError) {
        let signer = try OfferSigner(keyId: signing.keyId, privateKeyPEM: signing.privateKeyPEM, issuerId: signing.issuerId ?? apiIssuerId,
                                     configured: true, keyName: "offerSigning")
        offerSigner.withLock { $0 = signer }
    }

    /// Signs offers with the App Store Server API's key unless `offerSigning` named another.
    func useAPIKeyForOffers(_ api: Configuration.AppStoreServerAPI) throws(KakinError) {
        guard offerSigner.withLock({ $0?.configured }) != true else { return }
        let signer = try OfferSigner(keyId: api.keyId, privateKeyPEM: api.privateKeyPEM, issuerId: api.issuerId, configured: false,
                                     keyName: "appStoreServerAPI")
        offerSigner.withLock { $0 = signer }
    }

    func signer(forJWS: Bool) throws(KakinError) -> OfferSigner {
        guard let signer = offerSigner.withLock({ $0 }) else { throw KakinError(.offerSigningNotConfigured) }
        if forJWS, signer.issuerId == nil {
            throw KakinError(.offerSigningNotConfigured, "JWS offer signatures need an issuer ID: set offerSigning.issuerId.")
        }
        return signer
    }

    /// `POST /v1/customers/{customerId}/offers/signatures` `{"productId", "offerId", "format": "legacy|jws",
    /// "appTransactionId"?}` → 201 with the legacy fields StoreKit takes, or `{"jws"}`; 403 `offer_not_eligible`
    /// when the app's offer rules say no.
    func postOfferSignature(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in try await offerSignature(request, params) }
    }

    func offerSignature(_ request: HTTPRequest, _ params: PathParameters) async throws(KakinError) -> HTTPResponse {
        let customerId = try customerID(params)
        try authenticator.authorize(request, customerId: customerId, needs: .customer)
        let body = try request.jsonObject()
        let (productId, offerId, format, appTransactionId) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["productId", "offerId", "format", "appTransactionId"])
            return (try body.boundedString("productId")!, try body.boundedString("offerId")!, try body.boundedString("format", lengthMax: 6)!,
                    try Self.appTransactionId(body))
        }
        guard format == "legacy" || format == "jws" else { throw KakinError(.invalidField, "format must be legacy or jws.") }
        let (app, product, groupId) = try subscriptionProduct(productId)
        guard product.promotionalOffer(id: offerId) != nil else {
            throw KakinError(.unknownOffer, "\(productId) has no promotional offer \(offerId) in this server's catalog.")
        }
        let signer = try signer(forJWS: format == "jws")
        let (customer, history, status) = try await evaluatedCustomer(customerId)
        let rule = app.offerRules[offerId] ?? OfferRule(offerId: offerId)
        if let refusal = OfferRules.refusal(rule: rule, groupId: groupId, status: status, history: history, catalog: mergedCatalog) {
            throw KakinError(refusal.errorKind, refusal.message, detail: "offer \(offerId) rule \(rule.eligibility.rawValue)")
        }
        let nonce = store.ids.uuid().lowercased()
        let nowMs = clock.nowMs()
        var answer: JSONValue
        do {
            if format == "legacy" {
                let fields = PromotionalOfferSignature(bundleId: app.bundleId, keyIdentifier: signer.keyId, productIdentifier: productId,
                                                       offerIdentifier: offerId, appAccountToken: customer.appAccountToken.lowercased(),
                                                       nonce: nonce, timestampMs: nowMs)
                answer = ["keyIdentifier": .string(signer.keyId), "nonce": .string(nonce), "timestamp": .int(nowMs),
                          "signature": .string(try fields.signature(key: signer.key)),
                          "appAccountToken": .string(customer.appAccountToken.lowercased())]
            } else {
                let transactionId = OfferRules.transactionIdForSigning(groupId: groupId, history: history, catalog: mergedCatalog) ?? appTransactionId
                answer = ["jws": .string(try SignedRequestJWS.promotionalOffer(
                    productId: productId, offerIdentifier: offerId, transactionId: transactionId, bundleId: app.bundleId,
                    key: .init(privateKey: signer.key, keyId: signer.keyId, issuerId: signer.issuerId!), nonce: nonce,
                    issuedAtSeconds: nowMs / 1000))]
            }
        } catch {
            throw KakinError(.internalError, "The offer could not be signed.", detail: error.description)
        }
        try await store.recordOfferSigned(customerId: customerId, nonce: nonce, detail: [
            "productId": .string(productId), "offerId": .string(offerId), "format": .string(format), "keyId": .string(signer.keyId),
        ])
        metrics.increment(.offersSigned)
        return .json(answer, status: 201)
    }

    /// `POST /v1/customers/{customerId}/offers/introductory-eligibility` `{"productId", "appTransactionId"?}` →
    /// 201 `{"jws"}`: StoreKit's eligibility JWS with `allowIntroductoryOffer` from Kakin's own eligibility.
    func postIntroductoryEligibility(_ request: HTTPRequest, _ params: PathParameters) async -> HTTPResponse {
        await run(request) { () throws(KakinError) -> HTTPResponse in try await introductoryEligibility(request, params) }
    }

    func introductoryEligibility(_ request: HTTPRequest, _ params: PathParameters) async throws(KakinError) -> HTTPResponse {
        let customerId = try customerID(params)
        try authenticator.authorize(request, customerId: customerId, needs: .customer)
        let body = try request.jsonObject()
        let (productId, appTransactionId) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["productId", "appTransactionId"])
            return (try body.boundedString("productId")!, try Self.appTransactionId(body))
        }
        let (app, _, groupId) = try subscriptionProduct(productId)
        let signer = try signer(forJWS: true)
        let (_, history, status) = try await evaluatedCustomer(customerId)
        guard let transactionId = OfferRules.transactionIdForSigning(groupId: groupId, history: history, catalog: mergedCatalog) ?? appTransactionId
        else {
            throw KakinError(.invalidField, "This customer has no purchase yet: send appTransactionId (from AppTransaction) to name them.")
        }
        let allow = status.introductoryOfferEligibility[groupId] ?? true
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
        return .json(["jws": .string(jws)], status: 201)
    }

    /// The app and group of an auto-renewable product (the first app in the config that sells it).
    func subscriptionProduct(_ productId: String) throws(KakinError) -> (Configuration.App, Product, String) {
        guard let app = settings.apps.first(where: { $0.catalog[productId] != nil }), let product = app.catalog[productId] else {
            throw KakinError(.unknownProduct, "Product \(productId) is not in this server's catalog.")
        }
        guard product.kind == .autoRenewable, let groupId = product.groupId else {
            throw KakinError(.invalidField, "\(productId) is not an auto-renewable subscription: only those have offers.")
        }
        return (app, product, groupId)
    }

    /// The customer (created on first sight), the signed history Kakin holds and the status computed from it.
    func evaluatedCustomer(_ customerId: String) async throws(KakinError) -> (KakinStore.Customer, CustomerHistory, CustomerStatus) {
        let snapshot = try await store.customerSnapshot(customerId)
        let history = CustomerHistory(
            transactions: snapshot.transactionJWS.compactMap { StoredJWS.payload($0).flatMap { try? TransactionPayload(json: $0) } },
            renewalInfos: snapshot.renewalInfoJWS.compactMap { StoredJWS.payload($0).flatMap { try? RenewalInfoPayload(json: $0) } })
        return (snapshot.customer, history, StatusEngine.evaluate(history, catalog: mergedCatalog, nowMs: clock.nowMs()))
    }

    /// The optional `appTransactionId` (from StoreKit's `AppTransaction`): a decimal id like every Apple id.
    static func appTransactionId(_ body: StrictObject) throws(ConfigurationError) -> String? {
        guard let id = try body.boundedString("appTransactionId", lengthMax: 64, required: false) else { return nil }
        guard id.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw ConfigurationError(body.sub("appTransactionId"), "must be a decimal id") }
        return id
    }
}
