import KakinCore
import KakinStorage

/// One line of a subscription's history, on Apple's clock (purchase dates, notifications' `signedDate`).
public struct HistoryEntry: Sendable, Hashable {
    public enum Tone: String, Sendable { case neutral, good, warn, bad }

    public var atMs: Int64
    public var title: String
    public var tone: Tone
    public var facts: [Fact]
    /// Element ID on the page (`tx-…`, `n-…`), for links from search hits.
    public var anchor: String?
    /// The signed payload as stored, and its decoded JSON (one click away on the page).
    public var jws: String?
    public var decoded: JSONValue?
    /// A notification that can be replayed.
    public var notificationUUID: String?
}

public struct SubscriptionView: Sendable {
    public var originalTransactionId: String
    public var productId: String
    /// The entry of the status the app sees (`GET /v1/customers/{id}` → `subscriptions[]`), if any.
    public var status: JSONValue?
    public var renewalInfo: JSONValue?
    public var renewalInfoJWS: String?
    public var history: [HistoryEntry]
}

public struct CustomerView: Sendable {
    public var customer: KakinStore.Customer
    public var status: JSONValue
    public var subscriptions: [SubscriptionView]
    /// Consumables, non-consumables and non-renewing passes, newest first.
    public var purchases: [HistoryEntry]
    /// Notifications about anything but a subscription (those are in its history), newest first.
    public var otherNotifications: [HistoryEntry]
    public var wallet: WalletBalance
    public var ledger: LedgerPage
    public var ledgerCursor: String?
    public var timeline: TimelinePage
    public var timelineCursor: String?
    /// Google Play chains the customer owns, newest read first: each chain's orders (first, renewals `..N`, a linked
    /// token's) with their tokens and refunds.
    public var playChains: [(chainId: String, orders: [PlayOrderRow])] = []
}

extension SupportDesk {
    /// Everything the customer page shows. Does not create the customer (the app's status call would).
    public func customerView(_ customerId: String, ledgerCursor: String?, timelineCursor: String?) async throws(KakinError) -> CustomerView {
        guard CustomerID.isValid(customerId), let customer = try await store.customer(customerId) else {
            throw KakinError(.customerNotFound)
        }
        var timelineAfter: TimelineCursor?
        if let timelineCursor {
            guard let c = TimelineCursor(token: timelineCursor) else { throw KakinError(.invalidCursor) }
            timelineAfter = c
        }
        let status = try await services.statusReads.status(customerId).json
        let transactions = try await store.transactions(customerId: customerId, limit: Limits.customerTransactionsMax)
        var subscriptions: [SubscriptionView] = []
        var purchases: [HistoryEntry] = []
        var chains: [String: [StoredTransaction]] = [:]
        var order: [String] = []
        for t in transactions {
            if t.productType == AppleProductType.autoRenewable.rawValue {
                if chains[t.originalTransactionId] == nil { order.append(t.originalTransactionId) }
                chains[t.originalTransactionId, default: []].append(t)
            } else {
                purchases.append(Self.entry(t))
            }
        }
        let statusEntries = status["subscriptions"]?.arrayValue ?? []
        for original in order {
            let chain = chains[original] ?? []
            var history = chain.prefix(Limits.subscriptionItemsMax).flatMap(Self.entries)
            let notifications = try await store.notifications(originalTransactionId: original, limit: Limits.subscriptionItemsMax)
            history += notifications.map(Self.entry)
            history.sort { ($0.atMs, $0.anchor ?? "") > ($1.atMs, $1.anchor ?? "") }
            let renewalJWS = try await store.renewalInfoJWS(originalTransactionId: original)
            subscriptions.append(SubscriptionView(
                originalTransactionId: original, productId: chain.first?.productId ?? "",
                status: statusEntries.first { $0["originalTransactionId"]?.stringValue == original },
                renewalInfo: renewalJWS.flatMap(StoredJWS.payload), renewalInfoJWS: renewalJWS, history: history))
        }
        let subscriptionIds = Set(order)
        let others = try await store.notifications(customerId: customerId, limit: Limits.subscriptionItemsMax)
            .filter { !subscriptionIds.contains($0.originalTransactionId ?? "") }.map(Self.entry)
        let ledger = try await store.ledger(customerId: customerId, limit: Limits.ledgerPage, cursor: ledgerCursor)
        let timeline = try await services.timeline.page(customerId: customerId, limit: Limits.timelinePage, after: timelineAfter)
        var view = CustomerView(customer: customer, status: status, subscriptions: subscriptions, purchases: purchases, otherNotifications: others,
                                wallet: try await store.wallet(customerId), ledger: ledger, ledgerCursor: ledgerCursor, timeline: timeline,
                                timelineCursor: timelineCursor)
        for chainId in try await store.playChains(customerId: customerId, limit: Limits.playChainsMax) {
            view.playChains.append((chainId, try await store.playChainOrders(chainId, limit: Limits.playChainOrdersMax)))
        }
        return view
    }

    /// A transaction as history: its purchase (or renewal, with its offer), and its refund if it has one.
    static func entries(_ t: StoredTransaction) -> [HistoryEntry] {
        var out = [entry(t)]
        if let revoked = t.revocationDateMs {
            let payload = StoredJWS.payload(t.jws).flatMap { try? TransactionPayload(json: $0) }
            var facts = [Fact("transaction", t.transactionId)]
            if let reason = payload?.revocationReason { facts.append(Fact("reason", reason == 1 ? "customer's complaint (1)" : "other (\(reason))")) }
            if let type = payload?.revocationType { facts.append(Fact("type", type.rawValue)) }
            out.append(HistoryEntry(atMs: revoked, title: payload?.revocationType?.rawValue == "FAMILY_REVOKE" ? "Family sharing revoked" : "Refunded",
                                    tone: .bad, facts: facts, anchor: nil, jws: nil, decoded: nil, notificationUUID: nil))
        }
        return out
    }

    static func entry(_ t: StoredTransaction) -> HistoryEntry {
        let decoded = StoredJWS.payload(t.jws)
        let p = decoded.flatMap { try? TransactionPayload(json: $0) }
        var title = p?.transactionReason == .renewal ? "Renewal" : "Purchase"
        if let offer = p?.offerType {
            title += " with \(offer.contractName) offer" + (p?.offerIdentifier.map { " \($0)" } ?? "")
            if let mode = p?.offerDiscountType?.rawValue { title += " (\(mode))" }
        }
        var facts = [Fact("product", t.productId), Fact("transaction", t.transactionId)]
        if t.originalTransactionId != t.transactionId { facts.append(Fact("original transaction", t.originalTransactionId)) }
        if let price = p?.price, let currency = p?.currency { facts.append(Fact("price", "\(UnusedBalanceLine.decimal(price)) \(currency)")) }
        if let q = p?.quantity, q > 1 { facts.append(Fact("quantity", String(q))) }
        if let e = t.expiresDateMs { facts.append(Fact("until", Timestamp.rfc3339(e))) }
        if p?.isUpgraded == true { facts.append(Fact("upgraded", "replaced by a higher plan")) }
        if let ownership = p?.inAppOwnershipType, ownership.rawValue != "PURCHASED" { facts.append(Fact("ownership", ownership.rawValue)) }
        if let a = t.appliedAtMs {
            facts.append(Fact("applied", "\(Timestamp.rfc3339(a)) via \(t.appliedVia ?? "?")"))
        } else {
            facts.append(Fact("applied", "not applied (stored only)"))
        }
        if let proc = t.purchaseProcessId { facts.append(Fact("purchase process", proc)) }
        return HistoryEntry(atMs: t.purchaseDateMs, title: title, tone: t.revocationDateMs == nil ? .good : .neutral, facts: facts,
                            anchor: "tx-\(t.transactionId)", jws: t.jws, decoded: decoded, notificationUUID: nil)
    }

    static func entry(_ n: StoredNotification) -> HistoryEntry {
        let content = NotificationContent(jws: n.jws)
        var facts = [Fact("received", "\(Timestamp.rfc3339(n.receivedAtMs)) (\(n.source))"), Fact("state", n.state.rawValue)]
        if let status = content.payload?.data?.status { facts.append(Fact("App Store status", Self.subscriptionStatusName(status))) }
        if let tx = content.transaction { facts.append(Fact("transaction", tx.transactionId)) }
        if let r = content.renewalInfo {
            facts.append(Fact("auto-renew", r.willAutoRenew ? "on" : "off"))
            if r.isInBillingRetryPeriod { facts.append(Fact("billing", "retrying")) }
            if let g = r.gracePeriodExpiresDate { facts.append(Fact("grace until", Timestamp.rfc3339(g))) }
        }
        if n.attempts > 1 || n.lastError != nil { facts.append(Fact("attempts", String(n.attempts))) }
        if let e = n.lastError { facts.append(Fact("last error", e)) }
        var decoded: [String: JSONValue] = ["notification": content.payload?.raw ?? .null]
        if let t = content.transaction { decoded["signedTransactionInfo"] = t.raw }
        if let r = content.renewalInfo { decoded["signedRenewalInfo"] = r.raw }
        let type = n.notificationType
        let tone: HistoryEntry.Tone
        switch (n.state, type) {
        case (.dead, _), (_, "REFUND"), (_, "REVOKE"), (_, "DID_FAIL_TO_RENEW"), (_, "EXPIRED"), (_, "GRACE_PERIOD_EXPIRED"): tone = .bad
        case (.retrying, _), (_, "DID_CHANGE_RENEWAL_STATUS"), (_, "PRICE_INCREASE"): tone = .warn
        case (_, "SUBSCRIBED"), (_, "DID_RENEW"), (_, "OFFER_REDEEMED"), (_, "REFUND_REVERSED"), (_, "RENEWAL_EXTENDED"): tone = .good
        default: tone = .neutral
        }
        return HistoryEntry(atMs: n.signedDateMs, title: type + (n.subtype.map { " · \($0)" } ?? ""), tone: tone, facts: facts,
                            anchor: "n-\(n.notificationUUID)", jws: n.jws.isEmpty ? nil : n.jws, decoded: .object(decoded),
                            notificationUUID: n.notificationUUID)
    }

    /// Apple's subscription status codes (the `status` of a notification's data).
    static func subscriptionStatusName(_ status: Int) -> String {
        switch status {
        case 1: return "active (1)"
        case 2: return "expired (2)"
        case 3: return "billing retry (3)"
        case 4: return "grace period (4)"
        case 5: return "revoked (5)"
        default: return String(status)
        }
    }
}
