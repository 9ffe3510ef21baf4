import KakinCore
import KakinService
import KakinStorage

/// The JSON behind every page (`/v1/admin/…`), for support tools and scripts. The caller checks `admin` scope.
extension SupportDesk {
    /// `GET /v1/admin/customers/{id}/events?limit=&cursor=`: the customer's timeline, newest first.
    public func eventsJSON(customerId: String, limit: Int?, cursor: String?) async throws(KakinError) -> JSONValue {
        guard CustomerID.isValid(customerId) else { throw KakinError(.invalidCustomerID) }
        guard try await store.customer(customerId) != nil else { throw KakinError(.customerNotFound) }
        let n = try Self.pageSize(limit, default: Limits.timelinePage, max: Limits.timelinePageMax)
        var after: TimelineCursor?
        if let cursor {
            guard let c = TimelineCursor(token: cursor) else { throw KakinError(.invalidCursor) }
            after = c
        }
        try? await errors.flush()
        let page = try await services.timeline.page(customerId: customerId, limit: n, after: after)
        return ["customerId": .string(customerId), "events": .array(page.items.map(\.json)), "nextCursor": .string(page.nextCursor?.token)]
    }

    /// `GET /v1/admin/orders/{orderId}`: a Google Play order (`GPA.…`, a renewal `..N`) or purchase token Kakin read: its
    /// chain's orders (`playChainJSON`); else Apple's Look Up Order ID, each transaction with what Kakin knows of it, and
    /// the customer they belong to.
    public func orderJSON(orderId: String) async throws(KakinError) -> JSONValue {
        guard !orderId.isEmpty, orderId.utf8.count <= Limits.playPurchaseTokenBytesMax else {
            throw KakinError(.invalidField, "The order ID must be 1 to 64 characters (a Play purchase token up to \(Limits.playPurchaseTokenBytesMax)).")
        }
        if let chainId = try await store.playChainId(orderIdOrToken: orderId) { return try await playChainJSON(chainId, orderId: orderId) }
        if orderId.hasPrefix("GPA.") { throw KakinError(.orderNotFound, detail: "Play order \(orderId) was never read by Kakin") }
        guard orderId.utf8.count <= 64 else { throw KakinError(.orderNotFound, detail: "no Play purchase token \(orderId.prefix(12))…") }
        let transactions = try await services.appStoreSync.lookUpOrder(orderId)
        guard !transactions.isEmpty else { throw KakinError(.orderNotFound) }
        var items: [JSONValue] = []
        var customers: [String] = []
        for tx in transactions {
            let stored = try await store.transactions(matching: tx.payload.transactionId, limit: 1).first
            var owner = stored?.customerId
            if owner == nil, let token = tx.payload.appAccountToken { owner = try await store.customer(appAccountToken: token)?.customerId }
            if let owner, !customers.contains(owner) { customers.append(owner) }
            items.append(["transaction": tx.payload.raw, "customerId": .string(owner), "stored": .bool(stored != nil),
                          "appliedAt": Timestamp.rfc3339(stored?.appliedAtMs), "appliedVia": .string(stored?.appliedVia)])
        }
        return ["orderId": .string(orderId), "transactions": .array(items), "customerId": .string(customers.first),
                "customers": .array(customers.map(JSONValue.string))]
    }

    /// A Play chain as the order lookup answers it: `{"orderId", "store": "googlePlay", "chainId", "transactions": [{"transaction":
    /// {"store", "orderId", "purchaseToken"}, "customerId", "stored", "readAt", "revocation"}], "customerId", "customers"}`
    /// (the App Store's keys, so a tool reads both alike).
    func playChainJSON(_ chainId: String, orderId: String) async throws(KakinError) -> JSONValue {
        let orders = try await store.playChainOrders(chainId, limit: Limits.playChainOrdersMax)
        var customers: [String] = []
        for order in orders { if let c = order.customerId, !customers.contains(c) { customers.append(c) } }
        let items: [JSONValue] = orders.map { o in
            ["transaction": ["store": "googlePlay", "orderId": .string(o.orderId), "purchaseToken": .string(o.purchaseToken)],
             "customerId": .string(o.customerId), "stored": true, "readAt": Timestamp.rfc3339(o.readAtMs), "revocation": o.revocation ?? .null]
        }
        return ["orderId": .string(orderId), "store": "googlePlay", "chainId": .string(chainId), "transactions": .array(items), "customerId": .string(customers.first),
                "customers": .array(customers.map(JSONValue.string))]
    }

    /// `GET /v1/admin/notifications?state=received|retrying|applied|ignored|dead&limit=&cursor=`.
    public func notificationsJSON(state: String?, limit: Int?, cursor: String?) async throws(KakinError) -> JSONValue {
        let (inboxState, page, next) = try await notificationsPage(state: state, limit: limit, cursor: cursor)
        return ["state": .string(inboxState.rawValue), "notifications": .array(page.map(Self.notificationJSON)), "nextCursor": .string(next)]
    }

    func notificationsPage(state: String?, limit: Int?, cursor: String?) async throws(KakinError) -> (InboxState, [StoredNotification], String?) {
        guard let state, let inboxState = InboxState(rawValue: state) else {
            throw KakinError(.invalidField, "state must be one of \(InboxState.allCases.map(\.rawValue).joined(separator: ", ")).")
        }
        let n = try Self.pageSize(limit, default: Limits.notificationsPage, max: Limits.notificationsPageMax)
        var after: NotificationCursor?
        if let cursor {
            guard let c = NotificationCursor(token: cursor) else { throw KakinError(.invalidCursor) }
            after = c
        }
        let rows = try await store.notifications(in: inboxState, limit: n + 1, after: after)
        let page = Array(rows.prefix(n))
        let next = rows.count > n ? page.last.map { NotificationCursor(receivedAtMs: $0.receivedAtMs, notificationUUID: $0.notificationUUID).token } : nil
        return (inboxState, page, next)
    }

    /// `GET /v1/admin/errors/{requestId}`: what Kakin answered to that request (from any process).
    public func errorsJSON(requestId: String) async throws(KakinError) -> JSONValue {
        guard !requestId.isEmpty, requestId.utf8.count <= 128 else { throw KakinError(.invalidField, "The request ID must be 1 to 128 characters.") }
        try? await errors.flush()
        let found = try await store.recentErrors(requestId: requestId)
        guard let first = found.first else { throw KakinError(.requestNotFound) }
        return ["requestId": .string(requestId), "error": first.json, "errors": .array(found.map(\.json))]
    }

    /// Replays one notification now (its effects are idempotent) and lets the inbox run.
    public func replay(notificationUUID uuid: String, actor: String) async throws(KakinError) -> StoredNotification {
        guard !uuid.isEmpty, uuid.utf8.count <= 64 else { throw KakinError(.notificationNotFound) }
        return try await services.notifications.replay(uuid, actor: actor)
    }

    public func replayJSON(notificationUUID uuid: String, actor: String) async throws(KakinError) -> JSONValue {
        Self.notificationJSON(try await replay(notificationUUID: uuid, actor: actor))
    }

    static func pageSize(_ limit: Int?, default d: Int, max m: Int) throws(KakinError) -> Int {
        guard let limit else { return d }
        guard limit >= 1, limit <= m else { throw KakinError(.invalidField, "limit must be from 1 to \(m).") }
        return limit
    }
}
