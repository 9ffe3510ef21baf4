import KakinCore
import KakinStorage

extension SupportDesk {
    /// The unused paid-coin balance at the end of `asOf` in each app's reporting time zone, on Kakin's clock
    /// (ledger entries are stamped with it: the simulator's in local mode). Reads the ledger page by page.
    /// - Parameter lines: receives every customer's line (the auditor's CSV), streamed as computed.
    public func unusedBalance(asOf: String, lines: ((UnusedBalanceLine) -> Void)? = nil) async throws(KakinError) -> UnusedBalanceReport {
        guard Timestamp.parseDate(asOf) != nil else { throw KakinError(.invalidReportDate) }
        let zones = reportingZones
        let defaultZone = ReportingDay.defaultTimeZone
        var groups: [String: Set<String>] = [:]
        for (bundle, zone) in zones { groups[zone, default: []].insert(bundle) }
        if groups[defaultZone] == nil { groups[defaultZone] = [] }
        let catalogs = Dictionary(settings.apps.map { ($0.bundleId, $0.catalog) }, uniquingKeysWith: { a, _ in a })
        let fallbackPrice: (PaidCoinMovement) -> (priceMilli: Int64, currency: String)? = { m in
            guard let bundle = m.bundleId, let productId = m.productId, let product = catalogs[bundle]?[productId],
                  let price = product.priceMilli, let currency = product.currency, product.coins > 0 else { return nil }
            return (Milli.share(price, m.paid, of: Int64(product.coins)), currency)
        }
        var totals: [UnusedBalanceTotal] = []
        for (zone, bundles) in groups.sorted(by: { $0.key < $1.key }) {
            guard let cutoff = ReportingDay.endMs(of: asOf, timeZone: zone) else { throw KakinError(.invalidReportDate) }
            var computation = UnusedBalanceComputation(
                includes: { bundles.contains($0) || (zone == defaultZone && zones[$0] == nil) },
                timeZone: { zones[$0] ?? defaultZone }, fallbackPrice: fallbackPrice)
            var position: (customerId: String, seq: Int64)?
            while true {
                let page = try await store.paidCoinMovements(beforeMs: cutoff, after: position, limit: Limits.reportPageRows)
                for row in page { computation.add(customerId: row.customerId, row.movement) }
                if let lines { for line in computation.takeLines() { lines(line) } }
                guard page.count == Limits.reportPageRows, let last = page.last else { break }
                position = (last.customerId, last.seq)
            }
            totals += computation.finish()
            if let lines { for line in computation.takeLines() { lines(line) } }
        }
        totals.sort { ($0.bundleId, $0.currency, $0.source) < ($1.bundleId, $1.currency, $1.source) }
        let usedZones = Set(totals.map(\.timeZone)).union(zones.values)
        let zoneName = usedZones.count <= 1 ? (usedZones.first ?? defaultZone) : "per app"
        return UnusedBalanceReport(asOf: asOf, timeZone: zoneName, totals: totals)
    }
}
