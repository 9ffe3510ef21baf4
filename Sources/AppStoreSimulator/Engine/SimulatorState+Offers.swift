import KakinCore

/// A promotional offer signature whose cryptography the runtime has checked (an app key signed it, over these
/// fields). The engine checks what the App Store checks next: the purchase it came with, its age, its nonce.
struct OfferSignatureClaims: Sendable, Equatable {
    enum Format: String, Sendable { case legacy, jws }
    var format: Format
    var keyId: String
    var productId: String
    var offerId: String
    /// Lowercased.
    var nonce: String
    /// When it was signed: the legacy `timestamp`, or the JWS `iat` in ms.
    var timestampMs: Int64
    /// Legacy: the `appAccountToken` the signature covers ("" when none).
    var appAccountToken: String?
    /// JWS: the optional `transactionId` claim (a transaction or the `appTransactionId` of the customer).
    var transactionId: String?
}

/// An introductory offer eligibility JWS whose cryptography the runtime has checked.
struct IntroductoryEligibilityClaims: Sendable, Equatable {
    var keyId: String
    var productId: String
    var allowIntroductoryOffer: Bool
    var transactionId: String
    var nonce: String
    var timestampMs: Int64
}

extension SimulatorState {
    /// A signed offer or eligibility is honoured within 24 hours of its signing time, either way: the simulator's
    /// clock may stand still (time rate 0) while a backend outside signs on real time.
    static let offerSignatureWindowMs: Int64 = 24 * hourMs

    /// The catalog offer a purchase names, or `invalidOfferIdentifier` as StoreKit would say.
    func catalogOffer(_ choice: OfferChoice, of product: Product) throws(KakinError) -> SubscriptionOffer? {
        let found: SubscriptionOffer?
        switch choice {
        case .introductory: return product.introductoryOffer
        case .promotional(let id): found = product.promotionalOffer(id: id)
        case .offerCode(let id): found = product.offerCode(id: id)
        case .winBack(let id): found = product.winBackOffer(id: id)
        }
        guard let found else {
            throw KakinError(.simulatorInvalidOfferIdentifier, "\(product.productId) has no \(choice.typeName) offer \(choice.offerId ?? "").")
        }
        return found
    }

    /// Checks a purchase's offer against the account's state before anything changes: a promotional offer's
    /// signature (unless a tester waived it), an offer code's eligibility, a win-back offer's eligibility.
    func checkOffer(_ request: PurchaseRequest, product: Product, account: String, token: String?) throws(KakinError) {
        guard let choice = request.offer else { return }
        _ = try catalogOffer(choice, of: product)
        let group = product.groupId ?? ""
        let existing = instance(account: account, group: group, ownership: .purchased)
        switch choice {
        case .introductory:
            break
        case .promotional(let id):
            if request.signatureWaived { return }
            guard let claims = request.offerSignature else {
                throw KakinError(.simulatorMissingOfferParameters, "A promotional offer needs a signature: offer.signature {keyIdentifier, nonce, timestamp, signature} or offer.jws.")
            }
            guard claims.productId == product.productId, claims.offerId == id else {
                throw KakinError(.simulatorInvalidOfferSignature, "The signature is for \(claims.productId) offer \(claims.offerId), not \(product.productId) offer \(id).")
            }
            if claims.format == .legacy, claims.appAccountToken != (token ?? "") {
                throw KakinError(.simulatorInvalidOfferSignature, "The signature covers another appAccountToken than the purchase's.")
            }
            try checkSigned(at: claims.timestampMs, nonce: claims.nonce, transactionId: claims.transactionId, account: account)
        case .offerCode(let id):
            let standing: OfferCodeEligibility = existing.map { $0.phase.isLive ? .existing : .expired } ?? .new
            guard product.offerCode(id: id)!.codeEligibility.contains(standing) else {
                throw KakinError(.simulatorNotEligible, "Offer code \(id) is not for \(standing.rawValue) subscribers of group \(group).")
            }
        case .winBack(let id):
            guard let existing, eligibleWinBackOfferIds(existing).contains(id) else {
                throw KakinError(.simulatorNotEligible, "This account is not eligible for win-back offer \(id) (renewal info's eligibleWinBackOfferIds).")
            }
        }
    }

    /// The eligibility a signed introductory-offer eligibility JWS sets for this purchase (nil without one).
    func checkIntroductoryEligibility(_ claims: IntroductoryEligibilityClaims?, product: Product, account: String) throws(KakinError) -> Bool? {
        guard let claims else { return nil }
        guard claims.productId == product.productId else {
            throw KakinError(.simulatorInvalidEligibilitySignature, "The eligibility JWS is for \(claims.productId), not \(product.productId).")
        }
        do {
            try checkSigned(at: claims.timestampMs, nonce: claims.nonce, transactionId: claims.transactionId, account: account)
        } catch {
            // Same checks, reported as the eligibility JWS's (it has its own ID when the signature itself is bad).
            throw error.kind == .simulatorInvalidOfferSignature ? KakinError(.simulatorInvalidEligibilitySignature, error.message) : error
        }
        return claims.allowIntroductoryOffer
    }

    /// Fresh (within the window of now), nonce never used, and a named transaction not another account's.
    func checkSigned(at timestampMs: Int64, nonce: String, transactionId: String?, account: String) throws(KakinError) {
        let (distance, overflow) = nowMs.subtractingReportingOverflow(timestampMs)
        guard !overflow, distance.magnitude <= UInt64(Self.offerSignatureWindowMs) else {
            // Only plausible times are formatted: the value is the caller's and may be anything.
            let signedAt = (0...253_402_300_799_999).contains(timestampMs) ? Timestamp.rfc3339(timestampMs) : "\(timestampMs) ms"
            throw KakinError(.simulatorOfferSignatureExpired,
                             "Signed at \(signedAt), more than 24 hours from the App Store's time \(Timestamp.rfc3339(nowMs)).")
        }
        let nonces = store.offerNonces ?? [:]
        guard nonces[nonce] == nil else {
            throw KakinError(.simulatorOfferNonceReused, "Nonce \(nonce) was already used for a purchase; sign a new offer.")
        }
        if nonces.count >= Self.offerNoncesMax, nonces.values.filter({ $0 >= nowMs - Self.offerSignatureWindowMs }).count >= Self.offerNoncesMax {
            throw KakinError(.simulatorInvalidAction, "Too many signed purchases within 24 hours of simulated time.")
        }
        if let transactionId, !mayBelong(transactionId, to: account) {
            throw KakinError(.simulatorInvalidOfferSignature, "The signature names transaction \(transactionId) of another customer.")
        }
    }

    /// Whether a signed request's `transactionId` may be the account's: one of its transactions or its
    /// `appTransactionId`, or an id the simulator has never handed out (a new customer's app transaction).
    func mayBelong(_ transactionId: String, to account: String) -> Bool {
        if let tx = store.transactions[transactionId] { return tx.accountKey == account }
        if let owner = store.accounts.first(where: { $0.value.appTransactionId == transactionId })?.key { return owner == account }
        return true
    }

    /// Remembers a used nonce until its signature could no longer be honoured anyway.
    mutating func useNonce(_ nonce: String, signedAtMs: Int64) {
        var nonces = store.offerNonces ?? [:]
        if nonces.count >= Self.offerNoncesMax { nonces = nonces.filter { $0.value >= nowMs - Self.offerSignatureWindowMs } }
        nonces[nonce] = signedAtMs
        store.offerNonces = nonces
    }

    /// What a successful purchase uses up: signature nonces, a win-back offer.
    mutating func recordOfferUse(_ request: PurchaseRequest, account: String) {
        if case .promotional? = request.offer, !request.signatureWaived, let c = request.offerSignature { useNonce(c.nonce, signedAtMs: c.timestampMs) }
        if let c = request.introductoryOfferEligibility { useNonce(c.nonce, signedAtMs: c.timestampMs) }
        if case .winBack(let id)? = request.offer { store.winBackRedeemed = (store.winBackRedeemed ?? []).union([Self.introKey(account, id)]) }
    }

    /// Renewal info's `eligibleWinBackOfferIds` for an instance, best first (catalog order). Apple's criteria
    /// (paid duration, time since lapse, time between offers) are App Store Connect settings; the simulator's
    /// are: the instance expired (not in grace or retry, not revoked), it had a paid period, the offer is not
    /// switched off (`isEligible` in a `.storekit` file), and this account never redeemed it.
    func eligibleWinBackOfferIds(_ sub: SimSubscription) -> [String] {
        guard case .expired = sub.phase, !sub.isFamilyShared else { return [] }
        let offers = config.catalog.products(inGroup: sub.groupId).flatMap(\.winBackOffers).filter(\.isEligible)
        guard !offers.isEmpty else { return [] }
        let paid = store.transactionsByAccount[sub.accountKey, default: []].contains { id in
            guard let t = store.transactions[id] else { return false }
            return t.originalTransactionId == sub.originalTransactionId && (t.priceMilli ?? 0) > 0
        }
        guard paid else { return [] }
        let redeemed = store.winBackRedeemed ?? []
        var seen = Set<String>()
        return offers.compactMap(\.id).filter { !redeemed.contains(Self.introKey(sub.accountKey, $0)) && seen.insert($0).inserted }
    }
}

extension OfferChoice {
    var typeName: String {
        switch self {
        case .introductory: return "introductory"
        case .promotional: return "promotional"
        case .offerCode: return "offer code"
        case .winBack: return "win-back"
        }
    }

    var offerId: String? {
        switch self {
        case .introductory: return nil
        case .promotional(let id), .offerCode(let id), .winBack(let id): return id
        }
    }
}
