import KakinCore

/// What a purchase asks for: the contract's `POST /simulator/v1/purchases` body.
struct PurchaseRequest: Sendable, Equatable {
    var productId: String
    /// Names the Apple account; written into the transaction unless the purchase happens outside the app.
    var appAccountToken: String?
    var quantity: Int = 1
    var offer: OfferChoice?
    var familyShared: Bool = false
    /// A promotional offer's signature, checked cryptographically by the runtime.
    var offerSignature: OfferSignatureClaims?
    /// The `applyPromotionalOffer` action: a tester grants the offer, no signature involved.
    var signatureWaived = false
    /// A signed introductory offer eligibility, overriding the App Store's own.
    var introductoryOfferEligibility: IntroductoryEligibilityClaims?
    /// Bought or redeemed in the App Store rather than through the app's purchase call: StoreKit's purchase
    /// options never reach the App Store, so the transaction carries no `appAccountToken`.
    var outsideApp = false
    /// StoreKit's `.billingPlanType` purchase option (iOS 26.4): `MONTHLY` for the monthly billing with a
    /// 12-month commitment of a product that allows it; nil (or `BILLED_UPFRONT`) for the usual plan.
    var billingPlanType: BillingPlanType? = nil
    /// False: the App Store sends no notification for this purchase and keeps none in Notification History (a purchase
    /// made before Kakin was installed); the Server API still answers it. Later events of it notify as usual.
    var notify = true
}

enum OfferChoice: Sendable, Equatable {
    case introductory
    case promotional(id: String)
    /// `offerType` 3, named by the offer code's reference name.
    case offerCode(id: String)
    /// `offerType` 4.
    case winBack(id: String)
}

/// What an operation did, for the control API's answer and for tests.
struct ActionOutcome: Sendable, Equatable {
    enum Kind: String, Sendable {
        case purchased, resubscribed, upgraded, crossgraded, scheduled, offerPending, downgradeCancelled
        case autoRenewEnabled, autoRenewDisabled, billingFailureScheduled, billingFailureCleared, billingRecovered
        case refunded, revoked, refundReversed, refundRequested, refundDeclined
        case priceIncreaseAnnounced, priceIncreaseAccepted, productRemovedFromSale, consentRescinded
    }
    var kind: Kind
    /// The transaction the app would now hold (for a purchase: the one StoreKit returns).
    var transactionId: String?
    var originalTransactionId: String?
    /// When the purchased product or offer takes effect (now, or the next renewal date).
    var effectiveDateMs: Int64?
    var proratedRefund: ProratedRefund?
    var notificationUUIDs: [String] = []
}

extension SimulatorState {
    /// `appAccountToken` is a UUID in StoreKit; the simulator keys the Apple account by it (lowercased).
    static func normalizedToken(_ token: String?) throws(KakinError) -> String? {
        guard let token else { return nil }
        let t = token.lowercased()
        let hex = Set("0123456789abcdef")
        let parts = t.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.map(\.count) == [8, 4, 4, 4, 12], parts.allSatisfy({ $0.allSatisfy { hex.contains($0) } }) else {
            throw KakinError(.invalidField, "appAccountToken must be a UUID (StoreKit's appAccountToken purchase option).")
        }
        return t
    }

    func checkCapacity() throws(KakinError) {
        guard store.transactions.count < Self.transactionsMax, store.subscriptions.count < Self.subscriptionsMax else {
            throw KakinError(.simulatorInvalidAction, "The simulator holds as many transactions as it allows; save and reset its state.")
        }
    }

    mutating func collectNotifications(since seq: Int64) -> [String] {
        notifications(after: seq).map(\.notificationUUID)
    }

    /// A purchase as StoreKit makes it. For a subscription group the account is already live in, it is the
    /// plan change StoreKit would make (upgrade, downgrade, crossgrade, or a promotional offer on the same
    /// product); the outcome then says what happened and `transactionId` is the instance's latest transaction.
    mutating func purchase(_ request: PurchaseRequest) throws(KakinError) -> ActionOutcome {
        guard let product = product(request.productId) else {
            throw KakinError(.simulatorUnknownProduct, "The simulator's catalog has no product \(request.productId).")
        }
        let token = try Self.normalizedToken(request.appAccountToken)
        guard (1...10).contains(request.quantity) else { throw KakinError(.invalidField, "quantity must be 1 to 10.") }
        if request.quantity > 1, product.kind != .consumable {
            throw KakinError(.invalidField, "quantity above 1 applies to consumables only.")
        }
        if request.offer != nil || request.introductoryOfferEligibility != nil, product.kind != .autoRenewable {
            throw KakinError(.invalidField, "offer and introductoryOfferEligibility apply to auto-renewable subscriptions only.")
        }
        if case .promotional? = request.offer, request.outsideApp {
            throw KakinError(.invalidField, "A promotional offer is redeemed in the app (a signed purchase option), not outside it.")
        }
        if request.familyShared {
            guard product.kind == .nonConsumable || product.kind == .autoRenewable, product.familyShareable else {
                throw KakinError(.simulatorNotEligible, "\(product.productId) is not family-shareable.")
            }
            guard request.offer == nil else { throw KakinError(.invalidField, "A family-shared copy cannot redeem an offer.") }
        }
        try checkCapacity()
        let account = token ?? ""
        let ownership: InAppOwnershipType = request.familyShared ? .familyShared : .purchased
        try checkOffer(request, product: product, account: account, token: token)
        let plan = product.kind == .autoRenewable || request.billingPlanType != nil
            ? try checkBillingPlan(request.billingPlanType, product: product, offer: request.offer) : nil
        let introOverride = try checkIntroductoryEligibility(request.introductoryOfferEligibility, product: product, account: account)
        // Offer codes are redeemed in Apple's redeem sheet or the App Store: no purchase options, no token.
        var isOfferCode = false
        if case .offerCode? = request.offer { isOfferCode = true }
        let written = request.outsideApp || isOfferCode ? nil : token
        let seq = store.notificationSeq
        var outcome: ActionOutcome
        if product.kind == .autoRenewable {
            outcome = try purchaseSubscription(product, account: account, token: written, ownership: ownership, offer: request.offer,
                                               introEligible: introOverride, billingPlan: plan)
        } else {
            outcome = try purchaseOneTime(product, account: account, token: written, ownership: ownership, quantity: request.quantity)
        }
        recordOfferUse(request, account: account)
        if request.notify {
            outcome.notificationUUIDs = collectNotifications(since: seq)
        } else {
            store.notifications.removeAll { $0.seq > seq }
        }
        return outcome
    }

    mutating func purchaseOneTime(_ product: Product, account: String, token: String?, ownership: InAppOwnershipType,
                                  quantity: Int) throws(KakinError) -> ActionOutcome {
        if product.kind == .nonConsumable {
            let owned = store.transactionsByAccount[account, default: []].contains { id in
                let t = store.transactions[id]!
                return t.productId == product.productId && !t.isRevoked && t.ownership == ownership.rawValue
            }
            if owned { throw KakinError(.simulatorInvalidAction, "This account already owns \(product.productId); StoreKit would restore it.") }
        }
        let id = makeTransaction(product: product, account: account, token: token, ownership: ownership, original: nil,
                                 purchaseDate: nowMs, expiresDate: nil, quantity: quantity, offer: nil, reason: .purchase,
                                 regularPriceMilli: product.priceMilli)
        emit(.oneTimeCharge, nil, transactionId: id, subscription: nil)
        return ActionOutcome(kind: .purchased, transactionId: id, originalTransactionId: id, effectiveDateMs: nowMs)
    }

    /// - Parameter introEligible: a signed eligibility JWS's answer, overriding the App Store's own.
    mutating func purchaseSubscription(_ product: Product, account: String, token: String?, ownership: InAppOwnershipType,
                                       offer choice: OfferChoice?, introEligible: Bool? = nil,
                                       billingPlan: BillingPlanType? = nil) throws(KakinError) -> ActionOutcome {
        let group = product.groupId!
        let existing = instance(account: account, group: group, ownership: ownership)
        if let existing, existing.phase.isLive {
            if ownership == .familyShared {
                throw KakinError(.simulatorInvalidAction, "This account already has family-shared access in group \(group).")
            }
            if billingPlan == .monthly {
                throw KakinError(.simulatorInvalidAction, "Moving a live subscription to the monthly billing with a 12-month commitment is not simulated; buy it once the subscription has ended.")
            }
            return try changeSubscription(existing.originalTransactionId, to: product, offer: choice, viaPurchase: true, writeToken: token != nil)
        }
        let commitment = billingPlan == .monthly ? SimCommitment(startMs: nowMs, monthlyPriceMilli: product.monthlyCommitmentCharge!) : nil
        let eligibleForIntro = commitment == nil && (introEligible ?? isEligibleForIntro(account: account, group: group))
        var offer: SubscriptionOffer?
        switch choice {
        case .introductory:
            guard let intro = product.introductoryOffer else {
                throw KakinError(.simulatorNotEligible, "\(product.productId) has no introductory offer.")
            }
            guard eligibleForIntro else {
                throw KakinError(.simulatorNotEligible, introEligible == false ? "The signed eligibility says this customer may not have the introductory offer."
                                                                              : "This account already redeemed an introductory offer in group \(group).")
            }
            offer = intro
        case let choice?:
            offer = try catalogOffer(choice, of: product)
        case nil:
            // StoreKit applies the introductory offer by itself when the customer is eligible.
            if ownership == .purchased, let intro = product.introductoryOffer, eligibleForIntro {
                offer = intro
            }
        }
        let applied = offer.map(AppliedOffer.init)
        let start = nowMs
        let end = commitment?.endOfMonth(1) ?? (applied?.firstSpan ?? product.period!).added(to: start)
        let original = existing.map { ($0.originalTransactionId, $0.originalPurchaseDate) }
        let tid = makeTransaction(product: product, account: account, token: token, ownership: ownership, original: original,
                                  purchaseDate: start, expiresDate: end, quantity: 1, offer: applied, reason: .purchase,
                                  regularPriceMilli: commitment?.monthlyPriceMilli ?? product.priceMilli, commitment: commitment)
        if applied?.type == AppleOfferType.introductory.rawValue { store.introUsed.insert(Self.introKey(account, group)) }
        let otid = original?.0 ?? tid
        var recentStart = start
        if let existing, case .expired(_, let at) = existing.phase, start - at <= Self.recentStartGapMs { recentStart = existing.recentStartDate }
        if let existing, case .revoked(let at) = existing.phase, start - at <= Self.recentStartGapMs { recentStart = existing.recentStartDate }
        let left = (applied?.isPayAsYouGo ?? false) ? applied!.numberOfPeriods - 1 : 0
        store.subscriptions[otid] = SimSubscription(
            originalTransactionId: otid, originalPurchaseDate: original?.1 ?? start, accountKey: account,
            // Redeemed outside the app: this transaction has no token, later renewals keep the one the instance had.
            appAccountToken: token ?? existing?.appAccountToken,
            groupId: group, ownership: ownership.rawValue, productId: product.productId, latestTransactionId: tid,
            autoRenewStatus: true, autoRenewProductId: product.productId, pendingOffer: nil,
            runningOffer: left > 0 ? applied : nil, runningOfferPeriodsLeft: left, phase: .active, failNextRenewal: false,
            recentStartDate: recentStart, extensionDates: existing?.extensionDates ?? [], priceOverrideMilli: nil, priceIncrease: nil,
            productNotForSale: false, autoRenewBeforeRevocation: nil, commitment: commitment,
            renewalJWS: "", renewalSignedDate: nowMs - 1)  // first signed by resignRenewal, at now
        emit(.subscribed, existing == nil ? .initialBuy : .resubscribe, transactionId: tid, subscription: otid)
        return ActionOutcome(kind: existing == nil ? .purchased : .resubscribed, transactionId: tid, originalTransactionId: otid, effectiveDateMs: start)
    }
}
