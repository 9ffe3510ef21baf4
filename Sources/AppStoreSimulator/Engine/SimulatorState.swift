import KakinCore

/// Signs a payload as the App Store does (ES256 JWS with a three-certificate `x5c`). A protocol because
/// the engine's own tests sign with a stand-in while the simulator signs with its certificate authority.
protocol PayloadSigner: Sendable {
    func sign(_ payload: JSONValue) -> String
}

/// Everything the simulated App Store remembers; encodes to the state file (`GET|PUT /simulator/v1/state`).
struct SimulatorStore: Codable, Sendable, Equatable {
    var nowMs: Int64
    var ids: SimulatorIDs
    var modifiedCounter: Int64 = 0
    var notificationSeq: Int64 = 0
    var accounts: [String: AccountRecord] = [:]
    /// "account\u{1F}group" pairs that redeemed an introductory offer (one per group per account, ever).
    var introUsed: Set<String> = []
    var transactions: [String: SimTransaction] = [:]
    /// Each account's transactions in creation order (history is per customer).
    var transactionsByAccount: [String: [String]] = [:]
    var orders: [String: [String]] = [:]
    var subscriptions: [String: SimSubscription] = [:]
    var notifications: [SimNotification] = []
    var testNotifications: [String: String] = [:]
    var refundRequests: Set<String> = []
    var proratedRefunds: [ProratedRefund] = []
    var consumption: [ConsumptionRecord] = []
    var extensionRequests: [String: ExtensionRecord] = [:]
    var massExtensions: [String: MassExtensionRecord] = [:]
    /// Nonces of signed offers and eligibility JWS used in purchases, with their signing time (nil in state
    /// files saved before offers were checked).
    var offerNonces: [String: Int64]?
    /// "account\u{1F}offerId" pairs of redeemed win-back offers.
    var winBackRedeemed: Set<String>?
    /// External purchase tokens and their reports (SimulatorState+ExternalPurchases; nil in older state files).
    var externalPurchases: ExternalPurchaseStore?
    /// Finish Transaction calls so far (the sequence of `SimTransaction.finishSeq`); nil in older state files.
    var finishCounter: Int64?
    /// The Retention Messaging API's configuration and calls (SimulatorState+Apple2026); nil until used.
    var retention: RetentionMessagingStore?

    init(nowMs: Int64, ids: SimulatorIDs) {
        self.nowMs = nowMs
        self.ids = ids
    }
}

/// The simulated App Store as a value-type state machine: purchases, subscription actions and the passing
/// of time go in; signed transactions, renewal info and notifications (as an outbox with delivery attempts)
/// come out. No I/O and no clock reads: time only moves through `advance(toMs:)`. Every id comes from the
/// seeded `SimulatorIDs`, so the same calls replay to the same state.
struct SimulatorState: Sendable {
    let config: SimulatorConfiguration
    let signer: any PayloadSigner
    var store: SimulatorStore

    static let dayMs: Int64 = 86_400_000
    static let hourMs: Int64 = 3_600_000
    /// Apple's production schedule: retries 1, 12, 24, 48 and 72 hours after the previous attempt.
    static let retryDelaysMs: [Int64] = [1, 12, 24, 48, 72].map { $0 * hourMs }
    /// A gap up to this long keeps `recentSubscriptionStartDate` (Apple: 60 days).
    static let recentStartGapMs: Int64 = 60 * dayMs

    init(config: SimulatorConfiguration, signer: any PayloadSigner, startMs: Int64) {
        self.config = config
        self.signer = signer
        store = SimulatorStore(nowMs: startMs, ids: SimulatorIDs(seed: config.seed, environment: config.environment))
    }

    init(config: SimulatorConfiguration, signer: any PayloadSigner, store: SimulatorStore) {
        self.config = config
        self.signer = signer
        self.store = store
    }

    var nowMs: Int64 { store.nowMs }

    // MARK: - Lookups

    func product(_ id: String) -> Product? { config.catalog[id] }

    func subscription(_ otid: String) -> SimSubscription? { store.subscriptions[otid] }

    func latest(_ sub: SimSubscription) -> SimTransaction { store.transactions[sub.latestTransactionId]! }

    /// The instance of a group for one account and ownership (Apple keeps one `originalTransactionId` per group
    /// per account, across lapses and resubscriptions).
    func instance(account: String, group: String, ownership: InAppOwnershipType) -> SimSubscription? {
        store.subscriptions.values.first { $0.accountKey == account && $0.groupId == group && $0.ownership == ownership.rawValue }
    }

    static func introKey(_ account: String, _ group: String) -> String { account + "\u{1F}" + group }

    /// Apple: one introductory offer per group per account, and none while subscribed in that group.
    func isEligibleForIntro(account: String, group: String) -> Bool {
        if store.introUsed.contains(Self.introKey(account, group)) { return false }
        return !store.subscriptions.values.contains { $0.accountKey == account && $0.groupId == group && $0.phase.isLive }
    }

    /// Status as Get All Subscription Statuses reports it (§6.5): 1 active, 2 expired, 3 billing retry,
    /// 4 grace period, 5 revoked.
    func status(of sub: SimSubscription) -> Int {
        if latest(sub).isRevoked { return 5 }
        switch sub.phase {
        case .active: return 1
        case .billingRetry(_, let grace, let graceExpired):
            if let grace, !graceExpired, nowMs < grace { return 4 }
            return 3
        case .expired: return 2
        case .revoked: return 5
        }
    }

    // MARK: - Signing

    /// The `signedDate` of a new signature of something last signed at `previous`: now, or 1 ms later than
    /// the previous signature when the clock has not moved since. Each copy is strictly newer than the one
    /// it replaces, as at Apple, so "newer signed data wins" always has a winner.
    func resigningMs(after previous: Int64) -> Int64 { max(nowMs, previous + 1) }

    mutating func nextModifiedSeq() -> Int64 {
        store.modifiedCounter += 1
        return store.modifiedCounter
    }

    /// Re-signs a transaction now (signedDate = now) and bumps its last-modified order.
    mutating func resign(transaction id: String) {
        guard var tx = store.transactions[id] else { return }
        tx.signedDate = resigningMs(after: tx.signedDate)
        tx.modifiedSeq = nextModifiedSeq()
        tx.jws = signer.sign(tx.payload(config))
        store.transactions[id] = tx
    }

    mutating func resignRenewal(_ otid: String) {
        guard var sub = store.subscriptions[otid] else { return }
        sub.renewalSignedDate = resigningMs(after: sub.renewalSignedDate)
        sub.renewalJWS = signer.sign(renewalPayload(sub))
        store.subscriptions[otid] = sub
    }

    /// `JWSRenewalInfoDecodedPayload` (§4) for the next period of an instance.
    func renewalPayload(_ sub: SimSubscription) -> JSONValue {
        let tx = latest(sub)
        var o: [String: JSONValue] = [
            "originalTransactionId": .string(sub.originalTransactionId),
            "productId": .string(sub.productId),
            "autoRenewProductId": .string(sub.autoRenewProductId),
            "autoRenewStatus": .int(sub.autoRenewStatus ? 1 : 0),
            "signedDate": .int(sub.renewalSignedDate),
            "environment": .string(config.environment.rawValue),
            "recentSubscriptionStartDate": .int(sub.recentStartDate),
            "appTransactionId": .string(tx.appTransactionId),
        ]
        if let expires = tx.expiresDate { o["renewalDate"] = .int(expires) }
        if let token = sub.appAccountToken, !sub.isFamilyShared { o["appAccountToken"] = .string(token) }
        switch sub.phase {
        case .active, .revoked:
            o["isInBillingRetryPeriod"] = .bool(false)
        case .billingRetry(_, let grace, let graceExpired):
            o["isInBillingRetryPeriod"] = .bool(true)
            if let grace, !graceExpired { o["gracePeriodExpiresDate"] = .int(grace) }
        case .expired(let intent, _):
            o["isInBillingRetryPeriod"] = .bool(false)
            o["expirationIntent"] = .int(Int64(intent))
        }
        if sub.phase.isLive, let offer = nextRenewalOffer(sub) { o.merge(offer.json) { _, new in new } }
        let winBack = eligibleWinBackOfferIds(sub)
        if !winBack.isEmpty { o["eligibleWinBackOfferIds"] = .array(winBack.map { .string($0) }) }
        if let increase = sub.priceIncrease, sub.phase.isLive { o["priceIncreaseStatus"] = .int(increase.consented ? 1 : 0) }
        if let product = product(sub.autoRenewProductId), let price = nextRenewalPrice(sub, product: product) {
            o["renewalPrice"] = .int(price)
            o["currency"] = .string(config.currency(of: product))
        }
        o.merge(commitmentRenewalFields(sub)) { _, new in new }  // API 1.21 (SimulatorState+Commitments)
        return .object(o)
    }

    /// The offer the next renewal will carry: the pending one for the renewing product, else a pay-as-you-go
    /// offer that still has periods left.
    func nextRenewalOffer(_ sub: SimSubscription) -> AppliedOffer? {
        if let p = sub.pendingOffer, p.productId == sub.autoRenewProductId { return p.offer }
        if let r = sub.runningOffer, sub.runningOfferPeriodsLeft > 0, sub.autoRenewProductId == sub.productId { return r }
        return nil
    }

    func nextRenewalPrice(_ sub: SimSubscription, product: Product) -> Int64? {
        if let offer = nextRenewalOffer(sub) { return offer.priceMilli }
        if let increase = sub.priceIncrease { return increase.newPriceMilli }
        if product.productId == sub.productId, let override = sub.priceOverrideMilli { return override }
        return product.priceMilli
    }

    // MARK: - Transactions

    mutating func appTransactionId(for account: String) -> String {
        if let a = store.accounts[account] { return a.appTransactionId }
        let id = store.ids.appTransactionId()
        store.accounts[account] = AccountRecord(appTransactionId: id)
        return id
    }

    /// Creates and signs a transaction. `originalTransactionId` nil starts a new instance (the id is its own).
    mutating func makeTransaction(product: Product, account: String, token: String?, ownership: InAppOwnershipType,
                                  original: (id: String, purchaseDate: Int64)?, purchaseDate: Int64, expiresDate: Int64?,
                                  quantity: Int, offer: AppliedOffer?, reason: TransactionReason, regularPriceMilli: Int64?,
                                  commitment: SimCommitment? = nil) -> String {
        let id = store.ids.transactionId()
        let isSubscription = product.kind == .autoRenewable
        let familyShared = ownership == .familyShared
        var price: Int64? = regularPriceMilli.map { $0 * Int64(quantity) }
        if let offer { price = offer.priceMilli }
        var tx = SimTransaction(
            transactionId: id, originalTransactionId: original?.id ?? id,
            webOrderLineItemId: isSubscription ? store.ids.webOrderLineItemId() : nil,
            productId: product.productId, kind: product.kind.rawValue, groupId: isSubscription ? product.groupId : nil,
            purchaseDate: purchaseDate, originalPurchaseDate: original?.purchaseDate ?? purchaseDate, expiresDate: expiresDate,
            quantity: quantity, accountKey: account, appAccountToken: familyShared ? nil : token, ownership: ownership.rawValue,
            reason: reason.rawValue, priceMilli: price, currency: price == nil ? nil : config.currency(of: product), offer: offer,
            appTransactionId: appTransactionId(for: account), orderId: familyShared ? nil : store.ids.orderId(),
            revocationDate: nil, revocationReason: nil, revocationType: nil, revocationPercentage: nil, isUpgraded: false,
            signedDate: nowMs, modifiedSeq: nextModifiedSeq(), jws: "")
        tx.setBillingPlan(product: product, commitment: commitment)  // API 1.21 (SimulatorState+Commitments)
        tx.jws = signer.sign(tx.payload(config))
        store.transactions[id] = tx
        store.transactionsByAccount[account, default: []].append(id)
        if let order = tx.orderId { store.orders[order, default: []].append(id) }
        return id
    }

    // MARK: - Notifications

    /// Queues a notification signed now. With an instance, its renewal info is re-signed first so the
    /// notification carries the renewal info and status as of this moment.
    @discardableResult
    mutating func emit(_ type: NotificationType, _ subtype: NotificationSubtype?, transactionId: String?,
                       subscription otid: String?, extraData: [String: JSONValue] = [:]) -> String {
        var data: [String: JSONValue] = [
            "appAppleId": .int(config.appAppleId), "bundleId": .string(config.bundleId),
            "bundleVersion": .string(config.bundleVersion), "environment": .string(config.environment.rawValue),
        ]
        var account: String?
        if let tid = transactionId, let tx = store.transactions[tid] {
            data["signedTransactionInfo"] = .string(tx.jws)
            account = tx.accountKey
        }
        if let otid, store.subscriptions[otid] != nil {
            resignRenewal(otid)
            let sub = store.subscriptions[otid]!
            data["signedRenewalInfo"] = .string(sub.renewalJWS)
            data["status"] = .int(Int64(status(of: sub)))
            account = sub.accountKey
        }
        data.merge(extraData) { _, new in new }
        return enqueue(type, subtype, body: ("data", .object(data)), account: account, transactionId: transactionId, originalTransactionId: otid)
    }

    mutating func enqueue(_ type: NotificationType, _ subtype: NotificationSubtype?, body: (String, JSONValue), account: String?,
                          transactionId: String?, originalTransactionId: String?) -> String {
        let uuid = store.ids.uuid()
        let signedDate = nowMs
        var payload: [String: JSONValue] = [
            "notificationType": .string(type.rawValue), "notificationUUID": .string(uuid), "version": "2.0",
            "signedDate": .int(signedDate), body.0: body.1,
        ]
        if let subtype { payload["subtype"] = .string(subtype.rawValue) }
        store.notificationSeq += 1
        store.notifications.append(SimNotification(
            notificationUUID: uuid, notificationType: type.rawValue, subtype: subtype?.rawValue, signedDate: signedDate,
            jws: signer.sign(.object(payload)), accountKey: account, transactionId: transactionId,
            originalTransactionId: originalTransactionId, attempts: [], nextAttemptMs: nowMs, inFlight: false, seq: store.notificationSeq))
        trimNotifications()
        return uuid
    }

    mutating func trimNotifications() {
        guard store.notifications.count > Self.notificationsMax else { return }
        // Forget the oldest tenth that is settled (delivered or given up); pending ones are kept.
        var toDrop = Self.notificationsMax / 10
        store.notifications.removeAll { n in
            guard toDrop > 0, n.nextAttemptMs == nil, !n.inFlight else { return false }
            toDrop -= 1
            return true
        }
    }

    // MARK: - Delivery bookkeeping (the I/O happens outside, never under the engine's lock)

    func nextDeliveryDueMs() -> Int64? {
        store.notifications.lazy.compactMap(\.nextAttemptMs).min()
    }

    /// Marks every notification due by now as in flight and returns what to send.
    mutating func takeDueDeliveries() -> [(uuid: String, signedPayload: String)] {
        var out: [(String, String)] = []
        for i in store.notifications.indices {
            guard let due = store.notifications[i].nextAttemptMs, due <= nowMs else { continue }
            store.notifications[i].nextAttemptMs = nil
            store.notifications[i].inFlight = true
            out.append((store.notifications[i].notificationUUID, store.notifications[i].jws))
        }
        return out
    }

    /// Records one attempt and schedules the next on Apple's schedule (at most six attempts in all).
    mutating func recordAttempt(uuid: String, result: SendAttemptResult) {
        guard let i = store.notifications.firstIndex(where: { $0.notificationUUID == uuid }) else { return }
        var n = store.notifications[i]
        n.inFlight = false
        n.attempts.append(SendAttempt(attemptDate: nowMs, sendAttemptResult: result.rawValue))
        if result == .success || n.attempts.count > Self.retryDelaysMs.count {
            n.nextAttemptMs = nil
        } else {
            n.nextAttemptMs = nowMs + Self.retryDelaysMs[n.attempts.count - 1]
        }
        store.notifications[i] = n
    }

    /// After a restart, attempts that were in flight when the state was saved are due again.
    mutating func requeueInFlight() {
        for i in store.notifications.indices where store.notifications[i].inFlight {
            store.notifications[i].inFlight = false
            store.notifications[i].nextAttemptMs = nowMs
        }
    }
}
