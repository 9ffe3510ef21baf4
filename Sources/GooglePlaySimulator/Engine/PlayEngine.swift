import KakinCore

/// The simulated Play store as a value-type state machine: purchases, subscriptions moving through time, orders,
/// voided purchases and the RTDNs it publishes. No I/O, no clock reads (time comes in through `advance(toMs:)`),
/// ids from a seeded generator. The runtime (`GooglePlaySimulator`) keeps it behind a lock and pushes the RTDNs.
struct PlayEngine: Sendable, Codable {
    var config: PlaySimulatorConfiguration
    private(set) var nowMs: Int64
    var purchases: [String: PurchaseRecord] = [:]
    /// Tokens in the order they were created (listings are stable).
    var tokens: [String] = []
    var orders: [String: OrderRecord] = [:]
    var voided: [VoidedRecord] = []
    var notifications: [NotificationRecord] = []
    /// `account|product` pairs that used a free trial (one per account and subscription, as Play allows).
    var trialsUsed: Set<String> = []
    /// The seeded generator's state (`SeededRandom`), kept as a number so the engine saves as JSON.
    var randomState: UInt64

    /// Play refunds and revokes a purchase not acknowledged within three days.
    static let acknowledgementWindowMs: Int64 = 3 * 86_400_000
    /// A token answers 410 this long after its purchase ended.
    static let tokenLifetimeAfterEndMs: Int64 = 60 * 86_400_000
    /// Pub/Sub's push backoff: 10 s doubling to at most 600 s.
    static let pushBackoffMsMin: Int64 = 10_000

    init(config: PlaySimulatorConfiguration, startMs: Int64) {
        self.config = config
        nowMs = startMs
        randomState = config.seed
    }

    // MARK: - Ids

    mutating func nextRandom() -> UInt64 {
        var generator = SeededRandom(seed: randomState)
        defer { randomState = generator.state }
        return generator.next()
    }

    /// `GPA.dddd-dddd-dddd-ddddd`.
    mutating func orderId() -> String {
        func digits(_ n: Int) -> String { String((0..<n).map { _ in Character(String(nextRandom() % 10)) }) }
        return "GPA.\(digits(4))-\(digits(4))-\(digits(4))-\(digits(5))"
    }

    /// A long opaque token shaped like Play's: 24 lowercase letters, `.AO-J1O`, 120 url-safe characters.
    mutating func purchaseToken() -> String {
        let lower = Array("abcdefghijklmnopqrstuvwxyz")
        let safe = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let head = String((0..<24).map { _ in lower[Int(nextRandom() % 26)] })
        let tail = String((0..<120).map { _ in safe[Int(nextRandom() % 64)] })
        return head + ".AO-J1O" + tail
    }

    mutating func messageId() -> String { String(10_000_000_000_000_000 + nextRandom() % 8_999_999_999_999_999) }

    // MARK: - Notifications

    /// Publishes one `DeveloperNotification` (`payload` is its one kind-specific object); the push is due now.
    mutating func publish(_ key: String, _ payload: JSONValue, summary: String, token: String?) {
        var fields: [String: JSONValue] = ["version": "1.0", "packageName": .string(config.packageName),
                                           "eventTimeMillis": .string(String(nowMs))]
        fields[key] = payload
        let notification = JSONValue.object(fields)
        if notifications.count >= Self.notificationsMax, let settled = notifications.firstIndex(where: { $0.nextAttemptMs == nil && !$0.inFlight }) {
            notifications.remove(at: settled)
        }
        notifications.append(NotificationRecord(messageId: messageId(), data: notification.jsonString, summary: summary,
                                                purchaseToken: token, publishTimeMs: nowMs, nextAttemptMs: nowMs))
    }

    mutating func publishSubscription(_ type: SubscriptionNotificationType, _ token: String) {
        publish("subscriptionNotification", ["version": "1.0", "notificationType": .int(Int64(type.rawValue)), "purchaseToken": .string(token)],
                summary: type.description, token: token)
    }

    mutating func publishOneTime(_ type: OneTimeProductNotificationType, _ record: PurchaseRecord) {
        publish("oneTimeProductNotification", ["version": "1.0", "notificationType": .int(Int64(type.rawValue)),
                                               "purchaseToken": .string(record.token), "sku": .string(record.productId)],
                summary: type.description, token: record.token)
    }

    mutating func publishVoided(_ v: VoidedRecord) {
        publish("voidedPurchaseNotification", ["purchaseToken": .string(v.token), "orderId": .string(v.orderId),
                                               "productType": .int(Int64(v.productType)), "refundType": .int(v.quantity == nil ? 1 : 2)],
                summary: "VOIDED_PURCHASE", token: v.token)
    }

    mutating func publishTest() {
        publish("testNotification", ["version": "1.0"], summary: "TEST_NOTIFICATION", token: nil)
    }

    /// The pushes due at `nowMs`, marked in flight (the runtime sends them outside the lock).
    mutating func takeDueDeliveries() -> [(messageId: String, data: String, publishTimeMs: Int64)] {
        var due: [(String, String, Int64)] = []
        for i in notifications.indices where !notifications[i].inFlight {
            guard let next = notifications[i].nextAttemptMs, next <= nowMs else { continue }
            notifications[i].inFlight = true
            due.append((notifications[i].messageId, notifications[i].data, notifications[i].publishTimeMs))
        }
        return due
    }

    /// Records a push attempt's answer: acknowledged, or redelivered with Pub/Sub's backoff (up to `pushAttemptsMax`).
    mutating func recordAttempt(messageId: String, status: Int) {
        guard let i = notifications.firstIndex(where: { $0.messageId == messageId }) else { return }
        notifications[i].inFlight = false
        notifications[i].attempts.append(.init(atMs: nowMs, status: status))
        let n = notifications[i].attempts.count
        if PlayPushStatus.acknowledges(status) || n >= Self.pushAttemptsMax {
            notifications[i].nextAttemptMs = nil
        } else {
            let backoff = min(Self.pushBackoffMsMin << Int64(min(n - 1, 16)), Self.pushBackoffMsMax)
            notifications[i].nextAttemptMs = nowMs + backoff
        }
    }

    /// Pushes that were in flight when the state was saved are due again.
    mutating func requeueInFlight() {
        for i in notifications.indices where notifications[i].inFlight {
            notifications[i].inFlight = false
            notifications[i].nextAttemptMs = notifications[i].nextAttemptMs ?? nowMs
        }
    }

    /// The earliest push due, for a runtime that delivers between engine steps.
    func nextDeliveryDueMs() -> Int64? {
        notifications.lazy.filter { !$0.inFlight }.compactMap(\.nextAttemptMs).min()
    }

    // MARK: - Purchases

    struct PurchaseRequest: Sendable {
        var productId: String
        var basePlanId: String?
        var offerId: String?
        var accountId: String?
        var quantity = 1
        var test = false
    }

    /// What Play Billing's purchase flow does: a new token and order, and the RTDN (4 for a subscription, one-time 1).
    mutating func purchase(_ request: PurchaseRequest) throws(KakinError) -> PurchaseRecord {
        guard let product = config.product(request.productId) else {
            throw KakinError(.playSimulatorUnknownProduct, "The catalog has no product \(request.productId).")
        }
        guard purchases.count < Self.purchasesMax else { throw KakinError(.playSimulatorInvalidAction, "The simulator holds \(Self.purchasesMax) purchases; no more are accepted.") }
        let token = purchaseToken()
        var record = PurchaseRecord(token: token, productId: product.productId, kind: product.kind, orderBase: orderId(), purchaseTimeMs: nowMs,
                                    accountId: request.accountId, test: request.test)
        switch product.kind {
        case .consumable, .nonConsumable:
            guard request.basePlanId == nil, request.offerId == nil else {
                throw KakinError(.invalidField, "basePlanId and offerId are for subscriptions; \(product.productId) is a one-time product.")
            }
            guard (1...10).contains(request.quantity), request.quantity == 1 || product.kind == .consumable else {
                throw KakinError(.invalidField, "quantity must be 1 to 10, and 1 for a non-consumable.")
            }
            if let owned = ownedOneTime(product.productId, account: request.accountId) {
                throw KakinError(.playSimulatorInvalidAction, "The account already owns \(product.productId) (token \(owned.prefix(12))…): consume it first (ITEM_ALREADY_OWNED).")
            }
            record.quantity = request.quantity
            record.refundableQuantity = request.quantity
            store(record, orderQuantity: request.quantity)
            publishOneTime(.purchased, record)
        case .subscription:
            guard request.quantity == 1 else { throw KakinError(.invalidField, "Subscriptions are bought one at a time (quantity 1).") }
            let planId = request.basePlanId ?? product.basePlans[0].basePlanId
            guard let plan = product.basePlan(planId) else {
                throw KakinError(.playSimulatorUnknownProduct, "\(product.productId) has no base plan \(planId).")
            }
            let previous = request.accountId.flatMap { liveSubscription(product.productId, account: $0) }
            if let previous, purchases[previous]?.autoRenew == true, purchases[previous]?.subscriptionState != .canceled {
                throw KakinError(.playSimulatorInvalidAction, "The account is already subscribed to \(product.productId) (ITEM_ALREADY_OWNED); use changePlan.")
            }
            if let previous, purchases[previous]?.acknowledged != true {
                throw KakinError(.playSimulatorInvalidAction, "The current purchase must be acknowledged before a resubscription.")
            }
            record.basePlanId = plan.basePlanId
            if let offerId = request.offerId {
                guard offerId == plan.freeTrialOfferId, let trial = plan.trialPeriod else {
                    throw KakinError(.playSimulatorUnknownProduct, "Base plan \(plan.basePlanId) has no offer \(offerId).")
                }
                let key = "\(request.accountId ?? "")|\(product.productId)"
                guard request.accountId == nil || !trialsUsed.contains(key) else {
                    throw KakinError(.playSimulatorInvalidAction, "This account already had the free trial of \(product.productId).")
                }
                if request.accountId != nil { trialsUsed.insert(key) }
                record.offerId = offerId
                record.inTrial = true
                record.expiryMs = trial.added(to: nowMs)
            } else {
                record.expiryMs = plan.billingPeriod.added(to: nowMs)
            }
            if let previous { replace(previous, by: &record, mode: .withTimeProration, productId: product.productId) }
            store(record, orderQuantity: 1)
            publishSubscription(.purchased, token)
        }
        return purchases[token]!
    }

    private mutating func store(_ record: PurchaseRecord, orderQuantity: Int) {
        purchases[record.token] = record
        tokens.append(record.token)
        let (price, currency) = charged(record, quantity: orderQuantity)
        orders[record.orderBase] = OrderRecord(orderId: record.orderBase, token: record.token, timeMs: nowMs, quantity: orderQuantity,
                                               priceMicros: price, currency: currency)
    }

    /// What an order of `record` charges: a one-time product's price × quantity, a subscription's base plan price (0 in a
    /// free trial).
    func charged(_ record: PurchaseRecord, quantity: Int) -> (micros: Int64, currency: String) {
        guard let product = config.product(record.productId) else { return (0, "USD") }
        guard record.isSubscription else { return (product.priceMicros * Int64(quantity), product.currency) }
        guard let plan = product.basePlan(record.basePlanId ?? "") else { return (0, product.currency) }
        return (record.inTrial ? 0 : plan.priceMicros, plan.currency)
    }

    /// A one-time product the account holds unconsumed and not voided (Play refuses to sell it again).
    func ownedOneTime(_ productId: String, account: String?) -> String? {
        guard let account else { return nil }
        return tokens.last { t in
            guard let p = purchases[t] else { return false }
            return p.productId == productId && p.accountId == account && !p.consumed && !p.voided
        }
    }

    /// The account's newest subscription to `productId` that still entitles (not expired).
    func liveSubscription(_ productId: String, account: String) -> String? {
        tokens.last { t in
            guard let p = purchases[t], p.isSubscription, p.productId == productId, p.accountId == account else { return false }
            return p.subscriptionState != .expired && !p.voided
        }
    }

    /// The old token is replaced by `record` (a plan change or a resubscription before lapse): linked, and the
    /// old line item ends now with `replacementCancellation`.
    private mutating func replace(_ oldToken: String, by record: inout PurchaseRecord, mode: PlayReplacementMode, productId: String) {
        guard var old = purchases[oldToken] else { return }
        record.linkedPurchaseToken = oldToken
        record.replacement = .init(productId: old.productId, basePlanId: old.basePlanId, offerId: old.offerId, mode: mode.rawValue)
        record.accountId = record.accountId ?? old.accountId
        old.state = PlaySubscriptionState.expired.rawValue
        old.autoRenew = false
        old.cancellation = "replacement"
        old.expiryMs = min(old.expiryMs, nowMs)
        old.endedMs = nowMs
        old.pause = nil
        purchases[oldToken] = old
    }

    // MARK: - Subscription actions (the control API)

    enum Action: String, CaseIterable, Sendable {
        case cancel, enableAutoRenew, failBilling, recover, pause, resume, changePlan, refund, revoke
    }

    /// Applies `action` to the subscription `token`. `changePlan` answers the new token.
    @discardableResult
    mutating func act(_ action: Action, token: String, productId: String? = nil, basePlanId: String? = nil,
                      replacementMode: PlayReplacementMode? = nil) throws(KakinError) -> String {
        guard var s = purchases[token], s.isSubscription else {
            throw KakinError(.playSimulatorUnknownPurchase, "No subscription has this purchase token.")
        }
        let state = s.subscriptionState
        func refuse(_ why: String) -> KakinError { KakinError(.playSimulatorInvalidAction, "\(action.rawValue): \(why) (the subscription is \(state.rawValue)).") }
        switch action {
        case .cancel:
            guard [.active, .inGracePeriod, .onHold, .paused].contains(state), s.autoRenew else { throw refuse("auto-renew is already off or it ended") }
            s.autoRenew = false
            s.cancellation = "user"
            s.cancelTimeMs = nowMs
            s.pause = s.pause?.started == true ? s.pause : nil
            purchases[token] = s
            if state == .onHold || state == .paused {
                // Nothing is paid up: it ends now.
                end(token, notify: [.canceled, .expired])
            } else {
                purchases[token]?.state = PlaySubscriptionState.canceled.rawValue
                publishSubscription(.canceled, token)
            }
        case .enableAutoRenew:
            guard state == .canceled, s.expiryMs > nowMs else { throw refuse("only a cancelled subscription that has not expired can be restored") }
            s.autoRenew = true
            s.cancellation = nil
            s.cancelTimeMs = nil
            s.state = PlaySubscriptionState.active.rawValue
            purchases[token] = s
            publishSubscription(.restarted, token)
        case .failBilling:
            guard [.active, .canceled].contains(state) else { throw refuse("billing can fail only for a paid-up subscription") }
            purchases[token]?.billingFails = true
        case .recover:
            purchases[token]?.billingFails = false
            if state == .inGracePeriod || state == .onHold { recoverNow(token) }
        case .pause:
            guard state == .active, s.autoRenew, s.pause == nil, !s.inTrial else { throw refuse("only an active, auto-renewing, paid subscription can be paused") }
            let months = config.pauseMonths
            purchases[token]?.pause = .init(startMs: s.expiryMs, resumeMs: ISOPeriod(months: months).added(to: s.expiryMs), started: false)
            publishSubscription(.pauseScheduleChanged, token)
        case .resume:
            guard let pause = s.pause else { throw refuse("it is not paused and no pause is scheduled") }
            if pause.started {
                resumeNow(token)
            } else {
                purchases[token]?.pause = nil
                publishSubscription(.pauseScheduleChanged, token)
            }
        case .changePlan:
            guard [.active, .canceled, .inGracePeriod].contains(state) else { throw refuse("only a live subscription can change plans") }
            guard s.acknowledged else { throw refuse("the current purchase must be acknowledged before a plan change") }
            let newProductId = productId ?? s.productId
            guard let product = config.product(newProductId), product.kind == .subscription else {
                throw KakinError(.playSimulatorUnknownProduct, "The catalog has no subscription \(newProductId).")
            }
            let planId = basePlanId ?? product.basePlans[0].basePlanId
            guard let plan = product.basePlan(planId) else { throw KakinError(.playSimulatorUnknownProduct, "\(newProductId) has no base plan \(planId).") }
            guard newProductId != s.productId || planId != s.basePlanId else { throw refuse("the new plan is the current one") }
            let mode = replacementMode ?? .withTimeProration
            var record = PurchaseRecord(token: purchaseToken(), productId: newProductId, kind: .subscription, orderBase: orderId(), purchaseTimeMs: nowMs,
                                        accountId: s.accountId, test: s.test)
            record.basePlanId = plan.basePlanId
            record.expiryMs = Self.expiryAfterChange(old: s, oldPlan: config.product(s.productId)?.basePlan(s.basePlanId ?? ""), new: plan,
                                                     mode: mode, nowMs: nowMs)
            replace(token, by: &record, mode: mode, productId: newProductId)
            store(record, orderQuantity: 1)
            publishSubscription(.purchased, record.token)
            return record.token
        case .refund, .revoke:
            guard !s.voided else { throw refuse("it was already refunded or revoked") }
            // `refund`: the customer got a refund from Google (source user, reason remorse); `revoke`: the
            // developer revoked it with a full refund (source developer).
            revokeSubscription(token, source: action == .refund ? PlayVoidedSource.user.rawValue : PlayVoidedSource.developer.rawValue,
                               reason: action == .refund ? PlayVoidedReason.remorse.rawValue : PlayVoidedReason.other.rawValue)
        }
        return token
    }

    /// Where a plan change leaves the new expiry (ours: Play's proration in time, by price).
    static func expiryAfterChange(old: PurchaseRecord, oldPlan: PlayBasePlan?, new plan: PlayBasePlan, mode: PlayReplacementMode, nowMs: Int64) -> Int64 {
        let fullPeriodEnd = plan.billingPeriod.added(to: nowMs)
        switch mode {
        case .withTimeProration:
            // The unused time of the old plan, converted at the price ratio, is added to a fresh period.
            guard !old.inTrial, let oldPlan, oldPlan.priceMicros > 0, plan.priceMicros > 0 else { return fullPeriodEnd }
            let remaining = max(0, old.expiryMs - nowMs)
            return fullPeriodEnd + Int64(Double(remaining) * Double(oldPlan.priceMicros) / Double(plan.priceMicros))
        case .chargeFullPrice:
            return fullPeriodEnd
        case .deferred:
            return plan.billingPeriod.added(to: max(old.expiryMs, nowMs))
        default:
            // CHARGE_PRORATED_PRICE, WITHOUT_PRORATION, KEEP_EXISTING: the current billing date stays.
            return max(old.expiryMs, nowMs)
        }
    }

    /// Revoked now: entitlement ends, the latest order is voided, RTDN 12 and the voided-purchase notification.
    mutating func revokeSubscription(_ token: String, source: Int, reason: Int) {
        guard let s = purchases[token] else { return }
        purchases[token]?.voided = true
        let v = VoidedRecord(token: token, orderId: s.latestOrderId, purchaseTimeMs: s.purchaseTimeMs, voidedTimeMs: nowMs, source: source,
                             reason: reason, quantity: nil, productType: 1)
        voided.append(v)
        end(token, notify: [.revoked], cancellation: s.cancellation ?? "developer")
        publishVoided(v)
    }

    /// The subscription stops now: `EXPIRED`, expiry now, the given RTDNs.
    private mutating func end(_ token: String, notify: [SubscriptionNotificationType], cancellation: String? = nil) {
        guard var s = purchases[token] else { return }
        s.state = PlaySubscriptionState.expired.rawValue
        s.autoRenew = false
        s.expiryMs = min(s.expiryMs, nowMs)
        s.endedMs = nowMs
        s.pause = nil
        s.graceEndMs = nil
        s.holdEndMs = nil
        if let cancellation { s.cancellation = cancellation }
        purchases[token] = s
        for type in notify { publishSubscription(type, token) }
    }

    /// A renewal order is charged: `..N`, a new period from `fromMs`.
    private mutating func charge(_ token: String, fromMs: Int64) {
        guard var s = purchases[token], let plan = config.product(s.productId)?.basePlan(s.basePlanId ?? "") else { return }
        s.renewals += 1
        s.inTrial = false
        s.offerId = nil
        s.expiryMs = plan.billingPeriod.added(to: fromMs)
        s.state = (s.autoRenew ? PlaySubscriptionState.active : .canceled).rawValue
        s.failedRenewalMs = nil
        s.graceEndMs = nil
        s.holdEndMs = nil
        purchases[token] = s
        orders[s.latestOrderId] = OrderRecord(orderId: s.latestOrderId, token: token, timeMs: nowMs, quantity: 1, priceMicros: plan.priceMicros,
                                              currency: plan.currency)
    }

    private mutating func recoverNow(_ token: String) {
        guard let s = purchases[token] else { return }
        // In grace the period starts where the failed one would have (no gap); after it, from the recovery.
        let from = s.subscriptionState == .inGracePeriod ? (s.failedRenewalMs ?? nowMs) : nowMs
        charge(token, fromMs: from)
        publishSubscription(.recovered, token)
    }

    private mutating func resumeNow(_ token: String) {
        purchases[token]?.pause = nil
        charge(token, fromMs: nowMs)
        publishSubscription(.recovered, token)
    }

    // MARK: - Time

    /// The earliest moment something happens by itself: a renewal, an expiry, a grace or hold end, a pause starting
    /// or ending, an acknowledgement deadline.
    func nextEventMs() -> Int64? {
        var next: Int64? = nil
        func consider(_ t: Int64?) { if let t { next = min(next ?? t, t) } }
        for p in purchases.values {
            if !p.acknowledged, !p.voided, !p.consumed || p.isSubscription {
                if !p.isSubscription || p.subscriptionState != .expired { consider(p.purchaseTimeMs + Self.acknowledgementWindowMs) }
            }
            guard p.isSubscription else { continue }
            switch p.subscriptionState {
            case .active, .canceled: consider(p.expiryMs)
            case .inGracePeriod: consider(p.graceEndMs)
            case .onHold: consider(p.holdEndMs)
            case .paused: consider(p.pause?.resumeMs)
            default: break
            }
        }
        return next
    }

    /// Moves time to `targetMs`, applying every event at its own instant, in order. Returns the RTDNs published.
    @discardableResult
    mutating func advance(toMs targetMs: Int64) -> [String] {
        let before = notifications.count
        var steps = 0
        while let next = nextEventMs(), next <= targetMs, steps < 1_000_000 {
            steps += 1
            nowMs = max(nowMs, next)
            applyDue()
        }
        nowMs = max(nowMs, targetMs)
        return notifications.suffix(max(0, notifications.count - before)).map(\.summary)
    }

    /// Everything due at `nowMs`, token by token in creation order.
    private mutating func applyDue() {
        for token in tokens {
            guard let p = purchases[token] else { continue }
            if !p.acknowledged, !p.voided, p.purchaseTimeMs + Self.acknowledgementWindowMs <= nowMs,
                !p.isSubscription ? !p.consumed : p.subscriptionState != .expired
            {
                refundUnacknowledged(token)
                continue
            }
            guard p.isSubscription else { continue }
            switch p.subscriptionState {
            case .active where p.expiryMs <= nowMs, .canceled where p.expiryMs <= nowMs:
                renewOrExpire(token)
            case .inGracePeriod where (p.graceEndMs ?? .max) <= nowMs:
                enterHold(token)
            case .onHold where (p.holdEndMs ?? .max) <= nowMs:
                end(token, notify: [.canceled, .expired], cancellation: "system")
            case .paused where (p.pause?.resumeMs ?? .max) <= nowMs:
                resumeNow(token)
            default:
                break
            }
        }
    }

    private mutating func renewOrExpire(_ token: String) {
        guard let s = purchases[token] else { return }
        guard s.autoRenew else {
            end(token, notify: [.expired])
            return
        }
        if let pause = s.pause, !pause.started {
            purchases[token]?.pause?.started = true
            purchases[token]?.state = PlaySubscriptionState.paused.rawValue
            publishSubscription(.paused, token)
            return
        }
        if s.billingFails {
            purchases[token]?.failedRenewalMs = s.expiryMs
            if config.graceDays > 0 {
                purchases[token]?.state = PlaySubscriptionState.inGracePeriod.rawValue
                purchases[token]?.graceEndMs = s.expiryMs + Int64(config.graceDays) * 86_400_000
                publishSubscription(.inGracePeriod, token)
            } else {
                enterHold(token)
            }
            return
        }
        charge(token, fromMs: s.expiryMs)
        publishSubscription(.renewed, token)
    }

    private mutating func enterHold(_ token: String) {
        guard let s = purchases[token] else { return }
        guard config.holdDays > 0 else {
            end(token, notify: [.canceled, .expired], cancellation: "system")
            return
        }
        purchases[token]?.state = PlaySubscriptionState.onHold.rawValue
        purchases[token]?.holdEndMs = (s.graceEndMs ?? s.failedRenewalMs ?? nowMs) + Int64(config.holdDays) * 86_400_000
        publishSubscription(.onHold, token)
    }

    /// Three days without acknowledgement: Play refunds and revokes (`voidedReason` 8).
    private mutating func refundUnacknowledged(_ token: String) {
        guard let p = purchases[token] else { return }
        if p.isSubscription {
            revokeSubscription(token, source: PlayVoidedSource.google.rawValue, reason: PlayVoidedReason.unacknowledgedPurchase.rawValue)
        } else {
            voidOneTime(token, orderId: p.orderBase, quantity: p.refundableQuantity, source: PlayVoidedSource.google.rawValue,
                        reason: PlayVoidedReason.unacknowledgedPurchase.rawValue)
        }
    }

    /// A one-time purchase refunded (`quantity` of its items; all of them ends it).
    mutating func voidOneTime(_ token: String, orderId: String, quantity: Int, source: Int, reason: Int) {
        guard var p = purchases[token] else { return }
        let partial = quantity < p.refundableQuantity
        p.refundableQuantity -= quantity
        if !partial {
            p.voided = true
            p.endedMs = nowMs
        }
        purchases[token] = p
        orders[orderId]?.refundedQuantity += quantity
        let v = VoidedRecord(token: token, orderId: orderId, purchaseTimeMs: p.purchaseTimeMs, voidedTimeMs: nowMs, source: source, reason: reason,
                             quantity: partial || p.quantity > 1 ? quantity : nil, productType: 2)
        voided.append(v)
        publishVoided(v)
    }

    /// `POST /play-simulator/v1/orders/{orderId}/refund` and the API's `orders.refund`: a whole order, or
    /// `quantity` items of a one-time order; `revoke` also ends a subscription's entitlement.
    mutating func refundOrder(_ orderId: String, quantity: Int?, revoke: Bool, source: Int) throws(KakinError) {
        guard let order = orders[orderId], let p = purchases[order.token] else {
            throw KakinError(.playSimulatorUnknownOrder, "No order has this order ID.")
        }
        guard order.refundedQuantity < order.quantity, !p.voided else { throw KakinError(.playSimulatorInvalidAction, "The order was already refunded.") }
        if p.isSubscription {
            guard quantity == nil || quantity == 1 else { throw KakinError(.invalidField, "A subscription order is refunded whole.") }
            orders[orderId]?.refundedQuantity = 1
            if revoke {
                revokeSubscription(order.token, source: source, reason: PlayVoidedReason.other.rawValue)
            } else {
                let v = VoidedRecord(token: order.token, orderId: orderId, purchaseTimeMs: p.purchaseTimeMs, voidedTimeMs: nowMs, source: source,
                                     reason: PlayVoidedReason.other.rawValue, quantity: nil, productType: 1)
                voided.append(v)
                publishVoided(v)
            }
        } else {
            let n = quantity ?? p.refundableQuantity
            guard (1...p.refundableQuantity).contains(n) else {
                throw KakinError(.invalidField, "quantity must be 1 to \(p.refundableQuantity) (the refundable quantity).")
            }
            voidOneTime(order.token, orderId: orderId, quantity: n, source: source, reason: PlayVoidedReason.other.rawValue)
        }
    }
}
