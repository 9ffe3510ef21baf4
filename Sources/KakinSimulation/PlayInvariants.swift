import GooglePlaySimulator
import KakinCore
import KakinService

/// Google Play's invariants, every evening once pushes, acknowledgements and retries have drained:
/// - `credited-once`: each Play order of coins credited exactly once with its coins × quantity; `refund-taken-back`: a
///   whole refund (the customer's, or Play's own for want of acknowledgement) taken back once, a partial one at least once;
/// - `status-equals-truth`: each Play subscription chain's state in Kakin is what the simulator's `subscriptionState` says
///   of its newest token (active and cancelled: subscribed until the same expiry; grace: served; hold: billing retry, not
///   served; paused: not served; expired; revoked when its latest order was refunded);
/// - `unacknowledged-refunded`: a purchase Kakin never acknowledged is voided by Play after 3 days;
/// - `unfinished-within-window`: no purchase waits on the phone more than 3 days for Kakin;
/// - `play-notifications-applied`: no stored RTDN ended dead.
extension World {
    /// The customer's Play orders and subscriptions; returns the chains' summary for the evening's trace line.
    func checkPlay(_ c: SimCustomer, ledger l: CustomerLedger, status: [SubscriptionStatus]) async throws -> [String] {
        for token in playModel.tokensOf[c.index] ?? [] {
            guard let p = playModel.purchases[token], let product = PlaySimulatorConfiguration.demoKakinCatalog[p.productId],
                  product.kind == .consumable else { continue }
            let bought = l.count(.purchase, p.orderId), refunded = l.count(.refund, p.orderId)
            let voided = playModel.voidedUnits[p.orderId] ?? 0
            let detail = "\(c.id): Play order \(p.orderId) (\(p.productId) x\(p.quantity), \(voided) unit(s) voided) has \(bought) credit(s), \(refunded) refund(s)"
            guard bought <= 1 else { throw fail("credited-once", detail) }
            if voided >= p.quantity {
                guard bought == refunded else { throw fail("refund-taken-back", detail) }
            } else if voided > 0 {
                guard bought == 1, refunded >= 1 else { throw fail("refund-taken-back", detail) }
            } else {
                guard bought == 1, refunded == 0 else { throw fail("credited-once", detail) }
                if let e = l.entries.first(where: { $0.kind == LedgerEntryKind.purchase.rawValue && $0.reference == p.orderId }),
                   e.paid != Int64(product.coins * p.quantity) || e.free != Int64(product.bonusCoins * p.quantity) {
                    throw fail("credited-once", "\(detail): credited \(e.paid)/\(e.free)")
                }
            }
        }
        var summary: [String] = []
        for chain in playModel.chains[c.index] ?? [] {
            let read = await playAPI("purchases/subscriptionsv2/tokens/\(chain.token)")
            guard read.status == 200, let json = read.json, let truth = try? SubscriptionPurchaseV2(json: json) else {
                summary.append("\(chain.id):unreadable(\(read.status))")
                continue
            }
            let item = truth.lineItems.first
            let latest = item?.latestSuccessfulOrderId ?? chain.id
            let expected: SubscriptionState
            switch truth.subscriptionState {
            case _ where playModel.isVoidedWhole(latest, quantity: 1): expected = .revoked
            case .active, .canceled: expected = .subscribed
            case .inGracePeriod: expected = .inGracePeriod
            case .onHold: expected = .inBillingRetryPeriod
            default: expected = .expired
            }
            let mine = status.first { $0.originalTransactionId == chain.id }
            let said = "the simulator says \(truth.subscriptionState.rawValue) until \(item?.expiryTimeMs.map(Timestamp.rfc3339) ?? "-") (order \(latest))"
            guard let mine else { throw fail("status-equals-truth", "\(c.id): Kakin shows no Play subscription \(chain.id); \(said)") }
            let datesMatter = expected == .subscribed || expected == .inGracePeriod
            guard mine.state == expected, !datesMatter || mine.expiresAtMs == item?.expiryTimeMs else {
                throw fail("status-equals-truth", "\(c.id) Play subscription \(chain.id): Kakin says \(mine.state.rawValue) until \(mine.expiresAtMs.map(Timestamp.rfc3339) ?? "-"); \(said)")
            }
            summary.append("\(chain.id):\(truth.subscriptionState.rawValue)")
        }
        if let oldest = playModel.unsent[c.index]?.min(by: { $0.sinceMs < $1.sinceMs }), clock.nowMs() - oldest.sinceMs > Self.unfinishedWindowMs {
            throw fail("unfinished-within-window", "\(c.id): Play purchase \(oldest.token.prefix(12))… unsent since \(Timestamp.rfc3339(oldest.sinceMs))")
        }
        return summary
    }

    /// Purchases past Play's 3 days: acknowledged by Kakin, or refunded by Play (or voided or ended before). And no RTDN dead.
    func checkPlayAcknowledgements() async throws {
        let now = clock.nowMs()
        let due = playModel.acknowledgementChecks.prefix { $0.dueMs <= now }
        playModel.acknowledgementChecks.removeFirst(due.count)
        for (_, token) in due {
            guard let p = playModel.purchases[token] else { continue }
            let read = await playAPI(p.subscription ? "purchases/subscriptionsv2/tokens/\(token)" : "purchases/productsv2/tokens/\(token)")
            guard read.status == 200, let json = read.json else { continue }
            let acknowledged = json["acknowledgementState"]?.stringValue == PlayAcknowledgementState.acknowledged.rawValue
            let ended = json["subscriptionState"]?.stringValue == PlaySubscriptionState.expired.rawValue
            guard acknowledged || (playModel.voidedUnits[p.orderId] ?? 0) > 0 || ended else {
                throw fail("unacknowledged-refunded", "c\(p.customer + 1): Play order \(p.orderId) (\(p.productId)) not acknowledged after 3 days and not refunded")
            }
        }
        let dead = (try await services.store.playNotificationCounts())["dead"] ?? 0
        guard dead == 0 else { throw fail("play-notifications-applied", "\(dead) Play notification(s) dead") }
    }
}
