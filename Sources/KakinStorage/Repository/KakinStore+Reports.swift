import KakinCore

extension KakinStore {
    /// The columns `paidCoinMovement(_:)` reads: a ledger entry `l` that moved paid coins, with the app and
    /// product of the transaction behind it (`t`; an outside purchase `x`; a Google Play order `po` of the token `pt`,
    /// the app being its package, the price what `orders.get` said the order charged once Kakin read it).
    static let paidCoinMovementSelect = """
        SELECT l.customer_id AS customer_id, l.seq AS seq, l.kind AS kind, l.paid_delta AS paid_delta, l.reference AS reference,
               CASE WHEN l.price_milli IS NULL AND po.charge_total_milli IS NOT NULL THEN po.charge_total_milli ELSE l.price_milli END AS price_milli,
               CASE WHEN l.price_milli IS NULL AND po.charge_total_milli IS NOT NULL THEN po.charge_currency ELSE l.currency END AS currency,
               l.source AS source,
               COALESCE(t.bundle_id, x.bundle_id, pt.package_name) AS bundle_id, COALESCE(t.product_id, x.product_id, pt.product_id) AS product_id
        FROM ledger_entries l
        LEFT JOIN transactions t ON t.transaction_id = l.reference AND l.kind IN ('purchase', 'refund', 'refundReversed') AND l.source IS NULL
        LEFT JOIN external_purchases x ON x.provider = l.source AND x.external_id = l.reference
        LEFT JOIN play_orders po ON l.source = 'googlePlay' AND po.order_id = l.reference
        LEFT JOIN play_tokens pt ON pt.purchase_token = po.purchase_token
        WHERE l.paid_delta <> 0
        """

    /// A row of `paidCoinMovementSelect` (nil for a kind this build does not know).
    static func paidCoinMovement(_ r: SQLRow) -> PaidCoinMovement? {
        guard let kind = r.string("kind").flatMap(LedgerEntryKind.init(rawValue:)) else { return nil }
        return PaidCoinMovement(kind: kind, paid: r.int("paid_delta") ?? 0, reference: r.string("reference") ?? "", priceMilli: r.int("price_milli"),
                                currency: r.string("currency"), bundleId: r.string("bundle_id"), productId: r.string("product_id"),
                                source: r.string("source"))
    }

    /// Paid-coin movements before `beforeMs`, in (customer, ledger order), after the given position: read page
    /// by page so a report over millions of entries holds one page at a time.
    public func paidCoinMovements(beforeMs: Int64, after position: (customerId: String, seq: Int64)?,
                                  limit: Int) async throws(KakinError) -> [(customerId: String, seq: Int64, movement: PaidCoinMovement)] {
        try await read { db in
            var sql = Self.paidCoinMovementSelect + " AND l.at_ms < ?"
            var params: [SQLValue] = [.integer(beforeMs)]
            if let position {
                sql += " AND (l.customer_id > ? OR (l.customer_id = ? AND l.seq > ?))"
                params += [.text(position.customerId), .text(position.customerId), .integer(position.seq)]
            }
            sql += " ORDER BY l.customer_id, l.seq LIMIT ?"
            params.append(.integer(Int64(limit)))
            return try db.query(sql, params).compactMap { r in
                Self.paidCoinMovement(r).map { (r.string("customer_id") ?? "", r.int("seq") ?? 0, $0) }
            }
        }
    }
}
