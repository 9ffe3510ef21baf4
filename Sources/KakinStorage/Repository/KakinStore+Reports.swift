import KakinCore

/// A ledger entry that moved paid coins, with what the report needs to value it: the price the customer
/// paid (purchases and reversals carry it) and the app and product of the transaction behind it.
public struct ReportPaidMovement: Sendable, Hashable {
    public var customerId: String
    public var seq: Int64
    public var atMs: Int64
    /// `purchase`, `spend`, `refund`, `refundReversed`, `adjustment`.
    public var kind: String
    /// Signed paid-coin delta.
    public var paid: Int64
    /// The transaction ID for App Store movements; the spend ID or key otherwise.
    public var reference: String
    /// What the customer paid for these coins, in milliunits of `currency` (Apple's `price`).
    public var priceMilli: Int64?
    public var currency: String?
    public var bundleId: String?
    public var productId: String?

    public init(customerId: String, seq: Int64, atMs: Int64, kind: String, paid: Int64, reference: String, priceMilli: Int64? = nil,
                currency: String? = nil, bundleId: String? = nil, productId: String? = nil) {
        self.customerId = customerId
        self.seq = seq
        self.atMs = atMs
        self.kind = kind
        self.paid = paid
        self.reference = reference
        self.priceMilli = priceMilli
        self.currency = currency
        self.bundleId = bundleId
        self.productId = productId
    }
}

extension KakinStore {
    /// Paid-coin movements before `beforeMs`, in (customer, ledger order), after the given position: read page
    /// by page so a report over millions of entries holds one page at a time.
    public func paidCoinMovements(beforeMs: Int64, after position: (customerId: String, seq: Int64)?,
                                  limit: Int) async throws(KakinError) -> [ReportPaidMovement] {
        try await read { db in
            var sql = """
                SELECT l.customer_id AS customer_id, l.seq AS seq, l.at_ms AS at_ms, l.kind AS kind, l.paid_delta AS paid_delta,
                       l.reference AS reference, l.price_milli AS price_milli, l.currency AS currency,
                       t.bundle_id AS bundle_id, t.product_id AS product_id
                FROM ledger_entries l
                LEFT JOIN transactions t ON t.transaction_id = l.reference AND l.kind IN ('purchase', 'refund', 'refundReversed')
                WHERE l.paid_delta <> 0 AND l.at_ms < ?
                """
            var params: [SQLValue] = [.integer(beforeMs)]
            if let position {
                sql += " AND (l.customer_id > ? OR (l.customer_id = ? AND l.seq > ?))"
                params += [.text(position.customerId), .text(position.customerId), .integer(position.seq)]
            }
            sql += " ORDER BY l.customer_id, l.seq LIMIT ?"
            params.append(.integer(Int64(limit)))
            return try db.query(sql, params).map { r in
                ReportPaidMovement(customerId: r.string("customer_id") ?? "", seq: r.int("seq") ?? 0, atMs: r.int("at_ms") ?? 0,
                                 kind: r.string("kind") ?? "", paid: r.int("paid_delta") ?? 0, reference: r.string("reference") ?? "",
                                 priceMilli: r.int("price_milli"), currency: r.string("currency"), bundleId: r.string("bundle_id"),
                                 productId: r.string("product_id"))
            }
        }
    }
}
