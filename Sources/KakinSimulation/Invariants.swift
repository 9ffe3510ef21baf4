import AppStoreSimulator
import KakinAdmin
import KakinCore
import KakinService
import KakinStorage

/// The invariants. After every step, for the customers it touched: every balance equals its ledger, and no
/// transaction is credited twice. Every evening, once notifications, retries and webhooks have drained, for every
/// customer touched that day: every charge is credited exactly once (and a refund takes it back once), each
/// subscription's status equals the App Store's truth, no unfinished transaction outlived the retry window; the
/// events the webhook receiver acknowledged came once per id and in sequence per customer; weekly, the
/// unused-balance report equals the sum of the customers' ledgers.
extension World {
    struct CustomerLedger {
        var balance: WalletBalance
        var entries: [LedgerEntry]

        func count(_ kind: LedgerEntryKind, _ reference: String) -> Int {
            entries.filter { $0.kind == kind.rawValue && $0.reference == reference }.count
        }
    }

    func ledger(of c: SimCustomer) async throws -> CustomerLedger {
        let balance = try await services.wallets.balance(c.id)
        var entries: [LedgerEntry] = []
        var cursor: String?
        repeat {
            let page = try await services.wallets.ledger(customerId: c.id, limit: 500, cursor: cursor)
            entries += page.entries
            cursor = page.nextCursor
        } while cursor != nil && entries.count < 100_000
        return CustomerLedger(balance: balance, entries: entries)
    }

    /// After every step: the touched customers' balances equal their ledgers, and nothing is credited twice.
    func checkTouched() async throws {
        let touched = model.state.withLock { s in defer { s.touched = [] }; return s.touched }
        dirtyToday.formUnion(touched)
        for i in touched.sorted() {
            let c = customers[i]
            let l: CustomerLedger
            do {
                l = try await ledger(of: c)
            } catch {
                // A read cannot fail on a full disk; anything else is a finding.
                throw fail("readable", "\(c.id)'s wallet unreadable: \(error)")
            }
            let paid = l.entries.reduce(Int64(0)) { $0 + $1.paid }, free = l.entries.reduce(Int64(0)) { $0 + $1.free }
            guard paid == l.balance.paid, free == l.balance.free else {
                throw fail("balance-equals-ledger", "\(c.id) balance \(l.balance.paid)/\(l.balance.free), ledger sums \(paid)/\(free)")
            }
            if let newest = l.entries.first, newest.balanceAfter != l.balance {
                throw fail("balance-equals-ledger", "\(c.id) balance \(l.balance.paid)/\(l.balance.free), newest entry says \(newest.balanceAfter.paid)/\(newest.balanceAfter.free)")
            }
            var purchases: [String: Int] = [:]
            for e in l.entries where e.kind == LedgerEntryKind.purchase.rawValue { purchases[e.reference, default: 0] += 1 }
            if let twice = purchases.first(where: { $0.value > 1 }) {
                throw fail("credited-once", "\(c.id): transaction \(twice.key) credited \(twice.value) times")
            }
        }
    }

    /// The evening's checks, for every customer touched today.
    func checkDay(dayStart: Int64) async throws {
        try await checkTouched()
        let now = clock.nowMs()
        for i in dirtyToday.sorted() {
            let c = customers[i]
            let l = try await ledger(of: c)
            // Every charge credited exactly once; a refund takes it back once, its reversal gives it again.
            let charges = model.state.withLock { s in (s.chargesOf[i] ?? []).compactMap { id in s.charges[id].map { (id, $0) } } }
            for (tid, charge) in charges where charge.kind == .consumable {
                let bought = l.count(.purchase, tid), refunded = l.count(.refund, tid), reversed = l.count(.refundReversed, tid)
                let net = bought - refunded + reversed
                let expected = charge.refunded ? 0 : 1
                guard net == expected, bought <= 1 else {
                    throw fail(charge.refunded ? "refund-taken-back" : "credited-once",
                               "\(c.id): transaction \(tid) (\(charge.productId)\(charge.refunded ? ", refunded" : "")\(charge.reversed ? ", refund reversed" : "")) has \(bought) credit(s), \(refunded) refund(s), \(reversed) reversal(s)")
                }
                if bought == 1, let product = catalog[charge.productId],
                   let entry = l.entries.first(where: { $0.kind == LedgerEntryKind.purchase.rawValue && $0.reference == tid }),
                   entry.paid != Int64(product.coins * charge.quantity) || entry.free != Int64(product.bonusCoins * charge.quantity) {
                    throw fail("credited-once", "\(c.id): transaction \(tid) credited \(entry.paid)/\(entry.free), the product grants \(product.coins * charge.quantity)/\(product.bonusCoins * charge.quantity)")
                }
            }
            // Each subscription's status equals the App Store's truth.
            let evaluated = try await services.statusReads.status(c.id)
            let otids = model.state.withLock { $0.subscriptions[i] ?? [] }
            var summary: [String] = []
            for otid in otids {
                let truth = await control("GET", "/simulator/v1/subscriptions/\(otid)", .null)
                guard truth.ok, let t = truth.json else { continue }
                let mine = evaluated.status.subscriptions.first { $0.originalTransactionId == otid }
                let state = t["state"]?.stringValue ?? "?", product = t["productId"]?.stringValue ?? "?"
                let expires = t["expiresDateMs"]?.int64Value
                guard let mine else {
                    let linked = try? await services.store.transaction { r in try r.linkOwner(originalTransactionId: otid) }
                    let tx = t["signedTransaction"]?.stringValue.flatMap(StoredJWS.payload)
                    let ownership = tx?["inAppOwnershipType"]?.stringValue ?? "?"
                    let token = tx?["appAccountToken"]?.stringValue.map { tok in model.state.withLock { s in s.customerOfToken[tok].map { "c\($0 + 1)" } ?? tok } } ?? "none"
                    throw fail("status-equals-truth", "\(c.id): Kakin shows no subscription \(otid) (\(ownership), token of \(token), Kakin links it to \((linked ?? nil) ?? "nobody")); the App Store says \(state) \(product)")
                }
                // A revoked subscription's access ends at the revocation (Kakin's expiresAt); the App Store keeps the period's end.
                guard mine.state.rawValue == state, mine.productId == product, mine.state == .revoked || mine.expiresAtMs == expires else {
                    throw fail("status-equals-truth", "\(c.id) subscription \(otid): Kakin says \(mine.state.rawValue) \(mine.productId) until \(mine.expiresAtMs.map(Timestamp.rfc3339) ?? "-"), the App Store says \(state) \(product) until \(expires.map(Timestamp.rfc3339) ?? "-")")
                }
                // The current period's offer (in a grace period the offer's period is over: no offer applies).
                if mine.state == .subscribed, let jws = t["signedTransaction"]?.stringValue, let tx = StoredJWS.payload(jws) {
                    let truthOffer = tx["offerIdentifier"]?.stringValue ?? (tx["offerType"] != nil ? "introductory" : "none")
                    let kakinOffer = mine.offer.map { $0.id ?? "introductory" } ?? "none"
                    guard truthOffer == kakinOffer else {
                        throw fail("status-equals-truth", "\(c.id) subscription \(otid): Kakin says offer \(kakinOffer), the App Store's current period has \(truthOffer)")
                    }
                    // The offer waiting for the next renewal.
                    let truthNext = t["nextRenewalOffer"]?["offerIdentifier"]?.stringValue ?? (t["nextRenewalOffer"] != nil ? "introductory" : "none")
                    let kakinNext = mine.pendingOffer.map { $0.id ?? "introductory" } ?? "none"
                    guard truthNext == kakinNext else {
                        throw fail("status-equals-truth", "\(c.id) subscription \(otid): Kakin says the next renewal's offer is \(kakinNext), the App Store says \(truthNext)")
                    }
                }
                summary.append("\(otid):\(state):\(product)")
            }
            if c.isPlay { summary += try await checkPlay(c, ledger: l, status: evaluated.status.subscriptions) }
            // No unfinished transaction outlives the retry window.
            if let oldest = await c.device.oldestUnfinished(), now - oldest.sinceMs > Self.unfinishedWindowMs {
                throw fail("unfinished-within-window", "\(c.id): transaction \(oldest.id) unfinished since \(Timestamp.rfc3339(oldest.sinceMs))")
            }
            trace("evening \(c.id) wallet \(l.balance.paid)/\(l.balance.free) entries \(l.entries.count) subs \(summary.joined(separator: " ")) unfinished \(await c.device.unfinishedCount)")
        }
        try await checkPlayAcknowledgements()
        dirtyToday = []
        let day = Int((dayStart - startMs) / Self.dayMs)
        if day % 7 == 6 || day == options.days - 1 { try await checkUnusedBalance() }
    }

    /// The unused-balance report (the support desk's) equals the sum of every customer's paid balance at the cutoff (a
    /// negative balance, debt, counting zero), read from their ledgers.
    func checkUnusedBalance() async throws {
        let asOf = String(Timestamp.rfc3339(clock.nowMs() - Self.dayMs).prefix(10))
        guard let cutoff = ReportingDay.endMs(of: asOf, timeZone: "UTC") else { return }
        var reportedBy: [String: Int64] = [:]
        let report = try await desk.unusedBalance(asOf: asOf) { reportedBy[$0.customerId, default: 0] += $0.unusedPaidCoins }
        let reported = report.totals.reduce(Int64(0)) { $0 + $1.unusedPaidCoins }
        var expected: Int64 = 0
        var differing: [String] = []
        for c in customers {
            let l = try await ledger(of: c)
            // Debt (a refund of coins already spent) holds no unused coins.
            let held = max(0, l.entries.first { $0.atMs < cutoff }?.balanceAfter.paid ?? 0)
            expected += held
            if held != reportedBy[c.id] ?? 0, differing.count < 3 {
                let recent = l.entries.prefix(6).map { "\($0.kind) \($0.reference) \($0.paid) \($0.source ?? "-") \(Timestamp.rfc3339($0.atMs))" }
                differing.append("\(c.id) reported \(reportedBy[c.id] ?? 0), ledger \(held): \(recent.joined(separator: ", "))")
            }
        }
        guard reported == expected else {
            throw fail("unused-balance-report", "report as of \(asOf): \(reported) unused paid coins; the customers' ledgers hold \(expected) (\(differing.joined(separator: "; ")))")
        }
        trace("unused-balance \(asOf) \(reported)")
    }

    /// Events the receiver acknowledged: once per id, in sequence per customer.
    func checkEvents(_ acknowledged: [WorldWebhookReceiver.Received]) throws {
        for e in acknowledged {
            guard acknowledgedIds.insert(e.eventId).inserted else {
                throw fail("events-once", "event \(e.eventId) (\(e.customerId) #\(e.sequence)) acknowledged twice")
            }
            let last = lastSequence[e.customerId] ?? 0
            guard e.sequence == last + 1 else {
                throw fail("events-in-order", "\(e.customerId): event #\(e.sequence) arrived after #\(last)")
            }
            lastSequence[e.customerId] = e.sequence
        }
    }
}
