import AppStoreSecurity
import KakinCore

/// The cryptographic half of the App Store's offer checks: a promotional offer signature (legacy fields or
/// V2 JWS) or an introductory offer eligibility JWS must be signed by one of the app's In-App Purchase keys —
/// the simulator's generated key (`GET /simulator/v1/api-key`) or one registered with `POST api-keys`. What
/// it says is then checked against the purchase, the clock and the used nonces by the engine.
extension AppStoreSimulator {
    /// The legacy signature as StoreKit takes it: `.promotionalOffer(offerID:keyID:nonce:signature:timestamp:)`.
    struct LegacyOfferSignature: Sendable {
        var keyIdentifier: String
        var nonce: String
        var timestampMs: Int64
        var signature: String

        init(json: JSONValue) throws(KakinError) {
            guard case .object(let o) = json else {
                throw KakinError(.invalidField, "offer.signature must be an object {keyIdentifier, nonce, timestamp, signature}.")
            }
            if let unknown = o.keys.sorted().first(where: { !["keyIdentifier", "nonce", "timestamp", "signature"].contains($0) }) {
                throw KakinError(.invalidField, "Unknown field offer.signature.\(unknown).")
            }
            keyIdentifier = try json.requiredString("keyIdentifier", max: 64)
            nonce = try json.requiredString("nonce", max: 36).lowercased()
            guard (try? SimulatorState.normalizedToken(nonce)) != nil else {
                throw KakinError(.invalidField, "offer.signature.nonce must be a UUID (StoreKit takes a UUID).")
            }
            switch json["timestamp"] {
            case .int(let ms)?: timestampMs = ms
            case .string(let text)? where text.count <= 19 && Int64(text) != nil: timestampMs = Int64(text)!
            default: throw KakinError(.invalidField, "offer.signature.timestamp must be the signing time in ms (a whole number).")
            }
            signature = try json.requiredString("signature", max: 512)
        }
    }

    func offerKeys() -> [String: AppStoreServerAPITokenVerifier.Key] { core.withLock { $0.tokenVerifier.keys } }

    /// Checks a legacy signature over the seven U+2063-joined fields of this purchase.
    func verifyLegacyOffer(_ s: LegacyOfferSignature, productId: String, offerId: String, appAccountToken: String?) throws(KakinError) -> OfferSignatureClaims {
        let fields = PromotionalOfferSignature(
            bundleId: configuration.bundleId, keyIdentifier: s.keyIdentifier, productIdentifier: productId, offerIdentifier: offerId,
            appAccountToken: appAccountToken, nonce: s.nonce, timestampMs: s.timestampMs)
        guard let key = offerKeys()[s.keyIdentifier] else {
            throw KakinError(.simulatorInvalidOfferSignature, "No In-App Purchase key \(s.keyIdentifier) is known for this app.")
        }
        guard fields.isValidSignature(s.signature, publicKey: key.publicKey) else {
            throw KakinError(.simulatorInvalidOfferSignature,
                             "The signature does not match \(configuration.bundleId), \(s.keyIdentifier), \(productId), \(offerId), the purchase's appAccountToken (or \"\"), the nonce and the timestamp.")
        }
        return OfferSignatureClaims(format: .legacy, keyId: s.keyIdentifier, productId: productId, offerId: offerId, nonce: s.nonce,
                                    timestampMs: s.timestampMs, appAccountToken: (appAccountToken ?? "").lowercased(), transactionId: nil)
    }

    /// Checks a promotional offer V2 JWS (`aud` `promotional-offer`).
    func verifyOfferJWS(_ jws: String) throws(KakinError) -> OfferSignatureClaims {
        let verified = try verifySignedRequest(jws, .promotionalOffer, failure: .simulatorInvalidOfferSignature)
        guard let productId = verified.claims["productId"]?.stringValue, let offerId = verified.claims["offerIdentifier"]?.stringValue else {
            throw KakinError(.simulatorInvalidOfferSignature, "The promotional offer JWS lacks productId or offerIdentifier.")
        }
        return OfferSignatureClaims(format: .jws, keyId: verified.keyId, productId: productId, offerId: offerId,
                                    nonce: verified.nonce.lowercased(), timestampMs: Self.milliseconds(verified.issuedAtSeconds), appAccountToken: nil,
                                    transactionId: verified.claims["transactionId"]?.stringValue)
    }

    /// Checks an introductory offer eligibility JWS (`aud` `introductory-offer-eligibility`).
    func verifyEligibilityJWS(_ jws: String) throws(KakinError) -> IntroductoryEligibilityClaims {
        let verified = try verifySignedRequest(jws, .introductoryOfferEligibility, failure: .simulatorInvalidEligibilitySignature)
        guard let productId = verified.claims["productId"]?.stringValue, case .bool(let allow)? = verified.claims["allowIntroductoryOffer"],
              let transactionId = verified.claims["transactionId"]?.stringValue, !transactionId.isEmpty else {
            throw KakinError(.simulatorInvalidEligibilitySignature,
                             "The eligibility JWS lacks productId, allowIntroductoryOffer (a boolean) or transactionId.")
        }
        return IntroductoryEligibilityClaims(keyId: verified.keyId, productId: productId, allowIntroductoryOffer: allow,
                                             transactionId: transactionId, nonce: verified.nonce.lowercased(),
                                             timestampMs: Self.milliseconds(verified.issuedAtSeconds))
    }

    /// `iat` in ms; an absurd one (it would overflow) becomes a time no clock reaches, refused as stale.
    static func milliseconds(_ seconds: Int64) -> Int64 {
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        return overflow ? (seconds < 0 ? Int64.min : Int64.max) : ms
    }

    private func verifySignedRequest(_ jws: String, _ audience: SignedRequestJWS.Audience, failure: ErrorKind) throws(KakinError) -> VerifiedSignedRequest {
        do {
            return try SignedRequestVerifier(keys: offerKeys(), bundleId: configuration.bundleId).verify(jws, audience: audience)
        } catch {
            let why: String
            switch error.reason {
            case .malformed: why = "it is not a compact JWS with JSON header and claims"
            case .unsupportedAlgorithm: why = "its alg is not ES256"
            case .unknownKey: why = "its kid names no In-App Purchase key of this app"
            case .invalidSignature: why = "its signature does not verify"
            case .wrongIssuer: why = "its iss is not the key's issuer"
            case .wrongAudience: why = "its aud is not \(audience.rawValue)"
            case .wrongBundleId: why = "its bid is not \(configuration.bundleId)"
            case .missingClaim: why = "it lacks iat or nonce"
            }
            throw KakinError(failure, "The \(audience == .promotionalOffer ? "promotional offer" : "eligibility") JWS is refused: \(why).")
        }
    }
}
