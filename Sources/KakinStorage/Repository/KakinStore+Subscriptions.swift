import KakinCore

/// What support operations (renewal-date extensions) need to know about a subscription Kakin has seen.
public struct SubscriptionOrigin: Sendable, Hashable {
    public var bundleId: String
    public var environment: String
    /// The customer the subscription is linked to, if anyone claimed it.
    public var customerId: String?
}

extension KakinStore {
    /// The app, environment and customer of a subscription instance, from its newest stored transaction.
    public func subscriptionOrigin(originalTransactionId: String) async throws(KakinError) -> SubscriptionOrigin? {
        try await read { db in
            guard let row = try db.queryOne("""
                SELECT t.bundle_id, t.environment, l.customer_id FROM transactions t
                LEFT JOIN original_links l ON l.original_transaction_id = t.original_transaction_id
                WHERE t.original_transaction_id = ? ORDER BY t.purchase_date_ms DESC LIMIT 1
                """, [.text(originalTransactionId)]) else { return nil }
            return SubscriptionOrigin(bundleId: row.string("bundle_id") ?? "", environment: row.string("environment") ?? "",
                                      customerId: row.string("customer_id"))
        }
    }

    /// Adds an entry to a customer's support timeline (`events`).
    public func recordEvent(customerId: String?, kind: String, reference: String?, detail: JSONValue) async throws(KakinError) {
        let now = clock.nowMs()
        try await write { db in try Self.recordEvent(db, customerId: customerId, atMs: now, kind: kind, reference: reference, detail: detail) }
    }
}
