import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinKit
import KakinService

/// What customers do. Each action is one step; its outcome (never Kakin's generated ids) goes into the trace.
extension World {
    enum Action: String, CaseIterable {
        case coins, doubleTap, spend, tip, spendReplay, subscribe, subscribeWithOffer, changePlan, cancel, resubscribe,
             applyOffer, failBilling, recoverBilling, refundCoins, reverseRefund, refundSubscription, noAds, seasonPass, familyShare,
             revokeFamilySharing, restoreOnNewDevice, transferAttempt, relaunch, wallet,
             // An Android customer's (`PlayActions.swift`).
             playCoins, playSubscribe, playChangePlan, playCancel, playRestart, playFailBilling, playRecover, playPause, playResume,
             playRefundCoins, playRefundSubscription, playNoAds, playRelaunch

        /// How often an iPhone customer does it (never a Play action).
        var weight: Int {
            switch self {
            case .coins: return 30
            case .doubleTap: return 5
            case .spend: return 14
            case .tip: return 6
            case .spendReplay: return 3
            case .subscribe: return 8
            case .subscribeWithOffer: return 4
            case .changePlan: return 5
            case .cancel: return 5
            case .resubscribe: return 4
            case .applyOffer: return 3
            case .failBilling: return 4
            case .recoverBilling: return 3
            case .refundCoins: return 4
            case .reverseRefund: return 2
            case .refundSubscription: return 2
            case .noAds: return 3
            case .seasonPass: return 2
            case .familyShare: return 2
            case .revokeFamilySharing: return 1
            case .restoreOnNewDevice: return 3
            case .transferAttempt: return 2
            case .relaunch: return 5
            case .wallet: return 4
            case .playCoins, .playSubscribe, .playChangePlan, .playCancel, .playRestart, .playFailBilling, .playRecover, .playPause, .playResume,
                 .playRefundCoins, .playRefundSubscription, .playNoAds, .playRelaunch: return 0
            }
        }

        /// How often an Android customer does it: Play's purchases and the wallet's store-neutral spends.
        var playWeight: Int {
            switch self {
            case .spend, .tip, .spendReplay, .wallet: return weight
            case .playCoins: return 30
            case .playSubscribe: return 10
            case .playChangePlan: return 4
            case .playCancel: return 5
            case .playRestart: return 3
            case .playFailBilling: return 4
            case .playRecover: return 3
            case .playPause: return 3
            case .playResume: return 2
            case .playRefundCoins: return 4
            case .playRefundSubscription: return 2
            case .playNoAds: return 3
            case .playRelaunch: return 5
            default: return 0
            }
        }

        static let totalWeight = allCases.reduce(0) { $0 + $1.weight }
        static let playTotalWeight = allCases.reduce(0) { $0 + $1.playWeight }
    }

    func chooseAction(play: Bool) -> Action {
        var r = rng.below(play ? Action.playTotalWeight : Action.totalWeight)
        for a in Action.allCases {
            let w = play ? a.playWeight : a.weight
            if r < w { return a }
            r -= w
        }
        return .coins
    }

    func act(_ c: SimCustomer) async throws {
        await crashMaybe()
        let action = chooseAction(play: c.isPlay)
        model.state.withLock { _ = $0.touched.insert(c.index) }
        let full = diskFullMaybe()
        defer { database.full.store(false, ordering: .relaxed) }
        let started = ContinuousClock.now
        let outcome = await perform(action, c)
        profile(action.rawValue, since: started)
        trace("step \(step) t \(clock.nowMs()) \(c.id) \(action.rawValue)\(full ? " disk-full" : "") -> \(outcome)")
        await stepPlayWorkers()
        try await collectNotifications()
    }

    func perform(_ action: Action, _ c: SimCustomer) async -> String {
        switch action {
        case .coins:
            return await buy(c, rng.pick(["coins.100", "coins.500", "coins.1200"]))
        case .doubleTap:
            return await doubleTap(c, rng.pick(["coins.100", "coins.500"]))
        case .spend, .tip:
            return await spend(c, recipient: action == .tip ? "performer-\(rng.below(20))" : nil)
        case .spendReplay:
            return await spendReplay(c)
        case .subscribe:
            return await buy(c, rng.pick(["premium.monthly", "premium.monthly", "premium.yearly", "premium.plus.monthly"]))
        case .subscribeWithOffer:
            let product = rng.pick(["premium.monthly", "premium.yearly"])
            let offers = catalog[product]?.promotionalOffers.compactMap(\.id) ?? []
            guard !offers.isEmpty else { return "no-offer" }
            return await buy(c, product, offer: rng.pick(offers))
        case .changePlan:
            return await subscriptionAction(c, "changeProduct", extra: ["productId": .string(rng.pick(["premium.monthly", "premium.yearly", "premium.plus.monthly"]))])
        case .cancel:
            return await subscriptionAction(c, "disableAutoRenew")
        case .resubscribe:
            let r = await subscriptionAction(c, "enableAutoRenew")
            if r.hasPrefix("refused") { return "buy " + (await buy(c, "premium.monthly")) }
            return r
        case .applyOffer:
            // A promotional offer applied to a running subscription: it takes effect at the next renewal.
            let offer = rng.pick(["promo.3m.half", "promo.6m.free", "promo.1y.free", "promo.yearly.1m.free"])
            return await subscriptionAction(c, "applyPromotionalOffer", extra: ["offerId": .string(offer)])
        case .failBilling:
            return await subscriptionAction(c, "failBilling")
        case .recoverBilling:
            return await subscriptionAction(c, "recoverBilling")
        case .refundCoins:
            let picks = model.state.withLock { s in (s.chargesOf[c.index] ?? []).filter { s.charges[$0]!.kind == .consumable && !s.charges[$0]!.refunded } }
            guard !picks.isEmpty else { return "nothing-to-refund" }
            let tid = rng.pick(picks)
            let r = await control("POST", "/simulator/v1/transactions/\(tid)/refund", [:])
            if r.ok { model.state.withLock { $0.charges[tid]!.refunded = true } }
            return "refund \(tid) \(r.summary)"
        case .reverseRefund:
            let picks = model.state.withLock { s in (s.chargesOf[c.index] ?? []).filter { s.charges[$0]!.refunded && !s.charges[$0]!.reversed } }
            guard !picks.isEmpty else { return "nothing-to-reverse" }
            let tid = rng.pick(picks)
            let r = await control("POST", "/simulator/v1/transactions/\(tid)/actions", ["action": "reverseRefund"])
            if r.ok { model.state.withLock { $0.charges[tid]!.refunded = false; $0.charges[tid]!.reversed = true } }
            return "reverse \(tid) \(r.summary)"
        case .refundSubscription:
            return await subscriptionAction(c, "refund")
        case .noAds:
            return await buy(c, "noads")
        case .seasonPass:
            return await buy(c, "season.pass")
        case .familyShare:
            // Another account of the family gets the subscription shared to it.
            let member = customers[rng.below(customers.count)]
            guard member.index != c.index else { return "alone" }
            let r = await control("POST", "/simulator/v1/purchases", ["productId": "premium.monthly", "appAccountToken": .string(member.token), "familyShared": true])
            if r.ok, let otid = r.json?["originalTransactionId"]?.stringValue, let tid = r.json?["transactionId"]?.stringValue,
               let jws = r.json?["signedTransaction"]?.stringValue {
                let t = StoreTransaction(id: tid, originalID: otid, productID: "premium.monthly", productType: .autoRenewable, jwsRepresentation: jws)
                await member.device.receiveUpdate(t)
                model.state.withLock { s in
                    s.owned[member.token, default: []].append(t)
                    s.touched.insert(member.index)
                    if !(s.subscriptions[member.index] ?? []).contains(otid) { s.subscriptions[member.index, default: []].append(otid) }
                    s.family.insert(otid)
                }
            }
            return "share to \(member.id) \(r.summary)"
        case .revokeFamilySharing:
            let otid = model.state.withLock { s in (s.subscriptions[c.index] ?? []).first { s.family.contains($0) } }
            guard let otid else { return "no-family-share" }
            let r = await control("POST", "/simulator/v1/subscriptions/\(otid)/actions", ["action": "revokeFamilySharing"])
            return "revoke \(otid) \(r.summary)"
        case .restoreOnNewDevice:
            guard await c.device.unfinishedCount == 0 else { return "old-phone-busy" }
            c.device = newDevice()
            c.app = newApp(for: c.device, customerId: c.id)
            await armNetworkFault()
            do {
                let report = try await c.app.restore()
                return "restored subs \(report.status.subscriptions.count) nc \(report.status.nonConsumables.count) wallet \(report.status.wallet.paid)/\(report.status.wallet.free)"
            } catch {
                return "restore-failed \(error.code)"
            }
        case .transferAttempt:
            // Signed in to another customer's Apple account: presents that account's transaction (Kakin keeps the first owner).
            let other = customers[rng.below(customers.count)]
            let tid = model.state.withLock { s in (s.chargesOf[other.index] ?? []).last { s.charges[$0]!.kind != .consumable } }
            guard other.index != c.index, let tid else { return "nothing-to-transfer" }
            model.state.withLock { _ = $0.touched.insert(other.index) }
            do {
                let status = try await InProcessBackend(kakin: kakin, network: network).restore(c.id, transactionID: tid)
                return "transfer \(tid) from \(other.id) -> subs \(status.subscriptions.count)"
            } catch {
                return "transfer \(tid) from \(other.id) refused \(error.code)"
            }
        case .relaunch:
            c.app = newApp(for: c.device, customerId: c.id)
            let retries = await c.app.enterForeground()
            return "relaunch \(retries.map { Self.describe($0) }.joined(separator: ","))"
        case .wallet:
            await armNetworkFault()
            do {
                let w = try await c.app.wallet()
                return "wallet \(w.wallet.paid)/\(w.wallet.free) retries \(w.retries.map { Self.describe($0) }.joined(separator: ","))"
            } catch {
                return "wallet-failed \(error.code)"
            }
        case .playCoins, .playSubscribe, .playChangePlan, .playCancel, .playRestart, .playFailBilling, .playRecover, .playPause, .playResume,
             .playRefundCoins, .playRefundSubscription, .playNoAds, .playRelaunch:
            return await performPlay(action, c)
        }
    }

    /// With the network fault: the next call to Kakin is lost on the way there, or its answer on the way back.
    func armNetworkFault() async {
        guard options.faults.contains(.network) else { return }
        if rng.chance(0.03) {
            network.arm(.down)
            faultsInjected += 1
        } else if rng.chance(0.03) {
            network.arm(.answerLost)
            faultsInjected += 1
        }
    }

    /// A tap on "buy", with the app-kill and network faults armed for it.
    func buy(_ c: SimCustomer, _ productId: String, offer: String? = nil) async -> String {
        var killed = ""
        if options.faults.contains(.kill) {
            if rng.chance(0.04) {
                await c.device.arm(killAfterCharge: true)
                killed = " killed-after-charge"
                faultsInjected += 1
            } else if rng.chance(0.04) {
                await c.device.arm(killBeforeFinish: true)
                killed = " killed-before-finish"
                faultsInjected += 1
            }
        }
        await armNetworkFault()
        let outcome = await c.app.purchase(productId, offerID: offer)
        await c.device.disarm()
        network.arm(.none)
        if !killed.isEmpty { c.app = newApp(for: c.device, customerId: c.id) }
        return "buy \(productId)\(offer.map { " offer \($0)" } ?? "")\(killed) \(Self.describe(outcome))"
    }

    /// Two taps on "buy" while the first is still at the payment sheet: the second must not charge again.
    func doubleTap(_ c: SimCustomer, _ productId: String) async -> String {
        guard await c.device.unfinishedCount == 0 else { return await buy(c, productId) }
        do {
            _ = try await c.app.refreshStatus()
        } catch {
            return "tap-failed \(error.code)"
        }
        await c.device.holdNextPurchase()
        let app = c.app
        let first = Task { await app.purchase(productId) }
        await c.device.waitUntilHeld()
        let second = await app.purchase(productId)
        await c.device.releaseHeld()
        let firstOutcome = await first.value
        return "double-tap \(productId) first \(Self.describe(firstOutcome)) second \(Self.describe(second))"
    }

    static func describe(_ o: PurchaseOutcome) -> String {
        switch o {
        case .completed(let p): return "completed \(p.transaction.id) \(p.submission.httpStatus)"
        case .unfinished(let t, _, let e): return "unfinished \(t.id) \(e.code)"
        case .stillProcessing(_, let u, _): return "still-processing \(u.count)"
        case .failed(let e): return "failed \(e.code)"
        case .pending: return "pending"
        case .cancelled: return "cancelled"
        }
    }

    func spend(_ c: SimCustomer, recipient: String?) async -> String {
        guard let balance = try? await services.wallets.balance(c.id) else { return "balance-unreadable" }
        c.spends += 1
        // Mostly what the wallet holds; now and then one coin more than it holds (refused, nothing moves).
        let amount: Int64 = balance.total > 0 && !rng.chance(0.1) ? 1 + Int64(rng.below(Int(min(balance.total, 5_000)))) : max(1, balance.total + 1)
        let key = "sp-\(c.id)-\(c.spends)"
        let request = SpendRequest(customerId: c.id, idempotencyKey: key, canonicalRequest: "{\"amount\":\(amount),\"item\":\"sticker\",\"recipient\":\"\(recipient ?? "")\"}",
                                   amount: amount, item: "sticker", recipient: recipient)
        do {
            let answer = try await services.wallets.spend(request, requestId: "req-\(step)")
            return "spend \(amount)\(recipient.map { " to \($0)" } ?? "") -> \(answer.status)"
        } catch {
            return "spend \(amount) refused \(error.kind.code)"
        }
    }

    /// The same spend sent again (a retry after a lost answer): the stored answer, nothing moves.
    func spendReplay(_ c: SimCustomer) async -> String {
        guard c.spends > 0 else { return "nothing-to-replay" }
        let before = try? await services.wallets.balance(c.id)
        let r = await spend(c, recipient: nil)
        c.spends -= 1
        let again = await spendAgain(c)
        let after = try? await services.wallets.balance(c.id)
        _ = before
        return "\(r) replay \(again) balance \(after?.paid ?? -1)/\(after?.free ?? -1)"
    }

    func spendAgain(_ c: SimCustomer) async -> String {
        // Re-sends the last spend's key with a different amount: refused (422), nothing moves.
        let key = "sp-\(c.id)-\(c.spends + 1)"
        c.spends += 1
        let request = SpendRequest(customerId: c.id, idempotencyKey: key, canonicalRequest: "{\"other\":true}", amount: 1, item: "sticker", recipient: nil)
        do {
            let answer = try await services.wallets.spend(request, requestId: "req-\(step)-again")
            return "\(answer.status)"
        } catch {
            return "refused \(error.kind.code)"
        }
    }

    func subscriptionAction(_ c: SimCustomer, _ action: String, extra: [String: JSONValue] = [:]) async -> String {
        let otid = model.state.withLock { s in (s.subscriptions[c.index] ?? []).last { !s.family.contains($0) } }
        guard let otid else { return "no-subscription" }
        var body = extra
        body["action"] = .string(action)
        let r = await control("POST", "/simulator/v1/subscriptions/\(otid)/actions", .object(body))
        return "\(action) \(otid) \(r.summary)"
    }

    struct ControlAnswer {
        var status: Int
        var json: JSONValue?
        var ok: Bool { (200...299).contains(status) }
        var summary: String {
            if ok { return "ok \(json?["outcome"]?.stringValue ?? "")" }
            return "refused \(json?["error"]?["code"]?.stringValue ?? String(status))"
        }
    }

    func control(_ method: String, _ path: String, _ body: JSONValue) async -> ControlAnswer {
        let answer = await simulator.handle(HTTPRequest(method: method, path: path, body: body.serialized()))
        return ControlAnswer(status: answer.status, json: try? JSONParser.parse(answer.body))
    }
}
