import GooglePlaySimulator
import KakinCore
import KakinKit

/// What an Android customer does: buys on Google Play (Play Billing's role is the simulator's control API), the app
/// hands each purchase to Kakin through KakinKit's `Backend.submitPlayPurchase` (retrying once when Kakin answers
/// 502/503, keeping it for the next launch otherwise), and Play moves the subscription (cancel, restore, billing
/// failure → grace → hold, recovery, pause, plan changes, refunds).
extension World {
    func performPlay(_ action: Action, _ c: SimCustomer) async -> String {
        switch action {
        case .playCoins:
            let quantity = rng.chance(0.1) ? 2 + rng.below(2) : 1
            return await playBuy(c, rng.pick(["coins_500", "coins_1200"]), quantity: quantity)
        case .playSubscribe:
            let yearly = rng.chance(0.3)
            let trial = !yearly && !playModel.trialUsed.contains(c.index) && rng.chance(0.6)
            return await playBuy(c, "premium", basePlanId: yearly ? "yearly" : "monthly", offerId: trial ? "free-trial" : nil)
        case .playNoAds:
            return await playBuy(c, "noads")
        case .playChangePlan:
            let mode = rng.pick(["WITH_TIME_PRORATION", "CHARGE_FULL_PRICE", "WITHOUT_PRORATION"])
            return await playSubscriptionAction(c, "changePlan", extra: ["basePlanId": .string(rng.pick(["monthly", "yearly"])), "replacementMode": .string(mode)])
        case .playCancel, .playRestart, .playFailBilling, .playRecover, .playPause, .playResume, .playRefundSubscription:
            return await playSubscriptionAction(c, Self.playSubscriptionActions[action] ?? "")
        case .playRefundCoins:
            let orders = (playModel.tokensOf[c.index] ?? []).compactMap { playModel.purchases[$0] }
                .filter { !$0.subscription && $0.productId != "noads" && !playModel.isVoidedWhole($0.orderId, quantity: $0.quantity) }
            guard !orders.isEmpty else { return "nothing-to-refund" }
            let order = rng.pick(orders)
            var body: [String: JSONValue] = [:]
            if order.quantity > 1, rng.chance(0.5) { body["quantity"] = 1 }
            let r = await playControl("POST", "/v1/orders/\(order.orderId)/refund", .object(body))
            return "play-refund \(order.orderId)\(body["quantity"] != nil ? " one" : "") \(r.summary)"
        case .playRelaunch:
            return "relaunch play \(await sendUnsentPlayPurchases(c))"
        default:
            return "not-a-play-action"
        }
    }

    /// The Play simulator's subscription action each of these customer actions is.
    static let playSubscriptionActions: [Action: String] = [
        .playCancel: "cancel", .playRestart: "enableAutoRenew", .playFailBilling: "failBilling", .playRecover: "recover", .playPause: "pause",
        .playResume: "resume", .playRefundSubscription: "refund",
    ]

    /// A purchase through Play Billing, with the faults armed for it; the app then hands it to Kakin.
    func playBuy(_ c: SimCustomer, _ productId: String, basePlanId: String? = nil, offerId: String? = nil, quantity: Int = 1) async -> String {
        var body: [String: JSONValue] = ["productId": .string(productId), "obfuscatedAccountId": .string(c.token)]
        if let basePlanId { body["basePlanId"] = .string(basePlanId) }
        if let offerId { body["offerId"] = .string(offerId) }
        if quantity > 1 { body["quantity"] = .int(Int64(quantity)) }
        let r = await playControl("POST", "/v1/purchases", .object(body))
        let what = "play-buy \(productId)\(basePlanId.map { " \($0)" } ?? "")\(offerId.map { " \($0)" } ?? "")\(quantity > 1 ? " x\(quantity)" : "")"
        guard r.ok, let token = r.json?["purchaseToken"]?.stringValue, let orderId = r.json?["orderId"]?.stringValue else { return "\(what) \(r.summary)" }
        if offerId != nil { playModel.trialUsed.insert(c.index) }
        await notePlayPurchase(c, token: token, productId: productId, orderId: orderId, quantity: quantity, subscription: productId == "premium")
        return "\(what) \(orderId) \(await playHandOver(c, token: token, productId: productId))"
    }

    /// Records a new token (a purchase or a plan change): one-time orders, and subscription chains (a token linked to
    /// a chain's newest continues that chain, as Kakin's status does).
    func notePlayPurchase(_ c: SimCustomer, token: String, productId: String, orderId: String, quantity: Int, subscription: Bool) async {
        let now = clock.nowMs()
        playModel.purchases[token] = .init(customer: c.index, productId: productId, orderId: orderId, quantity: quantity, purchasedAtMs: now,
                                           subscription: subscription)
        playModel.tokensOf[c.index, default: []].append(token)
        playModel.acknowledgementChecks.append((now + Self.playAcknowledgementWindowMs, token))
        if subscription {
            let linked = await playAPI("purchases/subscriptionsv2/tokens/\(token)").json?["linkedPurchaseToken"]?.stringValue
            if let linked, let i = playModel.chains[c.index]?.firstIndex(where: { $0.token == linked }) {
                playModel.chains[c.index]![i].token = token
            } else {
                playModel.chains[c.index, default: []].append(.init(id: PlayPurchaseFacts.orderBase(orderId), token: token))
            }
        }
        playModel.unsent[c.index, default: []].append(.init(token: token, productId: productId, sinceMs: now))
        model.state.withLock { _ = $0.touched.insert(c.index) }
    }

    /// The app's side after Play Billing's purchase: killed before it could send (the purchase waits for the next launch),
    /// or sent with the network and Developer API faults armed; an `ack` fault makes Kakin's acknowledgement never land.
    func playHandOver(_ c: SimCustomer, token: String, productId: String) async -> String {
        let f = options.faults
        if f.contains(.ack), rng.chance(0.03) {
            playFaults.neverAcknowledge(token)
            faultsInjected += 1
            trace("fault never-acknowledged \(token.prefix(12))")
        }
        if f.contains(.kill), rng.chance(0.04) {
            faultsInjected += 1
            return "killed-before-send"
        }
        if f.contains(.playAPI), rng.chance(0.05) {
            // Up to 3 failures the client's own retries absorb; 4 or 5 reach the app as Kakin's 503.
            playFaults.failNext(1 + rng.below(5))
            faultsInjected += 1
        }
        await armNetworkFault()
        guard let unsent = playModel.unsent[c.index]?.first(where: { $0.token == token }) else { return "nothing-to-send" }
        let outcome = await sendPlay(c, unsent)
        network.arm(.none)
        return outcome
    }

    /// Launch: Play Billing's `queryPurchasesAsync` returns what Kakin has not confirmed; the app sends each.
    func sendUnsentPlayPurchases(_ c: SimCustomer) async -> String {
        var out: [String] = []
        for u in playModel.unsent[c.index] ?? [] { out.append(await sendPlay(c, u)) }
        return out.joined(separator: ",")
    }

    /// KakinKit's `submitPlayPurchase`, tried twice while Kakin's answer is retryable (502/503, no answer). Done on 201 or
    /// 409; a refusal (403, 422) is final: the app drops it. Otherwise it stays for the next launch.
    func sendPlay(_ c: SimCustomer, _ u: PlayWorldModel.Unsent) async -> String {
        let backend = InProcessBackend(kakin: kakin, network: network)
        var last = ""
        for _ in 0..<2 {
            do {
                let result = try await backend.submitPlayPurchase(PlayPurchase(packageName: playPackage, productID: u.productId, purchaseToken: u.token),
                                                                  customerID: c.id)
                playModel.unsent[c.index]?.removeAll { $0.token == u.token }
                switch result {
                case .credited(let s): return "\(s.transactionID):credited"
                case .alreadyProcessed(let s): return "\(s.transactionID):already"
                case .revoked: return "\(u.token.prefix(12)):revoked"
                }
            } catch {
                last = error.code
                guard error.isRetryable else {
                    playModel.unsent[c.index]?.removeAll { $0.token == u.token }
                    return "\(u.token.prefix(12)):refused(\(error.code))"
                }
            }
        }
        return "\(u.token.prefix(12)):unsent(\(last))"
    }

    /// An action on the customer's newest Play subscription; a plan change makes a new token the app hands to Kakin.
    func playSubscriptionAction(_ c: SimCustomer, _ action: String, extra: [String: JSONValue] = [:]) async -> String {
        guard let chain = playModel.chains[c.index]?.last else { return "no-play-subscription" }
        var body = extra
        body["action"] = .string(action)
        let r = await playControl("POST", "/v1/subscriptions/\(chain.token)/actions", .object(body))
        let head = "play-\(action) \(chain.id) \(r.ok ? (r.json?["subscriptionState"]?.stringValue ?? "") : r.summary)"
        guard r.ok, action == "changePlan", let token = r.json?["purchaseToken"]?.stringValue, token != chain.token else { return head }
        let orderId = await playAPI("purchases/subscriptionsv2/tokens/\(token)").json?["lineItems"]?.arrayValue?.first?["latestSuccessfulOrderId"]?.stringValue ?? ""
        await notePlayPurchase(c, token: token, productId: "premium", orderId: orderId, quantity: 1, subscription: true)
        return "\(head) -> \(orderId) \(await playHandOver(c, token: token, productId: "premium"))"
    }
}
