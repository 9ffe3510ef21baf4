import HTTPServer
import KakinCore
import KakinService

/// Offer signatures and introductory-offer eligibility: parse, call `Offers`, render.
extension KakinApp {
    /// `POST /v1/customers/{customerId}/offers/signatures` `{"productId", "offerId", "format": "legacy|jws",
    /// "appTransactionId"?}` → 201 with the legacy fields StoreKit takes, or `{"jws"}`; 403 `offer_not_eligible`
    /// when the app's offer rules say no.
    func postOfferSignature(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        let (productId, offerId, format, appTransactionId) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["productId", "offerId", "format", "appTransactionId"])
            return (try body.boundedString("productId")!, try body.boundedString("offerId")!, try body.boundedString("format", lengthMax: 6)!,
                    try Self.appTransactionId(body))
        }
        guard let format = OfferSignatureRequest.Format(rawValue: format) else { throw KakinError(.invalidField, "format must be legacy or jws.") }
        let answer = try await services.offers.sign(OfferSignatureRequest(customerId: c.customerId, productId: productId, offerId: offerId,
                                                                          format: format, appTransactionId: appTransactionId))
        return .json(answer, status: 201)
    }

    /// `POST /v1/customers/{customerId}/offers/introductory-eligibility` `{"productId", "appTransactionId"?}` →
    /// 201 `{"jws"}`: StoreKit's eligibility JWS with `allowIntroductoryOffer` from Kakin's own eligibility.
    func postIntroductoryEligibility(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let body = try c.request.jsonObject()
        let (productId, appTransactionId) = try field { () throws(ConfigurationError) in
            try body.check(allowedKeys: ["productId", "appTransactionId"])
            return (try body.boundedString("productId")!, try Self.appTransactionId(body))
        }
        let jws = try await services.offers.introductoryEligibility(customerId: c.customerId, productId: productId, appTransactionId: appTransactionId)
        return .json(["jws": .string(jws)], status: 201)
    }

    /// The optional `appTransactionId` (from StoreKit's `AppTransaction`): a decimal id like every Apple id.
    static func appTransactionId(_ body: StrictObject) throws(ConfigurationError) -> String? {
        guard let id = try body.boundedString("appTransactionId", lengthMax: 64, required: false) else { return nil }
        guard id.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw ConfigurationError(body.sub("appTransactionId"), "must be a decimal id") }
        return id
    }
}
