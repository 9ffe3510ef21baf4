import KakinCore
import KakinService
import KakinStorage

/// One labelled value shown with a hit or a timeline entry.
public struct Fact: Sendable, Hashable {
    public var label: String
    public var value: String
    public init(_ label: String, _ value: String) {
        self.label = label
        self.value = value
    }
}

/// Something the search box found.
public struct SearchHit: Sendable, Hashable {
    public enum Kind: String, Sendable {
        case customer, transaction, order, error, notification, appStore
    }

    public var kind: Kind
    public var title: String
    public var customerId: String?
    /// Where on the customer's page (an element ID), if the hit is one thing there.
    public var anchor: String?
    public var facts: [Fact]
    public var json: JSONValue
}

public struct SearchOutcome: Sendable {
    public var query: String
    public var hits: [SearchHit]
    /// Lookups that could not run (the App Store unreachable, not configured…), one sentence each.
    public var notes: [String]

    public var json: JSONValue {
        ["query": .string(query), "hits": .array(hits.map { h in
            ["kind": .string(h.kind.rawValue), "title": .string(h.title), "customerId": .string(h.customerId), "detail": h.json]
        }), "notes": .array(notes.map(JSONValue.string))]
    }

    /// The customers the hits lead to, in order of first appearance.
    public var customers: [String] {
        var seen = Set<String>()
        return hits.compactMap(\.customerId).filter { seen.insert($0).inserted }
    }
}

extension SupportDesk {
    /// Runs every lookup the query's shape allows and gathers the hits.
    public func search(_ query: String) async -> SearchOutcome {
        try? await errors.flush()
        var hits: [SearchHit] = []
        var notes: [String] = []
        let targets = SearchQuery.targets(query)
        if targets.isEmpty, !query.isEmpty { notes.append("Search for at most \(SearchQuery.lengthMax) characters.") }
        for target in targets {
            do {
                hits += try await lookUp(target, notes: &notes)
            } catch {
                notes.append("\(Self.describe(target)): \(error.message) (\(error.kind.id))")
            }
        }
        hits = await followErrors(hits)
        var seen = Set<String>()
        hits = hits.filter { seen.insert("\($0.kind.rawValue)|\($0.title)|\($0.customerId ?? "")").inserted }
        return SearchOutcome(query: query, hits: Array(hits.prefix(Limits.searchHitsMax)), notes: notes)
    }

    /// An error names the customer of the request's path and the transaction the app sent: show that
    /// transaction (and so its real owner) too, and don't link to a customer that was never created.
    func followErrors(_ hits: [SearchHit]) async -> [SearchHit] {
        var out: [SearchHit] = []
        for var hit in hits {
            guard hit.kind == .error else {
                out.append(hit)
                continue
            }
            if let c = hit.customerId, (try? await store.customer(c)) == nil {
                hit.customerId = nil
                hit.facts = hit.facts.map { $0.label == "customer" ? Fact("customer", "\(c) (no such customer: nothing was created)") : $0 }
            }
            out.append(hit)
            if let tx = hit.json["transactionId"]?.stringValue, let stored = try? await store.transactions(matching: tx, limit: 5) {
                out += stored.filter { $0.transactionId == tx }.map(Self.hit)
            }
        }
        return out
    }

    static func describe(_ target: SearchTarget) -> String {
        switch target {
        case .errorId(let id, _): return "Error \(id)"
        case .requestId(let r): return "Request \(r)"
        case .appAccountToken: return "appAccountToken"
        case .notificationUUID: return "Notification"
        case .transactionId(let t): return "Transaction \(t)"
        case .orderId(let o): return "Order \(o)"
        case .customerId: return "Customer"
        case .purchaseProcessId: return "Purchase process"
        case .playPurchase(let p): return "Google Play \(p.hasPrefix("GPA.") ? "order \(p)" : "purchase token")"
        }
    }

    func lookUp(_ target: SearchTarget, notes: inout [String]) async throws(KakinError) -> [SearchHit] {
        let limit = Limits.searchHitsMax
        switch target {
        case .errorId(let id, let requestId):
            let found: [RecentError]
            if let requestId {
                let forRequest = try await store.recentErrors(requestId: requestId)
                found = forRequest.filter { $0.errorId == id }
                if found.isEmpty, !forRequest.isEmpty { notes.append("Request \(requestId) answered other errors:") }
                return (found.isEmpty ? forRequest : found).map(Self.hit)
            }
            found = try await store.recentErrors(where: .errorId, equals: id, limit: limit)
            if found.isEmpty { notes.append("No recent \(id) errors are kept (30 days, at most \(RecentErrorLog.rowsMax)).") }
            return found.map(Self.hit)
        case .requestId(let r):
            let found = try await store.recentErrors(requestId: r)
            if found.isEmpty { notes.append("No error was answered to request \(r) in the last 30 days (a request that succeeded is not kept).") }
            return found.map(Self.hit)
        case .appAccountToken(let token):
            guard let c = try await store.customer(appAccountToken: token) else { return [] }
            return [try await customerHit(c, via: "appAccountToken")]
        case .notificationUUID(let uuid):
            guard let n = try await store.notification(uuid) else { return [] }
            return [Self.hit(n)]
        case .transactionId(let id):
            var hits = try await store.transactions(matching: id, limit: limit).map(Self.hit)
            hits += try await store.recentErrors(where: .transactionId, equals: id, limit: limit).map(Self.hit)
            if hits.isEmpty {
                do {
                    let tx = try await services.appStoreSync.fetchTransaction(id)
                    hits.append(try await appStoreHit(tx, title: "Known to the App Store, not to Kakin"))
                } catch where error.kind == .transactionNotFound {
                    notes.append("The App Store does not know transaction \(id) either.")
                } catch {
                    notes.append("Transaction \(id) is not stored; asking the App Store failed: \(error.message) (\(error.kind.id))")
                }
            }
            return hits
        case .orderId(let order):
            let transactions = try await services.appStoreSync.lookUpOrder(order)
            if transactions.isEmpty { notes.append("The App Store knows no purchase with order ID \(order).") }
            var hits: [SearchHit] = []
            for tx in transactions {
                let stored = try await store.transactions(matching: tx.payload.transactionId, limit: 1).first
                hits.append(try await orderHit(order, tx, stored: stored))
            }
            return hits
        case .customerId(let id):
            guard let c = try await store.customer(id) else { return [] }
            return [try await customerHit(c, via: "customer ID")]
        case .purchaseProcessId(let p):
            var hits = try await store.transactions(purchaseProcessId: p, limit: limit).map(Self.hit)
            hits += try await store.recentErrors(where: .purchaseProcessId, equals: p, limit: limit).map(Self.hit)
            return hits
        case .playPurchase(let key):
            guard let chainId = try await store.playChainId(orderIdOrToken: key) else {
                if key.hasPrefix("GPA.") { notes.append("Kakin never read Play order \(key): the app never presented it and no notification named it.") }
                return []
            }
            return [try await playChainHit(chainId, matched: key)]
        }
    }

    /// A Play chain found by one of its orders or tokens: its orders, tokens and refunds, linking to its customer's page.
    func playChainHit(_ chainId: String, matched key: String) async throws(KakinError) -> SearchHit {
        let json = try await playChainJSON(chainId, orderId: key)
        let items = json["transactions"]?.arrayValue ?? []
        let orders = items.compactMap { $0["transaction"]?["orderId"]?.stringValue }
        var tokens: [String] = []
        for t in items.compactMap({ $0["transaction"]?["purchaseToken"]?.stringValue }) where !tokens.contains(t) { tokens.append(t) }
        let refunded = items.filter { $0["revocation"].map { !$0.isNull } ?? false }.compactMap { $0["transaction"]?["orderId"]?.stringValue }
        let customer = json["customerId"]?.stringValue
        var facts = [Fact("store", "Google Play"), Fact("orders", orders.joined(separator: ", ")), Fact("purchase tokens", String(tokens.count))]
        if !refunded.isEmpty { facts.append(Fact("refunded", refunded.joined(separator: ", "))) }
        facts.append(Fact("customer", customer ?? "nobody has claimed it yet"))
        return SearchHit(kind: .order, title: "Google Play chain \(chainId)", customerId: customer, anchor: "play-\(chainId)", facts: facts, json: json)
    }

    func customerHit(_ c: KakinStore.Customer, via: String) async throws(KakinError) -> SearchHit {
        let wallet = try await store.wallet(c.customerId)
        return SearchHit(kind: .customer, title: "Customer \(c.customerId)", customerId: c.customerId, anchor: nil,
                         facts: [Fact("matched", via), Fact("appAccountToken", c.appAccountToken),
                                 Fact("created", Timestamp.rfc3339(c.createdAtMs)),
                                 Fact("wallet", "paid \(wallet.paid) · free \(wallet.free)")],
                         json: ["customerId": .string(c.customerId), "appAccountToken": .string(c.appAccountToken), "wallet": wallet.json])
    }

    static func hit(_ t: StoredTransaction) -> SearchHit {
        var facts = [Fact("product", t.productId), Fact("type", t.productType), Fact("original transaction", t.originalTransactionId),
                     Fact("purchased", Timestamp.rfc3339(t.purchaseDateMs))]
        if let e = t.expiresDateMs { facts.append(Fact("expires", Timestamp.rfc3339(e))) }
        if let r = t.revocationDateMs { facts.append(Fact("refunded / revoked", Timestamp.rfc3339(r))) }
        facts.append(Fact("customer", t.customerId ?? "nobody has claimed it yet"))
        if let a = t.appliedAtMs { facts.append(Fact("applied", "\(Timestamp.rfc3339(a)) via \(t.appliedVia ?? "?")")) }
        if let p = t.purchaseProcessId { facts.append(Fact("purchase process", p)) }
        facts.append(Fact("environment", t.environment))
        return SearchHit(kind: .transaction, title: "Transaction \(t.transactionId)", customerId: t.customerId, anchor: "tx-\(t.transactionId)",
                         facts: facts, json: transactionJSON(t))
    }

    static func transactionJSON(_ t: StoredTransaction) -> JSONValue {
        ["transactionId": .string(t.transactionId), "originalTransactionId": .string(t.originalTransactionId),
         "bundleId": .string(t.bundleId), "productId": .string(t.productId), "type": .string(t.productType),
         "environment": .string(t.environment), "purchaseDate": .string(Timestamp.rfc3339(t.purchaseDateMs)),
         "expiresDate": Timestamp.rfc3339(t.expiresDateMs), "revocationDate": Timestamp.rfc3339(t.revocationDateMs),
         "customerId": .string(t.customerId), "appliedAt": Timestamp.rfc3339(t.appliedAtMs), "appliedVia": .string(t.appliedVia),
         "purchaseProcessId": .string(t.purchaseProcessId)]
    }

    static func hit(_ e: RecentError) -> SearchHit {
        var facts = [Fact("request", e.requestId), Fact("when", Timestamp.rfc3339(e.atMs)),
                     Fact("answer", "HTTP \(e.httpStatus) to \(e.method) \(e.path)"), Fact("message", e.message)]
        if let c = e.customerId { facts.append(Fact("customer", c)) }
        if let p = e.purchaseProcessId { facts.append(Fact("purchase process", p)) }
        if let t = e.transactionId { facts.append(Fact("transaction (as the app sent it)", t)) }
        if let d = e.detail { facts.append(Fact("detail", d)) }
        return SearchHit(kind: .error, title: "\(e.errorId) \(e.code)", customerId: e.customerId, anchor: "err-\(e.errorKey)",
                         facts: facts, json: e.json)
    }

    static func hit(_ n: StoredNotification) -> SearchHit {
        var facts = [Fact("type", n.notificationType + (n.subtype.map { " / \($0)" } ?? "")), Fact("state", n.state.rawValue),
                     Fact("signed", Timestamp.rfc3339(n.signedDateMs)), Fact("received", Timestamp.rfc3339(n.receivedAtMs)),
                     Fact("attempts", String(n.attempts))]
        if let e = n.lastError { facts.append(Fact("last error", e)) }
        if let o = n.originalTransactionId { facts.append(Fact("original transaction", o)) }
        return SearchHit(kind: .notification, title: "Notification \(n.notificationUUID)", customerId: n.customerId,
                         anchor: "n-\(n.notificationUUID)", facts: facts, json: notificationJSON(n))
    }

    func appStoreHit(_ tx: VerifiedTransaction, title: String) async throws(KakinError) -> SearchHit {
        let p = tx.payload
        var owner: String?
        if let token = p.appAccountToken { owner = try await store.customer(appAccountToken: token)?.customerId }
        var facts = [Fact("transaction", p.transactionId), Fact("product", p.productId),
                     Fact("purchased", Timestamp.rfc3339(p.purchaseDate)), Fact("environment", p.environment.rawValue)]
        if let token = p.appAccountToken { facts.append(Fact("appAccountToken", token)) }
        facts.append(Fact("customer", owner ?? "no customer has its appAccountToken"))
        return SearchHit(kind: .appStore, title: title, customerId: owner, anchor: nil, facts: facts, json: p.raw)
    }

    func orderHit(_ order: String, _ tx: VerifiedTransaction, stored: StoredTransaction?) async throws(KakinError) -> SearchHit {
        let p = tx.payload
        var owner = stored?.customerId
        if owner == nil, let token = p.appAccountToken { owner = try await store.customer(appAccountToken: token)?.customerId }
        var facts = [Fact("transaction", p.transactionId), Fact("product", p.productId),
                     Fact("purchased", Timestamp.rfc3339(p.purchaseDate))]
        if let price = p.price, let currency = p.currency { facts.append(Fact("price", "\(UnusedBalanceLine.decimal(price)) \(currency)")) }
        if let r = p.revocationDate { facts.append(Fact("refunded / revoked", Timestamp.rfc3339(r))) }
        facts.append(Fact("customer", owner ?? "no customer (yet)"))
        if let stored {
            facts.append(Fact("in Kakin", stored.appliedAtMs.map { "applied \(Timestamp.rfc3339($0)) via \(stored.appliedVia ?? "?")" }
                                ?? "stored, not applied"))
        } else {
            facts.append(Fact("in Kakin", "never seen: the app never presented it and no notification carried it"))
        }
        return SearchHit(kind: .order, title: "Order \(order) · transaction \(p.transactionId)", customerId: owner,
                         anchor: "tx-\(p.transactionId)", facts: facts,
                         json: ["transaction": p.raw, "customerId": .string(owner), "stored": .bool(stored != nil),
                                "appliedAt": Timestamp.rfc3339(stored?.appliedAtMs)])
    }

    static func notificationJSON(_ n: StoredNotification) -> JSONValue {
        var o: [String: JSONValue] = [
            "notificationUUID": .string(n.notificationUUID), "notificationType": .string(n.notificationType), "subtype": .string(n.subtype),
            "state": .string(n.state.rawValue), "signedDate": .string(Timestamp.rfc3339(n.signedDateMs)),
            "receivedAt": .string(Timestamp.rfc3339(n.receivedAtMs)), "source": .string(n.source), "attempts": .int(Int64(n.attempts)),
            "lastError": .string(n.lastError), "appliedAt": Timestamp.rfc3339(n.appliedAtMs), "customerId": .string(n.customerId),
            "originalTransactionId": .string(n.originalTransactionId), "environment": .string(n.environment), "bundleId": .string(n.bundleId),
        ]
        if n.state == .retrying { o["nextAttemptAt"] = .string(Timestamp.rfc3339(n.nextAttemptMs)) }
        if let tx = NotificationContent(jws: n.jws).transaction {
            o["transactionId"] = .string(tx.transactionId)
            o["productId"] = .string(tx.productId)
        }
        return .object(o)
    }
}

/// What a stored notification carries, decoded for display (it was verified when it was stored; the nested
/// transaction is shown as signed, whether or not it could be applied).
struct NotificationContent {
    var payload: NotificationPayload?
    var transaction: TransactionPayload?
    var renewalInfo: RenewalInfoPayload?

    init(jws: String) {
        guard !jws.isEmpty, let json = StoredJWS.payload(jws), let p = try? NotificationPayload(json: json) else { return }
        payload = p
        if let t = p.data?.signedTransactionInfo, let j = StoredJWS.payload(t) { transaction = try? TransactionPayload(json: j) }
        if let r = p.data?.signedRenewalInfo, let j = StoredJWS.payload(r) { renewalInfo = try? RenewalInfoPayload(json: j) }
    }
}
