import KakinCore
import KakinCrypto

/// The body Apple expects back from the Get Retention Message endpoint (`RealtimeResponseBody`): exactly one
/// of `message` `{messageIdentifier}`, `alternateProduct` `{messageIdentifier?, productId}` or
/// `promotionalOffer` `{messageIdentifier?, promotionalOfferSignatureV2}`. The offer is signed in the V2
/// (JWS) form, which Apple recommends for new implementations; its `transactionId` claim is **required** here
/// and must be the request's `originalTransactionId` (Apple's `promotionalOfferSignatureV2` page; reference
/// §8.2). Apple allows no image with a promotional-offer message; which message ids exist and are approved
/// is the App Store's business (Upload Message).
public enum RetentionMessageResponse {
    /// - Parameters:
    ///   - answer: what the app's rules chose (`RetentionMessaging.choose`).
    ///   - request: the verified request (`SignedDataVerifier.verifyRealtimeRequest`).
    ///   - bundleId: the app (the JWS's `bid`).
    ///   - key: the In-App Purchase key that signs offers; nil when the app has none (an offer then can't be answered).
    ///   - nonce: a fresh lowercase UUID; `issuedAtSeconds`: now.
    /// - Returns: the JSON body, or nil for `.none` (answer so that the App Store shows its default message).
    public static func body(_ answer: RetentionAnswer, request: RealtimeRequestPayload, bundleId: String, key: SignedRequestJWS.Key?,
                            nonce: String, issuedAtSeconds: Int64) throws(RetentionResponseError) -> JSONValue? {
        func withMessage(_ o: [String: JSONValue], _ messageId: String?) -> JSONValue {
            var o = o
            if let messageId { o["messageIdentifier"] = .string(messageId) }
            return .object(o)
        }
        switch answer {
        case .none:
            return nil
        case .message(let messageId):
            return ["message": ["messageIdentifier": .string(messageId)]]
        case .alternateProduct(let productId, let messageId):
            return ["alternateProduct": withMessage(["productId": .string(productId)], messageId)]
        case .promotionalOffer(let productId, let offerId, let messageId):
            guard let key else { throw .noSigningKey }
            let jws: String
            do {
                jws = try SignedRequestJWS.promotionalOffer(productId: productId, offerIdentifier: offerId,
                                                            transactionId: request.originalTransactionId, bundleId: bundleId, key: key,
                                                            nonce: nonce, issuedAtSeconds: issuedAtSeconds)
            } catch {
                throw .signingFailed
            }
            return ["promotionalOffer": withMessage(["promotionalOfferSignatureV2": .string(jws)], messageId)]
        }
    }
}

public enum RetentionResponseError: Error, Sendable, Equatable {
    /// A promotional offer was chosen but the app has no In-App Purchase key to sign it.
    case noSigningKey
    case signingFailed
}
