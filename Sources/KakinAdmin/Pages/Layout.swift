import HTTPServer
import KakinCore
import KakinStorage

/// The frame of every `/admin/` page and the headers every answer carries: no script at all, styles only
/// from Kakin's own stylesheet, forms only to Kakin, never framed, never cached, no referrer.
enum Layout {
    static let contentSecurityPolicy =
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

    static func securityHeaders(_ headers: inout HTTPHeaders) {
        headers.add("Content-Security-Policy", contentSecurityPolicy)
        headers.add("X-Content-Type-Options", "nosniff")
        headers.add("X-Frame-Options", "DENY")
        headers.add("Referrer-Policy", "no-referrer")
        headers.add("Cache-Control", "no-store")
    }

    static func response(_ html: HTML, status: Int = 200, cookies: [String] = []) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/html; charset=utf-8")
        securityHeaders(&headers)
        for c in cookies { headers.add("Set-Cookie", c) }
        return HTTPResponse(status: status, headers: headers, body: html.bytes)
    }

    /// 303 See Other: after a form, the browser GETs the page (a reload never repeats the action).
    static func redirect(_ location: String, cookies: [String] = []) -> HTTPResponse {
        var headers = HTTPHeaders()
        securityHeaders(&headers)
        headers.add("Location", location)
        for c in cookies { headers.add("Set-Cookie", c) }
        return HTTPResponse(status: 303, headers: headers)
    }

    /// Every page of the desk but the search (the box) and the customer pages (from a search), in the bar on top of
    /// each page; `DeskNavigationTests` checks each page route of the desk is here.
    static let navigation: [(title: String, path: String)] = [
        ("Notifications", "/admin/notifications?state=dead"), ("Unused balance", "/admin/reports/unused-balance"),
        ("Webhooks", "/admin/webhooks"), ("Numbers", "/admin/metrics"), ("External reports", "/admin/external-purchase-reports"),
        ("Consent", "/admin/consent-rescissions"), ("Imports", "/admin/imports"), ("Offerings", "/admin/offerings"), ("Audit", "/admin/audit"),
    ]

    static func page(_ title: String, session: AdminSession?, query: String = "", notice: HTML = .empty, _ body: HTML) -> HTML {
        var who = HTML.empty
        if let session {
            if session.tokenSHA256.isEmpty {
                who = "<div class=\"who\">local mode · no sign-in</div>"
            } else {
                who = """
                    <div class="who"><span>\(session.actor)</span>\
                    <form method="post" action="/admin/sign-out">\(Form.token(session))<button class="quiet" type="submit">Sign out</button></form></div>
                    """
            }
        }
        let header: HTML = session == nil ? """
            <header class="top"><span class="brand">Kakin support</span></header>
            """ : """
            <header class="top">
            <a class="brand" href="/admin/">Kakin support</a>
            <form class="search" method="get" action="/admin/search" role="search">\
            <input type="search" name="q" value="\(query)" placeholder="Customer, order, transaction, KKN-… request ID, token, process ID" \
            aria-label="Search" autocomplete="off" spellcheck="false">\
            <button type="submit">Search</button></form>
            <nav>\(navigation.map { link -> HTML in "<a href=\"\(link.path)\">\(link.title)</a>" } as [HTML])</nav>
            \(who)
            </header>
            """
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(title) · Kakin support</title><link rel="stylesheet" href="/admin/assets/admin.css"></head>
            <body>\(header)<main>\(notice)\(body)</main></body></html>
            """
    }

    static func errorPage(_ error: KakinError, requestId: String, session: AdminSession?) -> HTTPResponse {
        let body: HTML = """
            <h1>\(error.kind.id) · \(error.kind.code)</h1>
            <section class="card"><p>\(error.message)</p>
            <p class="muted small">Request <code>\(requestId)</code></p>
            <p><a href="/admin/">Back to the search</a></p></section>
            """
        return response(page("Error \(error.kind.id)", session: session, body), status: error.httpStatus)
    }
}

/// Paths the pages link to; every variable part percent-encoded (then HTML-escaped where inserted).
enum Link {
    static func customer(_ id: String, anchor: String? = nil, query: [(String, String)] = []) -> String {
        var s = "/admin/customers/\(URLText.encode(id))"
        if !query.isEmpty { s += "?" + query.map { "\($0.0)=\(URLText.encode($0.1))" }.joined(separator: "&") }
        if let anchor { s += "#" + URLText.encode(anchor) }
        return s
    }

    static func search(_ q: String) -> String { "/admin/search?q=\(URLText.encode(q))" }

    static func notifications(_ state: InboxState, cursor: String? = nil) -> String {
        "/admin/notifications?state=\(state.rawValue)" + (cursor.map { "&cursor=\(URLText.encode($0))" } ?? "")
    }

    static func replay(_ uuid: String) -> String { "/admin/notifications/\(URLText.encode(uuid))/replay" }

    static func report(_ asOf: String) -> String { "/admin/reports/unused-balance?asOf=\(URLText.encode(asOf))" }

    static func reportCSV(_ asOf: String) -> String { "/admin/reports/unused-balance.csv?asOf=\(URLText.encode(asOf))" }

    /// A `back` value from a form is followed only when it is a page of this site.
    static func safeBack(_ s: String?) -> String? {
        guard let s, s.hasPrefix("/admin/"), !s.hasPrefix("//"), !s.contains("\\"), !s.contains("\r"), !s.contains("\n") else { return nil }
        return s
    }
}

enum Form {
    static func token(_ session: AdminSession) -> HTML { "<input type=\"hidden\" name=\"csrf\" value=\"\(session.csrfToken)\">" }
}

enum Fmt {
    static func time(_ ms: Int64) -> String { Timestamp.rfc3339(ms).replacingAll("T", with: " ").replacingAll("Z", with: " UTC") }

    static func facts(_ facts: [Fact]) -> HTML {
        guard !facts.isEmpty else { return .empty }
        return "<dl class=\"facts\">\(facts.map { f -> HTML in "<dt>\(f.label)</dt><dd>\(f.value)</dd>" })</dl>"
    }

    static func badge(_ text: String, _ tone: HistoryEntry.Tone) -> HTML {
        let cls: String
        switch tone {
        case .good: cls = "badge good"
        case .warn: cls = "badge warn"
        case .bad: cls = "badge bad"
        case .neutral: cls = "badge"
        }
        return "<span class=\"\(cls)\">\(text)</span>"
    }

    static func tone(_ state: InboxState) -> HistoryEntry.Tone {
        switch state {
        case .applied: return .good
        case .retrying: return .warn
        case .dead: return .bad
        case .received, .ignored: return .neutral
        }
    }

    /// The signed payload one click away: decoded JSON, then the JWS as stored.
    static func payload(_ decoded: JSONValue?, jws: String?, summary: String = "Signed payload") -> HTML {
        guard decoded != nil || jws != nil else { return .empty }
        var inner = HTML.empty
        if let decoded { inner = inner + "<pre>\(decoded.prettyString())</pre>" }
        if let jws { inner = inner + "<textarea class=\"jws\" readonly aria-label=\"Signed payload (JWS)\">\(jws)</textarea>" }
        return "<details><summary>\(summary)</summary>\(inner)</details>"
    }

    static func number(_ n: Int64) -> String {
        let s = String(n.magnitude)
        var out = ""
        for (i, c) in s.enumerated() {
            if i > 0, (s.count - i) % 3 == 0 { out += "," }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }
}
