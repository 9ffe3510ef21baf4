import KakinCore

/// A purchase token as Kakin last read it from the Developer API (`play_tokens`).
public struct PlayTokenRow: Sendable, Hashable {
    public enum Kind: String, Sendable {
        case subscription
        case product
    }

    public var purchaseToken: String
    public var packageName: String
    public var productId: String
    public var kind: Kind
    /// The chain it belongs to (its own first order, or the chain of the token it replaced).
    public var chainId: String
    public var linkedPurchaseToken: String?
    public var customerId: String?
    /// The newest read (a `SubscriptionPurchaseV2` or `ProductPurchaseV2`).
    public var resource: JSONValue
    public var readAtMs: Int64

    public init(purchaseToken: String, packageName: String, productId: String, kind: Kind, chainId: String, linkedPurchaseToken: String?,
                customerId: String?, resource: JSONValue, readAtMs: Int64) {
        self.purchaseToken = purchaseToken
        self.packageName = packageName
        self.productId = productId
        self.kind = kind
        self.chainId = chainId
        self.linkedPurchaseToken = linkedPurchaseToken
        self.customerId = customerId
        self.resource = resource
        self.readAtMs = readAtMs
    }
}

/// Google Play's rows in the one apply's write (migration 25): tokens and their chains, the newest read of each order
/// (the copy `IngestPlan` keeps), and the acknowledgements owed after the commit.
extension Records {
    public func playToken(_ purchaseToken: String) throws -> PlayTokenRow? {
        guard let row = try db.queryOne("""
            SELECT purchase_token, package_name, product_id, kind, chain_id, linked_purchase_token, customer_id, resource, read_at_ms
            FROM play_tokens WHERE purchase_token = ?
            """, [.text(purchaseToken)]) else { return nil }
        return PlayTokenRow(
            purchaseToken: purchaseToken, packageName: row.string("package_name") ?? "", productId: row.string("product_id") ?? "",
            kind: PlayTokenRow.Kind(rawValue: row.string("kind") ?? "") ?? .product, chainId: row.string("chain_id") ?? purchaseToken,
            linkedPurchaseToken: row.string("linked_purchase_token"), customerId: row.string("customer_id"),
            resource: (try? JSONParser.parse(row.string("resource") ?? "null")) ?? .null, readAtMs: row.int("read_at_ms") ?? 0)
    }

    /// Keeps a token's read when it is newer than the stored one (a later read wins; the chain and customer stay set).
    public func keepPlayToken(_ t: PlayTokenRow) throws {
        try db.execute("""
            INSERT INTO play_tokens (purchase_token, package_name, product_id, kind, chain_id, linked_purchase_token, customer_id, resource, read_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (purchase_token) DO UPDATE SET resource = excluded.resource, read_at_ms = excluded.read_at_ms,
                customer_id = COALESCE(play_tokens.customer_id, excluded.customer_id)
            WHERE excluded.read_at_ms >= play_tokens.read_at_ms
            """, [.text(t.purchaseToken), .text(t.packageName), .text(t.productId), .text(t.kind.rawValue), .text(t.chainId),
                  SQLValue(t.linkedPurchaseToken), SQLValue(t.customerId), .text(t.resource.jsonString), .integer(t.readAtMs)])
    }

    /// The stored read of an order, as the plan needs it.
    public func storedPlayOrder(_ orderId: String) throws -> IngestPlan.StoredCopy? {
        guard let row = try db.queryOne("SELECT read_at_ms, resource, revocation FROM play_orders WHERE order_id = ?", [.text(orderId)]) else {
            return nil
        }
        let revocation = row.string("revocation").flatMap { try? JSONParser.parse($0) }.flatMap(Self.revocation)
        return IngestPlan.StoredCopy(signedAtMs: row.int("read_at_ms") ?? 0, raw: (try? JSONParser.parse(row.string("resource") ?? "null")) ?? .null,
                                     revocation: revocation)
    }

    /// Keeps a Play fact's read as its order's copy (the plan said it is the newest), for `owner` or the chain's link.
    public func keepPlayOrder(_ fact: PurchaseFact, purchaseToken: String, owner: String?) throws {
        let customer = try owner ?? linkOwner(originalTransactionId: fact.chainId)
        try db.execute("""
            INSERT INTO play_orders (order_id, purchase_token, chain_id, customer_id, read_at_ms, resource, revocation) VALUES (?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (order_id) DO UPDATE SET purchase_token = excluded.purchase_token, customer_id = excluded.customer_id,
                read_at_ms = excluded.read_at_ms, resource = excluded.resource, revocation = excluded.revocation
            """, [.text(fact.periodId), .text(purchaseToken), .text(fact.chainId), SQLValue(customer), .integer(fact.signedAtMs),
                  .text(fact.raw.jsonString), SQLValue(fact.revocation.map { Self.json($0).jsonString })])
    }

    /// Keeps what an order charged (`orders.get`'s `Order`), the price the numbers count it at.
    public func setPlayOrderCharge(_ orderId: String, order: PlayOrder) throws {
        try db.execute("""
            UPDATE play_orders SET charge = ?, charge_read_ms = ?, charge_total_milli = ?, charge_currency = ? WHERE order_id = ?
            """, [.text(order.raw.jsonString), .integer(nowMs), .integer(order.totalMilli), .text(order.currency), .text(orderId)])
    }

    /// Links a Play chain (`link`), and moves its tokens and orders with it.
    @discardableResult
    public func linkPlayChain(_ decision: Ownership.Decision, chainId: String, linkedBefore linked: String?) throws -> Bool {
        guard let customerId = try link(decision, chainId: chainId, linkedBefore: linked) else { return false }
        try db.execute("UPDATE play_tokens SET customer_id = ? WHERE chain_id = ?", [.text(customerId), .text(chainId)])
        try db.execute("UPDATE play_orders SET customer_id = ? WHERE chain_id = ?", [.text(customerId), .text(chainId)])
        return true
    }

    /// Schedules acknowledging (and consuming) a token, due now, until `deadlineMs`; once per token.
    public func schedulePlayAcknowledgement(purchaseToken: String, packageName: String, productId: String, kind: PlayTokenRow.Kind,
                                            consume: Bool, customerId: String?, deadlineMs: Int64, nextAttemptMs: Int64) throws {
        try db.execute("""
            INSERT INTO play_acknowledgements (purchase_token, package_name, product_id, kind, consume, customer_id, deadline_ms, state, attempts,
                next_attempt_ms, created_at_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?) ON CONFLICT (purchase_token) DO NOTHING
            """, [.text(purchaseToken), .text(packageName), .text(productId), .text(kind.rawValue), .integer(consume ? 1 : 0),
                  SQLValue(customerId), .integer(deadlineMs), .integer(nextAttemptMs), .integer(nowMs)])
    }

    /// A stored order (`play_orders` joined to its token's package and kind) as Play's adapter reads it, with the
    /// revocation kept beside it; nil for a read that no longer decodes.
    static func playOrder(_ r: SQLRow) -> PurchaseFact? {
        guard let orderId = r.string("order_id"), let chainId = r.string("chain_id"), let packageName = r.string("package_name"),
              let resource = r.string("resource").flatMap({ try? JSONParser.parse($0) }) else { return nil }
        let readAtMs = r.int("read_at_ms") ?? 0
        var fact: PurchaseFact?
        if r.string("kind") == PlayTokenRow.Kind.subscription.rawValue {
            fact = (try? SubscriptionPurchaseV2(json: resource)).flatMap { s in
                PlayPurchaseFacts.subscription(s, packageName: packageName, linkedChainId: chainId, readAtMs: readAtMs).first { $0.periodId == orderId }
            }
        } else {
            fact = (try? ProductPurchaseV2(json: resource)).flatMap { PlayPurchaseFacts.product($0, packageName: packageName, readAtMs: readAtMs) }
        }
        guard var fact, fact.periodId == orderId else { return nil }
        fact.revocation = r.string("revocation").flatMap { try? JSONParser.parse($0) }.flatMap(revocation)
        // What the order charged, once the Orders API said it, over the plan's price.
        if let charge = r.string("charge").flatMap({ try? JSONParser.parse($0) }).flatMap({ try? PlayOrder(json: $0) }) {
            fact.priceMilli = charge.totalMilli
            fact.currency = charge.currency
        }
        return fact
    }

    static func json(_ r: PurchaseFact.Revocation) -> JSONValue {
        switch r.refund {
        case .full: return ["atMs": .int(r.atMs), "refund": "full"]
        case .prorated(let share): return ["atMs": .int(r.atMs), "refund": "prorated", "shareMilli": .int(Int64(share))]
        case .quantity(let units): return ["atMs": .int(r.atMs), "refund": "quantity", "units": .int(Int64(units))]
        }
    }

    static func revocation(_ j: JSONValue) -> PurchaseFact.Revocation? {
        guard let at = j["atMs"]?.int64Value else { return nil }
        switch j["refund"]?.stringValue {
        case "full"?: return PurchaseFact.Revocation(atMs: at, refund: .full)
        case "prorated"?: return PurchaseFact.Revocation(atMs: at, refund: .prorated(shareMilli: j["shareMilli"]?.intValue ?? 0))
        case "quantity"?: return PurchaseFact.Revocation(atMs: at, refund: .quantity(j["units"]?.intValue ?? 0))
        default: return nil
        }
    }
}

extension Records {
    /// Whether another token replaced this one (an upgrade, a downgrade, a resubscribe: its `linkedPurchaseToken` names it).
    public func playTokenIsReplaced(_ purchaseToken: String) throws -> Bool {
        try db.queryOne("SELECT 1 AS one FROM play_tokens WHERE linked_purchase_token = ? LIMIT 1", [.text(purchaseToken)]) != nil
    }
}
