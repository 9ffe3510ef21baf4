import HTTPServer
import KakinCore
import KakinMetrics
import KakinService

extension SupportDesk {
    /// `/admin/metrics?from&to&bundleId&productId&source&interval`: the overview, one chart per number, the split by
    /// source and by product, and a warning when the numbers' worker is held back. Defaults: the last 90 days up to today
    /// (the apps' reporting zone), weekly.
    public func metricsPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let numbers = services.businessMetrics
            let q = request.query
            let today = numbers.settings.coinCalendar.day(ofMs: clock.nowMs())
            func value(_ name: String) -> String? { q[name].flatMap { $0.isEmpty ? nil : $0 } }
            let to = value("to") ?? CivilDay.string(today)
            let from = value("from") ?? CivilDay.string((CivilDay.parse(to) ?? today) - 89)
            guard let interval = MetricsInterval(rawValue: value("interval") ?? "week") else { throw KakinError(.invalidMetricsQuery) }
            let sources = Array(Set(try await numbers.sources()).union([PurchaseSource.appStore])).sorted()
            guard value("source").map(sources.contains) ?? true else { throw KakinError(.invalidMetricsQuery, "No numbers for this source.") }
            let filter = MetricsFilter(bundleId: value("bundleId"), productId: value("productId"), source: value("source"))
            let overview = try await numbers.overview(from: from, to: to, filter: filter)
            var series: [String: JSONValue] = [:]
            for name in ["activeSubscriptions", "activeTrials", "newSubscriptions", "churned", "mrr", "revenue", "refunds", "coins"] {
                series[name] = try await numbers.series(name: name, interval: interval, from: from, to: to, filter: filter)
            }
            func points(_ name: String, _ pick: (JSONValue) -> Double) -> [(label: String, value: Double)] {
                (series[name]?["points"]?.arrayValue ?? []).map { p in (p["start"]?.stringValue ?? "", pick(p["value"] ?? .null)) }
            }
            let count = { (d: Double) -> String in Fmt.number(Int64(d.rounded())) }
            let currency = overview.revenue.first?.currency ?? overview.mrr.first?.currency ?? ""
            func amount(_ v: JSONValue, _ field: String) -> Double {
                Double((v.arrayValue ?? []).first { $0["currency"]?.stringValue == currency }?[field]?.int64Value ?? 0)
            }
            let charts: [MetricsPage.Chart] = [
                .init(title: "Active subscriptions", points: points("activeSubscriptions") { Double($0.int64Value ?? 0) }, format: count, bars: false),
                .init(title: "Active trials", points: points("activeTrials") { Double($0.int64Value ?? 0) }, format: count, bars: false),
                .init(title: "New subscriptions", points: points("newSubscriptions") { Double($0.int64Value ?? 0) }, format: count, bars: true),
                .init(title: "Churned", points: points("churned") { Double(($0["voluntary"]?.int64Value ?? 0) + ($0["billing"]?.int64Value ?? 0)) },
                      format: count, bars: true),
                .init(title: "MRR \(currency)", points: points("mrr") { amount($0, "amount") }, format: count, bars: false),
                .init(title: "Gross revenue \(currency)", points: points("revenue") { amount($0, "gross") }, format: count, bars: true),
                .init(title: "Refunds", points: points("refunds") { Double($0["count"]?.int64Value ?? 0) }, format: count, bars: true),
                .init(title: "Paid coins outstanding", points: points("coins") { Double($0["outstandingPaid"]?.int64Value ?? 0) }, format: count, bars: false),
            ]
            let apps = settings.apps.map(\.bundleId)
            let catalogApps = filter.bundleId.map { b in settings.apps.filter { $0.bundleId == b } } ?? settings.apps
            let products = Array(Set(catalogApps.flatMap { $0.catalog.sortedProducts.map(\.productId) })).sorted()
            var perProduct: [(productId: String, overview: Overview)] = []
            for p in products where filter.productId == nil || filter.productId == p {
                var f = filter
                f.productId = p
                perProduct.append((p, try await numbers.overview(from: from, to: to, filter: f)))
            }
            return Layout.response(MetricsPage.render(session: session, query: .init(from: from, to: to, bundleId: filter.bundleId,
                                                                                     productId: filter.productId, source: filter.source,
                                                                                     interval: interval),
                                                      apps: apps, products: products, sources: sources, overview: overview, perProduct: perProduct,
                                                      charts: charts, notice: await heldBackWarning()))
        }
    }
}
