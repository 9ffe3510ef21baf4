import KakinCore
import KakinOfferings
import KakinStorage

extension Link {
    static func offerings() -> String { "/admin/offerings" }

    static func offeringEdit(_ kind: OfferingObjectKind, _ id: String) -> String {
        "/admin/offerings/edit?kind=\(kind.rawValue)&id=\(URLText.encode(id))"
    }

    static func experiment(_ id: String) -> String { "/admin/experiments/\(URLText.encode(id))" }

    static func audit(kind: OfferingObjectKind? = nil, id: String? = nil, cursor: String? = nil) -> String {
        var query: [String] = []
        if let kind { query.append("kind=\(kind.rawValue)") }
        if let id { query.append("id=\(URLText.encode(id))") }
        if let cursor { query.append("cursor=\(URLText.encode(cursor))") }
        return "/admin/audit" + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }
}

/// `/admin/offerings`: every offering, placement and experiment with its version and last editor, and a form to open
/// one by kind and id (a new id starts from a template).
enum OfferingsPage {
    static func render(session: AdminSession, objects: [OfferingObjectKind: [JSONValue]], notice: HTML) -> HTML {
        let sections = OfferingObjectKind.allCases.map { kind -> HTML in
            let rows = (objects[kind] ?? []).map { o -> HTML in
                let id = o["id"]?.stringValue ?? ""
                let results: HTML = kind == .experiment
                    ? " · <a href=\"\(Link.experiment(id))\">results</a> \(Fmt.badge(o["state"]?.stringValue ?? "", o["state"] == "running" ? .good : .neutral))"
                    : .empty
                return """
                    <tr><td><a href="\(Link.offeringEdit(kind, id))"><strong>\(id)</strong></a>\(results)</td><td>\(summary(kind, o))</td>\
                    <td class="num">\(o["version"]?.int64Value ?? 0)</td><td class="small">\(o["updatedBy"]?.stringValue ?? "")<div class="muted">\
                    \(o["updatedAt"]?.stringValue ?? "")</div></td></tr>
                    """
            }
            let empty: HTML = rows.isEmpty ? "<p class=\"muted\">None yet.</p>" : .empty
            return """
                <section class="card"><h2>\(kind.pathSegment.capitalized)</h2>\
                <div class="scroll"><table><tr><th>id</th><th>what</th><th class="num">version</th><th>last change</th></tr>\(rows)</table></div>\
                \(empty)</section>
                """
        }
        let kinds = OfferingObjectKind.allCases.map { k -> HTML in "<option value=\"\(k.rawValue)\">\(k.rawValue)</option>" }
        return Layout.page("Offerings", session: session, notice: notice, """
            <h1>Offerings and experiments</h1>
            <section class="card"><form class="inline" method="get" action="/admin/offerings/edit">\
            <select name="kind" aria-label="kind">\(kinds)</select> <input name="id" placeholder="id, e.g. onboarding" aria-label="id" required>\
            <button type="submit">Open or create</button> <a class="small" href="\(Link.audit())">Audit log</a></form></section>
            \(sections)
            """)
    }

    /// One line saying what an object does.
    static func summary(_ kind: OfferingObjectKind, _ o: JSONValue) -> String {
        switch kind {
        case .offering:
            return (o["packages"]?.arrayValue ?? []).map { $0["id"]?.stringValue ?? "" }.joined(separator: ", ")
        case .placement:
            return "\((o["rules"]?.arrayValue ?? []).count) rules, default \(o["default"]?.stringValue ?? "")"
        case .experiment:
            let variants = (o["variants"]?.arrayValue ?? []).map { "\($0["id"]?.stringValue ?? "") → \($0["offering"]?.stringValue ?? "")" }
            return "on \(o["placement"]?.stringValue ?? ""): \(variants.joined(separator: ", ")) · \(o["enrollmentPercent"]?.jsonString ?? "")% enrolled"
        }
    }
}

/// `/admin/offerings/edit?kind&id`: the object's JSON (the admin API's PUT body) in a form, its recent audit entries,
/// and the error of a refused save with the text as it was sent.
enum OfferingEditPage {
    static func template(_ kind: OfferingObjectKind) -> String {
        switch kind {
        case .offering: #"{"packages": [{"id": "monthly", "appStore": "premium.monthly"}], "metadata": {"title": "Go premium"}}"#
        case .placement: #"{"rules": [{"when": {"platform": "ios", "countries": ["JP"]}, "offering": "OFFERING"}], "default": "OFFERING"}"#
        case .experiment:
            #"{"placement": "PLACEMENT", "variants": [{"id": "a", "offering": "OFFERING", "weight": 1}, {"id": "b", "offering": "OTHER", "weight": 1}], "enrollmentPercent": 100, "startsAt": "2026-01-01T00:00:00Z"}"#
        }
    }

    static func render(session: AdminSession, kind: OfferingObjectKind, id: String, stored: JSONValue?, text: String, error: KakinError?,
                       audit: [JSONValue], notice: HTML) -> HTML {
        let problem: HTML = error.map { e in "<div class=\"problem\"><strong>\(e.kind.id) \(e.kind.code)</strong>: \(e.message) Nothing was changed.</div>" } ?? .empty
        let facts: HTML = stored.map { o in
            Fmt.facts([Fact("version", "\(o["version"]?.int64Value ?? 0)"), Fact("last change", "\(o["updatedAt"]?.stringValue ?? "") by \(o["updatedBy"]?.stringValue ?? "")")])
        } ?? "<p class=\"muted\">Not defined yet: saving creates version 1.</p>"
        let results: HTML = kind == .experiment && stored != nil ? "<p><a href=\"\(Link.experiment(id))\">Results</a></p>" : .empty
        let rows = audit.map { e -> HTML in
            """
            <tr><td class="when">\(e["at"]?.stringValue ?? "")</td><td class="num">\(e["version"]?.int64Value ?? 0)</td><td>\(e["actor"]?.stringValue ?? "")</td>\
            <td class="small mono">\((e["change"] ?? .null).jsonString)</td></tr>
            """
        }
        return Layout.page("\(kind.rawValue) \(id)", session: session, notice: notice, """
            <h1>\(kind.rawValue.capitalized) \(id)</h1>
            \(problem)<section class="card">\(facts)\(results)
            <form method="post" action="\(Link.offeringEdit(kind, id))">\(Form.token(session))\
            <textarea class="json" name="body" aria-label="JSON" spellcheck="false">\(text)</textarea>\
            <p><button type="submit">Save</button> <span class="small muted">Checked against every offering, placement and experiment; an invalid \
            change is refused and nothing changes. Takes effect on every Kakin process at its next read.</span></p></form></section>
            <section class="card"><h2>Changes</h2><div class="scroll"><table><tr><th>when</th><th class="num">version</th><th>who</th><th>what changed</th></tr>\
            \(rows)</table></div><p class="small"><a href="\(Link.audit(kind: kind, id: id))">All changes of this \(kind.rawValue)</a></p></section>
            """)
    }
}

/// `/admin/audit`: every change of an offering, placement or experiment, newest first.
enum AuditPage {
    static func render(session: AdminSession, page: JSONValue, kind: OfferingObjectKind?, id: String?) -> HTML {
        let rows = (page["entries"]?.arrayValue ?? []).map { e -> HTML in
            let k = OfferingObjectKind(rawValue: e["kind"]?.stringValue ?? "") ?? .offering
            let objectId = e["objectId"]?.stringValue ?? ""
            return """
                <tr><td class="when">\(e["at"]?.stringValue ?? "")</td><td>\(k.rawValue) <a href="\(Link.offeringEdit(k, objectId))">\(objectId)</a></td>\
                <td class="num">\(e["version"]?.int64Value ?? 0)</td><td>\(e["actor"]?.stringValue ?? "")</td>\
                <td class="small mono">\((e["change"] ?? .null).jsonString)</td></tr>
                """
        }
        let next: HTML = page["nextCursor"]?.stringValue.map { c in "<div class=\"pager\"><a href=\"\(Link.audit(kind: kind, id: id, cursor: c))\">Older</a></div>" } ?? .empty
        return Layout.page("Audit", session: session, """
            <h1>Audit: offerings, placements, experiments</h1>
            <section class="card"><div class="scroll"><table><tr><th>when</th><th>object</th><th class="num">version</th><th>who</th><th>what changed</th></tr>\
            \(rows)</table></div>\(next)</section>
            """)
    }
}

/// `/admin/experiments/{id}`: the results (`GET /v1/admin/experiments/{id}/results`) as a table and charts: each
/// variant's rate or amount per customer as a bar with its 95 % interval as a whisker, computed on the server (SVG, no
/// script).
enum ExperimentPage {
    struct Bar {
        var label: String
        var value: Double
        var low: Double
        var high: Double
    }

    static func render(session: AdminSession, results: JSONValue) -> HTML {
        let variants = results["variants"]?.arrayValue ?? []
        let id = results["experiment"]?.stringValue ?? ""
        func probability(_ v: JSONValue?) -> String {
            guard let p = v?.doubleValue else { return "control" }
            return MetricsPage.percent(p)
        }
        let rows = variants.map { v -> HTML in
            let revenue = (v["revenuePerCustomer"]?.arrayValue ?? []).map { r in
                "\(r["currency"]?.stringValue ?? "") \(amount(r["amount"])) [\(amount(r["low"])) – \(amount(r["high"]))]"
            }.joined(separator: "; ")
            return """
                <tr><td><strong>\(v["id"]?.stringValue ?? "")</strong><div class="small muted">\(v["offering"]?.stringValue ?? "")</div></td>\
                <td class="num">\(v["enrolled"]?.int64Value ?? 0)</td><td class="num">\(v["trialsStarted"]?.int64Value ?? 0)</td>\
                <td class="num">\(v["trialConversions"]?.int64Value ?? 0)</td><td class="num">\(v["paidConversions"]?.int64Value ?? 0)</td>\
                <td class="num">\(v["refunds"]?.int64Value ?? 0)</td><td class="small">\(revenue.isEmpty ? "—" : revenue)</td>\
                <td class="num">\(probability(v["probabilityToBeatControl"]))</td>\
                <td><a class="small" href="/admin/metrics?experiment=\(URLText.encode(id))&variant=\(URLText.encode(v["id"]?.stringValue ?? ""))">numbers</a></td></tr>
                """
        }
        func rateBars(_ name: String) -> [Bar] {
            variants.map { v in
                let r = v["rates"]?[name]
                return Bar(label: v["id"]?.stringValue ?? "", value: r?["rate"]?.doubleValue ?? 0, low: r?["low"]?.doubleValue ?? 0, high: r?["high"]?.doubleValue ?? 0)
            }
        }
        func amountBars(_ field: String, _ currency: String) -> [Bar] {
            variants.map { v in
                let r = (v[field]?.arrayValue ?? []).first { $0["currency"]?.stringValue == currency }
                return Bar(label: v["id"]?.stringValue ?? "", value: r?["amount"]?.doubleValue ?? 0, low: r?["low"]?.doubleValue ?? 0, high: r?["high"]?.doubleValue ?? 0)
            }
        }
        var charts: [HTML] = [
            svg("Paid conversion rate", rateBars("paidConversions"), MetricsPage.percent),
            svg("Trials started", rateBars("trialsStarted"), MetricsPage.percent),
            svg("Trial conversions", rateBars("trialConversions"), MetricsPage.percent),
            svg("Refunds", rateBars("refunds"), MetricsPage.percent),
        ]
        let currencies = Set(variants.flatMap { ($0["revenuePerCustomer"]?.arrayValue ?? []).compactMap { $0["currency"]?.stringValue } }).sorted()
        for c in currencies { charts.append(svg("Revenue per enrolled customer (\(c), minor units)", amountBars("revenuePerCustomer", c), amount)) }
        let mrrCurrencies = Set(variants.flatMap { ($0["mrrPerCustomer"]?.arrayValue ?? []).compactMap { $0["currency"]?.stringValue } }).sorted()
        for c in mrrCurrencies { charts.append(svg("MRR per enrolled customer (\(c), minor units)", amountBars("mrrPerCustomer", c), amount)) }
        let incomplete: HTML = results["complete"] == false
            ? "<div class=\"notice\">Only the first \(OfferingLimits.resultsEnrollmentsMax) enrollments are counted.</div>" : .empty
        return Layout.page("Experiment \(id)", session: session, """
            <h1>Experiment \(id) \(Fmt.badge(results["state"]?.stringValue ?? "", results["state"] == "running" ? .good : .neutral))</h1>
            \(incomplete)<section class="card"><p class="small muted">On placement \(results["placement"]?.stringValue ?? ""), control \
            \(results["control"]?.stringValue ?? ""), as of \(results["asOf"]?.stringValue ?? ""). Purchases of every store made after a customer \
            enrolled count for its variant, refunds deducted. Intervals are 95 %; "beats control" is the probability that the variant's paid \
            conversion rate is above the control's. <a href="\(Link.offeringEdit(.experiment, id))">Edit</a></p>
            <div class="scroll"><table><tr><th>variant</th><th class="num">enrolled</th><th class="num">trials</th><th class="num">trial conv.</th>\
            <th class="num">paid conv.</th><th class="num">refunds</th><th>revenue per customer [95 %]</th><th class="num">beats control</th><th></th></tr>\
            \(rows)</table></div></section>
            <div class="grid charts">\(charts)</div>
            """)
    }

    static func amount(_ v: JSONValue?) -> String { amount(v?.doubleValue ?? 0) }

    /// Two decimals (amounts per customer are fractions of a minor unit).
    static func amount(_ d: Double) -> String {
        let cents = Int64((d * 100).rounded()), whole = abs(cents)
        return "\(cents < 0 ? "-" : "")\(whole / 100).\(whole % 100 < 10 ? "0" : "")\(whole % 100)"
    }

    /// Bars with 95 % whiskers, one per variant; coordinates computed here.
    static func svg(_ title: String, _ bars: [Bar], _ format: (Double) -> String) -> HTML {
        let width = 420.0, height = 170.0, left = 60.0, bottom = 22.0, top = 10.0
        let plotW = width - left - 8, plotH = height - bottom - top
        let maxValue = max(bars.map(\.high).max() ?? 0, bars.map(\.value).max() ?? 0, 1e-9)
        func x(_ i: Int) -> Double { left + plotW * (Double(i) + 0.5) / Double(max(1, bars.count)) }
        func y(_ v: Double) -> Double { top + plotH * (1 - max(0, v) / maxValue) }
        func f(_ d: Double) -> String { String(Int64((d * 10).rounded()) / 10) + "." + String(abs(Int64((d * 10).rounded()) % 10)) }
        let w = plotW / Double(max(1, bars.count)) * 0.5
        var marks = ""
        for (i, b) in bars.enumerated() {
            let colour = i == 0 ? "#8a94a6" : "#3b6fd8"
            marks += "<rect x=\"\(f(x(i) - w / 2))\" y=\"\(f(y(b.value)))\" width=\"\(f(w))\" height=\"\(f(max(0.5, y(0) - y(b.value))))\" fill=\"\(colour)\">"
                + "<title>\(HTML.escape(b.label)): \(HTML.escape(format(b.value))) [\(HTML.escape(format(b.low))) – \(HTML.escape(format(b.high)))]</title></rect>"
            marks += "<line x1=\"\(f(x(i)))\" y1=\"\(f(y(b.low)))\" x2=\"\(f(x(i)))\" y2=\"\(f(y(b.high)))\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>"
            for v in [b.low, b.high] {
                marks += "<line x1=\"\(f(x(i) - 6))\" y1=\"\(f(y(v)))\" x2=\"\(f(x(i) + 6))\" y2=\"\(f(y(v)))\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>"
            }
            marks += "<text x=\"\(f(x(i)))\" y=\"\(f(height - 6))\" text-anchor=\"middle\" font-size=\"11\" fill=\"#5b6475\">\(HTML.escape(b.label))</text>"
        }
        let axis = """
            <line x1="\(f(left))" y1="\(f(y(0)))" x2="\(f(width - 8))" y2="\(f(y(0)))" stroke="#c9cfdb" stroke-width="1"/>\
            <text x="\(f(left - 6))" y="\(f(top + 10))" text-anchor="end" font-size="11" fill="#5b6475">\(HTML.escape(format(maxValue)))</text>\
            <text x="\(f(left - 6))" y="\(f(y(0)))" text-anchor="end" font-size="11" fill="#5b6475">0</text>
            """
        return HTML(rendered: """
            <section class="card chart"><h2>\(HTML.escape(title))</h2>\
            <svg class="chart" viewBox="0 0 \(Int(width)) \(Int(height))" role="img" aria-label="\(HTML.escape(title))" xmlns="http://www.w3.org/2000/svg">\
            \(axis)\(marks)</svg></section>
            """)
    }
}
