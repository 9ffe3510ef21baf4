import KakinCore
import KakinMetrics
import KakinStorage

/// `/admin/metrics`: the business numbers (the same `BusinessMetrics` answers as `GET /v1/admin/metrics/…`) with
/// server-rendered SVG charts: no script, no inline style (colours are SVG attributes and the stylesheet's classes),
/// so the desk's CSP holds.
enum MetricsPage {
    struct Query {
        var from: String
        var to: String
        var bundleId: String?
        var productId: String?
        var source: String?
        var interval: MetricsInterval
    }

    struct Chart {
        var title: String
        var points: [(label: String, value: Double)]
        var format: (Double) -> String
        var bars: Bool
    }

    static func render(session: AdminSession, query: Query, apps: [String], products: [String], sources: [String], overview: Overview,
                       perProduct: [(productId: String, overview: Overview)], charts: [Chart], notice: HTML = .empty) -> HTML {
        func option(_ value: String, _ label: String, _ selected: Bool) -> HTML {
            selected ? "<option value=\"\(value)\" selected>\(label)</option>" : "<option value=\"\(value)\">\(label)</option>"
        }
        let appOptions = [option("", "All apps", query.bundleId == nil)] + apps.map { option($0, $0, query.bundleId == $0) }
        let productOptions = [option("", "All products", query.productId == nil)] + products.map { option($0, $0, query.productId == $0) }
        let sourceOptions = [option("", "All sources", query.source == nil)] + sources.map { option($0, $0, query.source == $0) }
        let intervalOptions = MetricsInterval.allCases.map { option($0.rawValue, $0.rawValue, query.interval == $0) }
        let money = { (list: [Overview.Money]) -> String in list.isEmpty ? "0" : list.map { "\(Fmt.number($0.amount)) \($0.currency)" }.joined(separator: " · ") }
        let revenue = overview.revenue.isEmpty ? "0" : overview.revenue.map { "\(Fmt.number($0.gross)) \($0.currency)" }.joined(separator: " · ")
        let refunded = overview.revenue.isEmpty ? "0" : overview.revenue.map { "\(Fmt.number($0.refunded)) \($0.currency)" }.joined(separator: " · ")
        let proceeds = overview.revenue.isEmpty ? "0" : overview.revenue.map { "\(Fmt.number($0.proceeds)) \($0.currency)" }.joined(separator: " · ")
        let cards: [(String, String, String)] = [
            ("Active subscriptions", Fmt.number(overview.activeSubscriptions), "at the end of \(overview.to); trials and grace included"),
            ("Active trials", Fmt.number(overview.activeTrials), "at the end of \(overview.to)"),
            ("New subscriptions", Fmt.number(overview.newSubscriptions), "started in the range"),
            ("Trial conversion", percent(overview.trialConversionRate), "\(overview.trialsConverted) of \(overview.trialsStarted) trials started in the range"),
            ("Churn", percent(overview.churnRate), "\(overview.churnedVoluntary) voluntary · \(overview.churnedBilling) billing"),
            ("MRR", money(overview.mrr), "at the end of \(overview.to), minor units"),
            ("Revenue", revenue, "gross; refunded \(refunded); proceeds \(proceeds)"),
            ("Refunds", Fmt.number(overview.refundCount), "\(percent(overview.refundRate)) of paid transactions"),
            ("Coins", "\(Fmt.number(overview.coinsSold)) sold", "\(Fmt.number(overview.coinsSpent)) spent · \(Fmt.number(overview.coinsGrantedFree)) free granted · \(Fmt.number(overview.coinsOutstandingPaid)) paid outstanding"),
        ]
        let cardHTML = cards.map { c -> HTML in
            "<section class=\"card metric\"><h2>\(c.0)</h2><div class=\"big\">\(c.1)</div><p class=\"muted small\">\(c.2)</p></section>"
        }
        let rows = perProduct.map { p -> HTML in
            let o = p.overview
            let gross = o.revenue.map { "\(Fmt.number($0.gross)) \($0.currency)" }.joined(separator: " · ")
            return """
                <tr><td><code>\(p.productId)</code></td><td class="num">\(Fmt.number(o.activeSubscriptions))</td>\
                <td class="num">\(Fmt.number(o.activeTrials))</td><td class="num">\(Fmt.number(o.newSubscriptions))</td>\
                <td class="num">\(o.trialsConverted)/\(o.trialsStarted)</td><td class="num">\(o.churnedVoluntary + o.churnedBilling)</td>\
                <td class="num">\(gross.isEmpty ? "0" : gross)</td><td class="num">\(Fmt.number(o.refundCount))</td></tr>
                """
        }
        return Layout.page("Numbers", session: session, notice: notice, """
            <h1>Numbers</h1>
            <section class="card">
            <form class="inline" method="get" action="/admin/metrics">
            <label>From<input type="date" name="from" value="\(query.from)"></label>
            <label>To<input type="date" name="to" value="\(query.to)"></label>
            <label>App<select name="bundleId">\(appOptions)</select></label>
            <label>Product<select name="productId">\(productOptions)</select></label>
            <label>Source<select name="source">\(sourceOptions)</select></label>
            <label>Interval<select name="interval">\(intervalOptions)</select></label>
            <button type="submit">Show</button>
            </form>
            <p class="muted small">Days of \(overview.timeZone). Definitions: docs/metrics.md. The same figures as \
            <code>GET /v1/admin/metrics/overview</code>; coin figures are every wallet's (not split by app or product).</p>
            </section>
            <div class="grid metrics">\(cardHTML)</div>
            <div class="grid charts">\(charts.map(svg))</div>
            <section class="card"><h2>By source</h2>
            <div class="scroll"><table><tr><th>source</th><th class="num">MRR</th><th class="num">gross</th><th class="num">refunded</th>\
            <th class="num">proceeds</th></tr>\(bySource(overview))</table></div>
            <p class="muted small">The App Store's proceeds are after the app's <code>commissionRate</code>; a web provider's are gross \
            less refunds (its fee is not known to Kakin).</p>
            </section>
            <section class="card"><h2>By product</h2>
            <div class="scroll"><table><tr><th>product</th><th class="num">active</th><th class="num">trials</th><th class="num">new</th>\
            <th class="num">converted</th><th class="num">churned</th><th class="num">gross</th><th class="num">refunds</th></tr>\(rows)</table></div>
            </section>
            """)
    }

    /// One row per source: its MRR at the end and its revenue in the range, per currency.
    static func bySource(_ o: Overview) -> [HTML] {
        let sources = Set(o.mrr.flatMap(\.bySource.keys)).union(o.revenue.flatMap(\.bySource.keys)).sorted()
        return sources.map { source -> HTML in
            func list(_ items: [(String, Int64)]) -> String {
                let kept = items.filter { $0.1 != 0 }
                return kept.isEmpty ? "0" : kept.map { "\(Fmt.number($0.1)) \($0.0)" }.joined(separator: " · ")
            }
            let mrr = list(o.mrr.map { ($0.currency, $0.bySource[source] ?? 0) })
            let r = o.revenue.map { ($0.currency, $0.bySource[source]) }
            return """
                <tr><td><code>\(source)</code></td><td class="num">\(mrr)</td><td class="num">\(list(r.map { ($0.0, $0.1?.gross ?? 0) }))</td>\
                <td class="num">\(list(r.map { ($0.0, $0.1?.refunded ?? 0) }))</td><td class="num">\(list(r.map { ($0.0, $0.1?.proceeds ?? 0) }))</td></tr>
                """
        }
    }

    static func percent(_ r: Double) -> String {
        let tenths = Int64((r * 1000).rounded())
        return "\(tenths / 10).\(tenths % 10)%"
    }

    /// One chart: a line (levels) or bars (flows) over the buckets, with its axis' top value and the first and last
    /// bucket's dates. Coordinates are computed here; nothing runs in the browser.
    static func svg(_ chart: Chart) -> HTML {
        let width = 600.0, height = 180.0, left = 56.0, bottom = 22.0, top = 10.0
        let plotW = width - left - 8, plotH = height - bottom - top
        let maxValue = max(1, chart.points.map(\.value).max() ?? 1)
        let minValue = min(0, chart.points.map(\.value).min() ?? 0)
        let span = maxValue - minValue
        let n = max(1, chart.points.count)
        func x(_ i: Int) -> Double { left + plotW * (Double(i) + 0.5) / Double(n) }
        func y(_ v: Double) -> Double { top + plotH * (1 - (v - minValue) / span) }
        func f(_ d: Double) -> String { String(Int64((d * 10).rounded()) / 10) + "." + String(abs(Int64((d * 10).rounded()) % 10)) }
        var marks = ""
        if chart.bars {
            let w = max(1, plotW / Double(n) * 0.7)
            for (i, p) in chart.points.enumerated() {
                let y0 = y(max(0, p.value)), y1 = y(min(0, p.value))
                marks += "<rect class=\"bar\" x=\"\(f(x(i) - w / 2))\" y=\"\(f(y0))\" width=\"\(f(w))\" height=\"\(f(max(0.5, y1 - y0)))\" fill=\"#3b6fd8\"><title>\(HTML.escape(p.label)): \(HTML.escape(chart.format(p.value)))</title></rect>"
            }
        } else {
            let list = chart.points.enumerated().map { "\(f(x($0.offset))),\(f(y($0.element.value)))" }.joined(separator: " ")
            marks += "<polyline class=\"line\" points=\"\(list)\" fill=\"none\" stroke=\"#3b6fd8\" stroke-width=\"2\"/>"
            for (i, p) in chart.points.enumerated() where chart.points.count <= 62 {
                marks += "<circle cx=\"\(f(x(i)))\" cy=\"\(f(y(p.value)))\" r=\"2.5\" fill=\"#3b6fd8\"><title>\(HTML.escape(p.label)): \(HTML.escape(chart.format(p.value)))</title></circle>"
            }
        }
        let first = chart.points.first?.label ?? "", last = chart.points.last?.label ?? ""
        let axis = """
            <line x1="\(f(left))" y1="\(f(y(0)))" x2="\(f(width - 8))" y2="\(f(y(0)))" stroke="#c9cfdb" stroke-width="1"/>\
            <line x1="\(f(left))" y1="\(f(top))" x2="\(f(left))" y2="\(f(top + plotH))" stroke="#c9cfdb" stroke-width="1"/>\
            <text x="\(f(left - 6))" y="\(f(top + 10))" text-anchor="end" font-size="11" fill="#5b6475">\(HTML.escape(chart.format(maxValue)))</text>\
            <text x="\(f(left - 6))" y="\(f(y(0)))" text-anchor="end" font-size="11" fill="#5b6475">0</text>\
            <text x="\(f(left))" y="\(f(height - 6))" font-size="11" fill="#5b6475">\(HTML.escape(first))</text>\
            <text x="\(f(width - 8))" y="\(f(height - 6))" text-anchor="end" font-size="11" fill="#5b6475">\(HTML.escape(last))</text>
            """
        let latest = chart.points.last.map { chart.format($0.value) } ?? "—"
        return HTML(rendered: """
            <section class="card chart"><h2>\(HTML.escape(chart.title)) <span class="muted small">\(HTML.escape(latest))</span></h2>\
            <svg class="chart" viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="\(HTML.escape(chart.title))" xmlns="http://www.w3.org/2000/svg">\
            \(axis)\(marks)</svg></section>
            """)
    }
}
