import Foundation
import KakinKit

/// What `kakin app` prints: lines for people, or one JSON document with `--json`; and the exit status
/// (0 ok, 3 refused because an earlier purchase is unfinished, 1 other errors with the `KKN-…` ID printed).
struct Output: Sendable {
    let json: Bool

    static func line(_ s: String) {
        FileHandle.standardOutput.write(Data((s + "\n").utf8))
    }

    static func error(_ s: String) {
        FileHandle.standardError.write(Data((s + "\n").utf8))
    }

    func emit(_ lines: [String], _ object: [String: Any]) {
        if json {
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
            Self.line(String(decoding: data, as: UTF8.self))
        } else {
            for l in lines { Self.line(l) }
        }
    }

    // MARK: Outcomes

    func failure(_ e: KakinKitError) -> Int32 {
        emit(["error: " + Self.describe(e)], ["result": "failed", "error": Self.object(e)])
        return 1
    }

    func purchase(_ outcome: PurchaseOutcome) -> Int32 {
        switch outcome {
        case .completed(let c):
            let how = c.submission.httpStatus == 201 ? "credited (201)" : "already credited (409)"
            var lines = ["bought \(c.transaction.productID): transaction \(c.transaction.id) \(how), finished (\(c.processID))"]
            if let g = c.submission.grant { lines.append("  granted: " + Self.describe(g)) }
            var o: [String: Any] = ["result": "completed", "productId": c.transaction.productID, "transactionId": c.transaction.id,
                                    "processId": c.processID, "httpStatus": c.submission.httpStatus]
            if let g = c.submission.grant { o["grant"] = Self.encoded(g) }
            if let w = c.submission.customer?.wallet {
                lines.append("  wallet: " + Self.describe(w))
                o["wallet"] = Self.encoded(w)
            }
            emit(lines, o)
            return 0
        case .stillProcessing(let product, let unfinished, let e):
            let ids = unfinished.map(\.id)
            emit(["refused: \(Self.describe(e)) (\(product)" + (ids.isEmpty ? ")" : ": unfinished \(ids.joined(separator: ", ")))")],
                 ["result": "stillProcessing", "productId": product, "unfinished": ids, "error": Self.object(e)])
            return 3
        case .pending:
            emit(["pending: waiting for approval (Ask to Buy) or authentication; the result arrives as an update"], ["result": "pending"])
            return 0
        case .cancelled:
            emit(["cancelled"], ["result": "cancelled"])
            return 0
        case .unfinished(let t, let processID, let e):
            emit(["unfinished: \(Self.describe(e))",
                  "  transaction \(t.id) (\(t.productID)) is paid and stays unfinished on this device; it is retried at the next launch, foreground or wallet (\(processID))"],
                 ["result": "unfinished", "productId": t.productID, "transactionId": t.id, "processId": processID, "error": Self.object(e)])
            return 1
        case .failed(let e):
            return failure(e)
        }
    }

    func stopped(at point: AppCommand.FailPoint, _ t: StoreTransaction) {
        let when = point == .payment ? "after payment, before Kakin was called" : "after Kakin answered, before \(point == .acknowledge ? "the app was done" : "finish")"
        emit(["stopped \(when) (--fail-at \(point.rawValue)): transaction \(t.id) (\(t.productID)) stays unfinished on this device"],
             ["result": "stopped", "at": point.rawValue, "productId": t.productID, "transactionId": t.id])
    }

    func launch(_ r: LaunchReport) -> Int32 {
        var lines = r.retries.map(Self.describe)
        var o: [String: Any] = ["retries": r.retries.map(Self.object), "unfinished": r.stillUnfinished.map(Self.object)]
        var failed = r.retries.contains { !$0.isFinished }
        switch r.status {
        case .success(let s):
            lines += Self.describe(s)
            o["status"] = Self.encoded(s)
        case .failure(let e):
            lines.append("status: " + Self.describe(e))
            o["error"] = Self.object(e)
            failed = true
        }
        lines.append(Self.stillProcessing(r.stillUnfinished))
        emit(lines, o)
        return failed ? 1 : 0
    }

    func unfinished(_ ts: [StoreTransaction]) -> Int32 {
        emit(ts.isEmpty ? ["none"] : ts.map { "\($0.id) \($0.productID)" }, ["unfinished": ts.map(Self.object)])
        return 0
    }

    func restore(_ r: RestoreReport) -> Int32 {
        var lines = r.retries.map(Self.describe)
        if let e = r.syncError { lines.append("App Store sync: " + Self.describe(e)) }
        lines += Self.describe(r.status)
        var o: [String: Any] = ["retries": r.retries.map(Self.object), "status": Self.encoded(r.status)]
        if let e = r.syncError { o["syncError"] = Self.object(e) }
        emit(lines, o)
        return r.retries.allSatisfy(\.isFinished) ? 0 : 1
    }

    func status(_ s: CustomerStatus) -> Int32 {
        emit(Self.describe(s), Self.encoded(s) as? [String: Any] ?? [:])
        return 0
    }

    func wallet(_ r: WalletReport) -> Int32 {
        var o = Self.encoded(r.wallet) as? [String: Any] ?? [:]
        o["retries"] = r.retries.map(Self.object)
        emit(r.retries.map(Self.describe) + ["wallet: " + Self.describe(r.wallet)], o)
        return r.retries.allSatisfy(\.isFinished) ? 0 : 1
    }

    func offering(_ o: PaywallOffering) -> Int32 {
        let variant = o.experiment.map { " (experiment \($0.id), variant \($0.variant))" } ?? ""
        let lines = ["\(o.placement): offering \(o.offering.id)\(variant)"] + o.offering.packages.map { "  \($0.id): \($0.productId)" }
        emit(lines, Self.encoded(o) as? [String: Any] ?? [:])
        return 0
    }

    // MARK: Text

    static func describe(_ e: KakinKitError) -> String { "\(e.id) \(e.code): \(e.message)" }

    static func describe(_ w: Wallet) -> String { "\(w.total) coins (paid \(w.paid), free \(w.free))" }

    static func describe(_ g: Grant) -> String {
        if let c = g.coins { return "\(c.paid) paid + \(c.free) free coins" }
        if let e = g.entitlement { return "\(e.productId)" + (e.expiresAt.map { " until \($0)" } ?? "") }
        return "nothing"
    }

    static func describe(_ r: RetryOutcome) -> String {
        let head = "retry \(r.transaction.id) \(r.transaction.productID) (\(r.processID)): "
        switch r.result {
        case .credited: return head + "credited (201), finished"
        case .alreadyCredited: return head + "already credited (409), finished"
        case .revoked(let e): return head + "refunded or revoked, recorded, finished (\(e.id))"
        case .stillUnfinished(let e): return head + "still unfinished after \(r.attempts) attempt\(r.attempts == 1 ? "" : "s"): " + describe(e)
        }
    }

    static func stillProcessing(_ ts: [StoreTransaction]) -> String {
        ts.isEmpty ? "still processing: none"
            : "still processing: " + ts.map { "\($0.id) (\($0.productID))" }.joined(separator: ", ") + " — tell the user before they buy again"
    }

    static func describe(_ s: CustomerStatus) -> [String] {
        var lines = ["customer \(s.customerId): \(s.status)"]
        for sub in s.subscriptions {
            var l = "  subscription \(sub.productId)" + (sub.groupId.map { " (\($0))" } ?? "") + ": \(sub.state)"
            if let e = sub.expiresAt { l += " until \(e)" }
            if let r = sub.willAutoRenew { l += r ? ", renews" : ", does not renew" }
            if let p = sub.pendingOffer { l += ", \(p.type) offer \(p.id ?? "") pending for the next renewal" }
            if sub.hasBillingIssue { l += " — billing problem: ask to update the payment method" }
            if let winBack = sub.eligibleWinBackOfferIds, !winBack.isEmpty { l += ", win-back offers: " + winBack.joined(separator: ", ") }
            lines.append(l)
        }
        for n in s.nonConsumables { lines.append("  owns \(n.productId)") }
        for n in s.nonRenewing { lines.append("  pass \(n.productId): " + (n.active ? "active" : "ended") + (n.expiresAt.map { " until \($0)" } ?? "")) }
        lines.append("  wallet: " + describe(s.wallet))
        for (group, eligible) in (s.eligibility?.introductoryOffer ?? [:]).sorted(by: { $0.key < $1.key }) {
            lines.append("  introductory offer in \(group): " + (eligible ? "eligible" : "not eligible"))
        }
        return lines
    }

    // MARK: JSON

    static func object(_ e: KakinKitError) -> [String: Any] {
        var o: [String: Any] = ["id": e.id, "code": e.code, "message": e.message]
        if let r = e.requestId { o["requestId"] = r }
        return o
    }

    static func object(_ t: StoreTransaction) -> [String: Any] {
        ["transactionId": t.id, "originalTransactionId": t.originalID, "productId": t.productID]
    }

    static func object(_ r: RetryOutcome) -> [String: Any] {
        var o: [String: Any] = ["transactionId": r.transaction.id, "productId": r.transaction.productID, "processId": r.processID,
                                "trigger": r.trigger.rawValue, "attempts": r.attempts]
        switch r.result {
        case .credited: o["result"] = "credited"
        case .alreadyCredited: o["result"] = "alreadyCredited"
        case .revoked: o["result"] = "revoked"
        case .stillUnfinished: o["result"] = "stillUnfinished"
        }
        if let e = r.error { o["error"] = object(e) }
        return o
    }

    static func encoded<T: Encodable>(_ value: T) -> Any {
        guard let data = try? JSONEncoder().encode(value), let object = try? JSONSerialization.jsonObject(with: data) else { return NSNull() }
        return object
    }
}
