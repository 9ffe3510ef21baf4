import HTTPServer
import KakinCore
import KakinStorage

extension SupportDesk {
    /// `/admin/external-purchase-reports?state=failed|pending|sent`: Apple's external purchase reports, with the errors
    /// Apple gave for a refused one (kept until Kakin resubmits it fixed, with its requestIdentifier).
    public func externalReportsPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let state = request.query["state"] ?? "failed"
            let list = try await services.externalPurchases.reporter.reports(state: state, limit: 200)
            return Layout.response(ExternalReportsPage.render(session: session, state: state, reports: list["reports"]?.arrayValue ?? []))
        }
    }
}

enum ExternalReportsPage {
    static let states = ["failed", "pending", "sent"]

    static func render(session: AdminSession, state: String, reports: [JSONValue]) -> HTML {
        let tabs = states.map { s -> HTML in "<a class=\"\(s == state ? "on" : "")\" href=\"/admin/external-purchase-reports?state=\(s)\">\(s)</a>" }
        let rows = reports.map { r -> HTML in
            let errors = (r["errors"]?.arrayValue ?? []).map { e -> String in
                let code = e["errorCode"]?.int64Value.map(String.init) ?? "?"
                let line = e["lineItemId"]?.stringValue.map { " (line \($0))" } ?? ""
                return "\(code) \(e["fieldName"]?.stringValue ?? ""): \(e["errorMessage"]?.stringValue ?? "")\(line)"
            }
            let listed = r["state"]?.stringValue ?? ""
            return """
                <tr><td class="when">\(r["createdAt"]?.stringValue ?? "")</td>\
                <td class="mono small">\(r["externalPurchaseId"]?.stringValue ?? "")<div class="muted">\(r["bundleId"]?.stringValue ?? "")</div></td>\
                <td>\(r["status"]?.stringValue ?? "")<div class="small muted">\(String(r["lineItems"]?.int64Value ?? 0)) line items</div></td>\
                <td>\(Fmt.badge(listed, listed == "failed" ? .bad : listed == "sent" ? .good : .neutral))\
                <div class="small">failures \(String(r["failures"]?.int64Value ?? 0))</div></td>\
                <td class="small">\(errors.joined(separator: "; "))</td><td class="mono small">\(r["requestIdentifier"]?.stringValue ?? "")</td></tr>
                """
        }
        let empty: HTML = reports.isEmpty ? "<p class=\"muted\">None.</p>" : .empty
        return Layout.page("External purchase reports", session: session, """
            <h1>External purchase reports</h1>
            <div class="tabs">\(tabs)</div>
            <section class="card">
            <p class="small muted">Reports of Apple external purchase tokens (External Purchase Server API). failed: Apple refused \
            line items; Kakin resubmits with the same requestIdentifier once it can fix them (a date in Apple's future), or once the \
            purchase or the app's tax settings are corrected. pending: waiting to be sent or retried (429, 5xx). sent: accepted.</p>
            <div class="scroll"><table><tr><th>created</th><th>token</th><th>report</th><th>state</th><th>Apple's errors</th>\
            <th>requestIdentifier</th></tr>\(rows)</table></div>\(empty)
            </section>
            """)
    }
}
