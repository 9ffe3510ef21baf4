import KakinCore
import KakinStorage

enum SignInPage {
    static func render(formToken: String, problem: String?) -> HTML {
        let notice: HTML = problem.map { "<div class=\"problem\">\($0)</div>" } ?? .empty
        return Layout.page("Sign in", session: nil, notice: notice, """
            <h1>Sign in</h1>
            <section class="card">
            <form class="stack" method="post" action="/admin/sign-in">
            <input type="hidden" name="csrf" value="\(formToken)">
            <label>Your name (recorded with everything you do)<input name="name" required maxlength="64" autocomplete="name"></label>
            <label>Admin API key<input name="key" type="password" required autocomplete="current-password"></label>
            <button type="submit">Sign in</button>
            </form>
            <p class="muted small">Any <code>admin</code>-scope API key of this server. The session lasts 8 hours.</p>
            </section>
            """)
    }
}

enum HomePage {
    static func render(session: AdminSession, depth: [InboxDepth], nowMs: Int64, notice: HTML = .empty) -> HTML {
        let rows = depth.map { d -> HTML in
            let age = d.oldestReceivedMs.map { Fmt.time($0) } ?? "—"
            return """
                <tr><td><a href="\(Link.notifications(d.state))">\(Fmt.badge(d.state.rawValue, Fmt.tone(d.state)))</a></td>\
                <td class="num">\(Fmt.number(d.count))</td><td class="when">\(age)</td></tr>
                """
        }
        return Layout.page("Support desk", session: session, notice: notice, """
            <h1>Support desk</h1>
            <section class="card">
            <h2>Find a purchase</h2>
            <form class="inline" method="get" action="/admin/search">
            <label>Search<input type="search" name="q" size="40" autofocus></label><button type="submit">Search</button>
            </form>
            <p class="muted small">One box for all of these: customer ID · order ID from Apple's receipt e-mail · transaction or original \
            transaction ID · error ID with its request ID (<code>KKN-3004 req_…</code>) · request ID · appAccountToken · purchase-process ID.</p>
            </section>
            <div class="grid">
            <section class="card"><h2>Notification inbox</h2>
            <div class="scroll"><table><tr><th>state</th><th class="num">count</th><th>oldest received</th></tr>\(rows)</table></div>
            <p class="small"><a href="\(Link.notifications(.applied))">Applied</a> · <a href="\(Link.notifications(.ignored))">Ignored</a></p>
            </section>
            <section class="card"><h2>Reports</h2>
            <p><a href="/admin/reports/unused-balance">Unused paid-coin balance</a> (Payment Services Act base dates)</p>
            </section>
            </div>
            """)
    }
}

enum SearchPage {
    static func render(session: AdminSession, outcome: SearchOutcome) -> HTML {
        let notes = outcome.notes.map { n -> HTML in "<div class=\"notice\">\(n)</div>" }
        let hits = outcome.hits.map { h -> HTML in
            var link = HTML.empty
            if let c = h.customerId {
                link = "<p><a href=\"\(Link.customer(c, anchor: h.anchor))\">Open customer \(c)</a></p>"
            }
            return """
                <li><div class="kind">\(h.kind.rawValue)</div><h3>\(h.title)</h3>\(Fmt.facts(h.facts))\(link)</li>
                """
        }
        let customers = outcome.customers
        var summary: HTML = "<p class=\"muted\">\(outcome.hits.count) found for <code>\(outcome.query)</code>.</p>"
        if outcome.hits.isEmpty, !outcome.query.isEmpty { summary = "<p>Nothing found for <code>\(outcome.query)</code>.</p>" }
        if customers.count == 1 {
            summary = summary + "<p><a href=\"\(Link.customer(customers[0]))\">Go to customer \(customers[0])</a></p>"
        }
        return Layout.page("Search", session: session, query: outcome.query, """
            <h1>Search</h1>
            \(notes)
            <section class="card">\(summary)<ul class="hits">\(hits)</ul></section>
            """)
    }
}

enum NotificationsPage {
    static func render(session: AdminSession, state: InboxState, items: [StoredNotification], next: String?, notice: HTML) -> HTML {
        let tabs = InboxState.allCases.map { s -> HTML in
            "<a class=\"\(s == state ? "on" : "")\" href=\"\(Link.notifications(s))\">\(s.rawValue)</a>"
        }
        let back = Link.notifications(state)
        let rows = items.map { n -> HTML in
            let content = NotificationContent(jws: n.jws)
            var about: [String] = []
            if let tx = content.transaction { about.append("\(tx.productId) · transaction \(tx.transactionId)") }
            let customer: HTML = n.customerId.map { "<a href=\"\(Link.customer($0, anchor: "n-\(n.notificationUUID)"))\">\($0)</a>" }
                ?? "<span class=\"muted\">not linked</span>"
            return """
                <tr id="n-\(n.notificationUUID)"><td class="when">\(Fmt.time(n.receivedAtMs))</td>\
                <td><strong>\(n.notificationType)</strong>\(n.subtype.map { " · \($0)" })<div class="small muted">\(about.joined(separator: "; "))</div>\
                <div class="small mono">\(n.notificationUUID)</div></td>\
                <td>\(Fmt.badge(n.state.rawValue, Fmt.tone(n.state)))<div class="small">attempts \(n.attempts)</div></td>\
                <td class="small">\(n.lastError ?? "")</td><td>\(customer)</td>\
                <td><form method="post" action="\(Link.replay(n.notificationUUID))">\(Form.token(session))\
                <input type="hidden" name="back" value="\(back)"><button class="quiet" type="submit">Replay</button></form></td></tr>
                """
        }
        let replayAll: HTML = state == .dead && !items.isEmpty ? """
            <form class="inline" method="post" action="/admin/notifications/replay-dead">\(Form.token(session))\
            <button type="submit">Replay every dead notification</button>\
            <span class="small muted">after fixing the cause (e.g. a product missing from the config)</span></form>
            """ : .empty
        let pager: HTML = next.map { "<div class=\"pager\"><a href=\"\(Link.notifications(state, cursor: $0))\">Older →</a></div>" } ?? .empty
        let empty: HTML = items.isEmpty ? "<p class=\"muted\">None.</p>" : .empty
        return Layout.page("Notifications", session: session, notice: notice, """
            <h1>Notification inbox</h1>
            <div class="tabs">\(tabs)</div>
            <section class="card">
            <p class="small muted">received: stored, not yet processed · retrying: failed, due again with backoff · applied · \
            ignored: nothing to apply (TEST, summaries) · dead: failed every attempt or can never apply as it is; replay it once the cause is fixed.</p>
            \(replayAll)
            <div class="scroll"><table><tr><th>received</th><th>notification</th><th>state</th><th>last error</th><th>customer</th><th></th></tr>\
            \(rows)</table></div>\(empty)\(pager)
            </section>
            """)
    }
}

enum ReportPage {
    static func render(session: AdminSession, report: UnusedBalanceReport, asOf: String) -> HTML {
        let rows = report.totals.map { t -> HTML in
            let over = t.currency == "JPY" && t.value > UnusedBalanceReport.reportingThresholdYen
            let flag: HTML = t.currency == "JPY"
                ? (over ? Fmt.badge("over ¥10,000,000: report and deposit half (¥\(Fmt.number(t.value / 2)))", .bad)
                        : Fmt.badge("under ¥10,000,000", .good))
                : "<span class=\"muted small\">threshold applies to JPY</span>"
            return """
                <tr><td>\(t.bundleId)</td><td>\(t.source)</td><td>\(t.currency)</td><td class="num">\(Fmt.number(t.unusedPaidCoins))</td>\
                <td class="num big">\(Fmt.number(t.value))</td><td class="num">\(Fmt.number(t.customers))</td>\
                <td class="small">\(t.timeZone)</td><td>\(flag)</td></tr>
                """
        }
        let empty: HTML = report.totals.isEmpty ? "<p class=\"muted\">No unused paid coins at the end of that day.</p>" : .empty
        return Layout.page("Unused balance", session: session, """
            <h1>Unused paid-coin balance</h1>
            <section class="card">
            <form class="inline" method="get" action="/admin/reports/unused-balance">
            <label>As of the end of<input type="date" name="asOf" value="\(asOf)" required></label><button type="submit">Compute</button>
            </form>
            <p class="small muted">Paid coins not yet used at the end of that day in each app's reporting time zone, valued at what \
            customers paid (first in, first out per customer; free coins never count; refunds take back their own coins). \
            Base dates under the Payment Services Act: March 31 and September 30.</p>
            </section>
            <section class="card">
            <h2>As of \(report.asOf) (\(report.timeZone))</h2>
            <div class="scroll"><table><tr><th>app</th><th>sold through</th><th>currency</th><th class="num">unused paid coins</th><th class="num">value</th>\
            <th class="num">customers</th><th>time zone</th><th>¥10 million threshold</th></tr>\(rows)</table></div>\(empty)
            <p><a href="\(Link.reportCSV(report.asOf))">Per-customer CSV for the auditor</a> · \
            <a href="/v1/admin/reports/unused-balance?asOf=\(URLText.encode(report.asOf))">JSON</a></p>
            </section>
            """)
    }
}
