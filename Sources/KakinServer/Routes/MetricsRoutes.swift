import HTTPServer
import KakinCore
import KakinExternal
import KakinMetrics
import KakinService

/// Business numbers over HTTP (`docs/metrics.md`): `GET /v1/admin/metrics/overview` and `GET /v1/admin/metrics/{name}`
/// (admin key, or a signed-in desk session), and the business gauges of `/metrics`. Thin: parse, call
/// `BusinessMetrics`, render.
extension KakinApp {
    func registerMetricsRoutes(_ r: inout RouteTable) {
        // One pattern: `overview` is a name like the others here, so no literal/parameter precedence is relied on.
        r.add("GET", "/v1/admin/metrics/{name}", .adminRead) { [unowned self] c throws(KakinError) in try await getMetric(c) }
        r.add("GET", "/admin/metrics", .desk) { [unowned self] c in await desk.metricsPage(c.request) }
    }

    func metricsFilter(_ c: RouteCall) throws(KakinError) -> MetricsFilter {
        let q = c.request.query
        func optional(_ name: String, max: Int) throws(KakinError) -> String? {
            guard let v = q[name], !v.isEmpty else { return nil }
            guard v.utf8.count <= max else { throw KakinError(.invalidMetricsQuery, "\(name) is longer than \(max) bytes.") }
            return v
        }
        let currency = try optional("currency", max: 3)
        if let currency, currency.utf8.count != 3 || !currency.utf8.allSatisfy({ $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) {
            throw KakinError(.invalidMetricsQuery, "currency is an ISO 4217 code such as USD.")
        }
        let source = try optional("source", max: ExternalPurchaseInput.providerLengthMax)
        if let source, !PurchaseSource.isStore(source), !ExternalPurchaseInput.isProvider(source) {
            throw KakinError(.invalidMetricsQuery, "source is appStore, googlePlay or a provider's name such as stripe.")
        }
        return MetricsFilter(bundleId: try optional("bundleId", max: 255), productId: try optional("productId", max: 255), source: source,
                             currency: currency)
    }

    func getMetric(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let q = c.request.query
        let from = q["from"] ?? "", to = q["to"] ?? ""
        let filter = try metricsFilter(c)
        let name = c["name"]
        if name == "overview" {
            return .json(try await services.businessMetrics.overview(from: from, to: to, filter: filter).json, status: 200)
        }
        guard let interval = MetricsInterval(rawValue: q["interval"] ?? "day") else {
            throw KakinError(.invalidMetricsQuery, "interval is day, week or month.")
        }
        return .json(try await services.businessMetrics.series(name: name, interval: interval, from: from, to: to, filter: filter), status: 200)
    }

    /// The business gauges beside the ops metrics (read from the rollups at scrape time, so every process agrees).
    func businessMetricsText() async -> String {
        guard let g = try? await services.businessMetrics.gauges() else { return "" }
        func label(_ s: String) -> String {
            s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
        }
        var out = "# HELP kakin_business_active_subscriptions Active subscriptions at the end of today (paid, trial and grace; not billing retry), by app and product.\n"
        out += "# TYPE kakin_business_active_subscriptions gauge\n"
        // Every configured app's subscription products, at 0 when none is active (a series exists from the start).
        var active = g.activeSubscriptions
        for app in services.settings.apps {
            for p in app.catalog.sortedProducts where p.kind == .autoRenewable { active[app.bundleId, default: [:]][p.productId, default: 0] += 0 }
        }
        for bundle in active.keys.sorted() {
            for (product, n) in active[bundle]!.sorted(by: { $0.key < $1.key }) {
                out += "kakin_business_active_subscriptions{bundle_id=\"\(label(bundle))\",product_id=\"\(label(product))\"} \(n)\n"
            }
        }
        out += "# HELP kakin_business_active_trials Free trials active at the end of today, by app.\n# TYPE kakin_business_active_trials gauge\n"
        var trials = g.activeTrials
        for app in services.settings.apps { trials[app.bundleId, default: 0] += 0 }
        for (bundle, n) in trials.sorted(by: { $0.key < $1.key }) { out += "kakin_business_active_trials{bundle_id=\"\(label(bundle))\"} \(n)\n" }
        out += "# HELP kakin_business_outstanding_paid_coins Paid coins credited and not spent or refunded, over every wallet.\n"
        out += "# TYPE kakin_business_outstanding_paid_coins gauge\nkakin_business_outstanding_paid_coins \(g.outstandingPaidCoins)\n"
        return out
    }
}
