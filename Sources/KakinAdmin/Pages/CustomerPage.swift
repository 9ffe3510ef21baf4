import KakinCore
import KakinStorage

/// Everything about one customer: status as the app sees it, each subscription's history, other purchases,
/// the wallet and its ledger, the timeline, and the actions support can take (each recorded with who did it).
enum CustomerPage {
    /// - Parameter formKey: drawn when the page is shown: the grant's idempotency key, and (with the original
    ///   transaction ID) each extension's request identifier, so a form sent twice acts once.
    /// - Parameter outboxEvents: the customer's latest events, oldest first (`CustomerEventsSection`).
    static func render(session: AdminSession, view v: CustomerView, notice: HTML, formKey: String, outboxEvents: [OutboxEventRow] = []) -> HTML {
        let c = v.customer
        let status = v.status["status"]?.stringValue ?? "?"
        let statusTone: HistoryEntry.Tone = status == "active" ? .good : status == "inactive" ? .warn : .neutral
        var entitlements: [Fact] = []
        for nc in v.status["nonConsumables"]?.arrayValue ?? [] {
            entitlements.append(Fact("non-consumable", "\(nc["productId"]?.stringValue ?? "?") (\(nc["ownership"]?.stringValue ?? "?"))"))
        }
        for nr in v.status["nonRenewing"]?.arrayValue ?? [] {
            entitlements.append(Fact("non-renewing", "\(nr["productId"]?.stringValue ?? "?") until \(nr["expiresAt"]?.stringValue ?? "?")"
                                     + (nr["active"]?.boolValue == true ? " (active)" : "")))
        }
        entitlements += Apple2026Facts.customer(v.status)
        for (group, eligible) in (v.status["eligibility"]?["introductoryOffer"]?.objectValue ?? [:]).sorted(by: { $0.key < $1.key }) {
            entitlements.append(Fact("intro offer in \(group)", eligible.boolValue == true ? "eligible" : "not eligible"))
        }
        let overview: HTML = """
            <section class="card" id="status"><h2>Status as the app sees it \(Fmt.badge(status, statusTone))</h2>
            \(Fmt.facts([Fact("customer", c.customerId), Fact("appAccountToken", c.appAccountToken),
                         Fact("created", Fmt.time(c.createdAtMs))] + entitlements))
            \(Fmt.payload(v.status, jws: nil, summary: "GET /v1/customers/\(c.customerId)"))
            </section>
            """
        let wallet = walletSection(session: session, v: v, grantKey: formKey)
        let actions: HTML = """
            <section class="card" id="actions"><h2>Actions</h2>
            <form class="inline" method="post" action="\(Link.customer(c.customerId))/restore">\(Form.token(session))\
            <button type="submit">Restore from the App Store</button>\
            <span class="small muted">pulls every transaction of this customer's purchases and applies what is missing</span></form>
            <p class="small muted">Extend a subscription: in its section below (at the App Store, 1 to 90 days).</p>
            </section>
            """
        let subscriptions = v.subscriptions.map { subscriptionSection(session: session, customerId: c.customerId, formKey: formKey, $0) }
        let purchases: HTML = v.purchases.isEmpty ? .empty : """
            <section class="card" id="purchases"><h2>Other purchases</h2><div class="scroll"><table>\
            <tr><th>purchased</th><th>what</th><th></th></tr>\(v.purchases.map(historyRow))</table></div></section>
            """
        let notifications: HTML = v.otherNotifications.isEmpty ? .empty : """
            <section class="card" id="notifications"><h2>Notifications about these purchases</h2><div class="scroll"><table>\
            <tr><th>when (App Store)</th><th>what</th><th></th></tr>\
            \(v.otherNotifications.map { historyRow($0, session: session, customerId: c.customerId) })</table></div></section>
            """
        return Layout.page("Customer \(c.customerId)", session: session, notice: notice, """
            <h1>Customer \(c.customerId)</h1>
            <div class="grid">\(overview)\(actions)</div>
            \(wallet)
            \(subscriptions)
            \(v.playChains.map { playChainSection($0.chainId, $0.orders) })
            \(purchases)
            \(notifications)
            \(timelineSection(v))
            \(CustomerEventsSection.render(customerId: c.customerId, events: outboxEvents))
            """)
    }

    static func walletSection(session: AdminSession, v: CustomerView, grantKey: String) -> HTML {
        let c = v.customer.customerId
        let rows = v.ledger.entries.map { e -> HTML in
            var what = e.item ?? ""
            if let r = e.recipient { what += (what.isEmpty ? "" : " → ") + r }
            return """
                <tr><td class="when">\(Fmt.time(e.atMs))</td><td>\(e.kind)</td><td class="num">\(signed(e.paid))</td>\
                <td class="num">\(signed(e.free))</td><td class="num">\(e.balanceAfter.paid) / \(e.balanceAfter.free)</td>\
                <td class="small">\(what)<div class="mono muted">\(e.reference)</div></td></tr>
                """
        }
        var pager: [HTML] = []
        if v.ledgerCursor != nil { pager.append("<a href=\"\(Link.customer(c, anchor: "wallet"))\">Newest</a>") }
        if let next = v.ledger.nextCursor {
            pager.append("<a href=\"\(Link.customer(c, anchor: "wallet", query: [("ledger", next)]))\">Older →</a>")
        }
        return """
            <section class="card" id="wallet"><h2>Wallet</h2>
            <p><span class="big">\(Fmt.number(v.wallet.total))</span> coins · paid \(Fmt.number(v.wallet.paid)) · free \(Fmt.number(v.wallet.free))</p>
            <form class="inline" method="post" action="\(Link.customer(c))/grant">\(Form.token(session))\
            <input type="hidden" name="key" value="\(grantKey)">\
            <label>Free coins<input type="number" name="amount" min="1" max="\(WalletRules.amountMax)" required></label>\
            <label>Reason<input name="reason" required maxlength="255" placeholder="e.g. apology for KKN-3004"></label>\
            <button type="submit">Grant</button></form>
            <h3>Ledger</h3>
            <div class="scroll"><table><tr><th>when</th><th>kind</th><th class="num">paid</th><th class="num">free</th>\
            <th class="num">after (paid / free)</th><th>item · reference</th></tr>\(rows)</table></div>
            <div class="pager">\(pager)</div>
            </section>
            """
    }

    /// A Google Play chain's history: each order (the first, renewals `..N`, a linked token's after a plan change) with the
    /// token it was read from, when Kakin last read it, and what Play took back.
    static func playChainSection(_ chainId: String, _ orders: [PlayOrderRow]) -> HTML {
        let rows = orders.map { o -> HTML in
            let refund = o.revocation.map { r in
                "refunded \(r["atMs"]?.int64Value.map(Fmt.time) ?? "?"): \(r["refund"]?.stringValue ?? "?")" + (r["units"]?.intValue.map { " \($0) units" } ?? "")
            } ?? ""
            return "<tr><td>\(o.orderId)</td><td><code>\(o.purchaseToken)</code></td><td>\(Fmt.time(o.readAtMs))</td><td>\(refund)</td></tr>"
        }
        return """
            <section class="card" id="play-\(chainId)"><h2>Google Play chain \(chainId)</h2><div class="scroll"><table>\
            <tr><th>order</th><th>purchase token</th><th>last read</th><th></th></tr>\(rows)</table></div></section>
            """
    }

    static func signed(_ n: Int64) -> String { n > 0 ? "+\(n)" : String(n) }

    static func subscriptionSection(session: AdminSession, customerId: String, formKey: String, _ s: SubscriptionView) -> HTML {
        var facts: [Fact] = [Fact("original transaction", s.originalTransactionId)]
        var badge = HTML.empty
        if let st = s.status {
            let state = st["state"]?.stringValue ?? "?"
            let tone: HistoryEntry.Tone = ["subscribed": .good, "inGracePeriod": .warn, "inBillingRetryPeriod": .warn][state] ?? .bad
            badge = Fmt.badge(state, tone)
            facts.append(Fact("product", st["productId"]?.stringValue ?? s.productId))
            if let e = st["expiresAt"]?.stringValue { facts.append(Fact("expires", e)) }
            if let g = st["gracePeriodExpiresAt"]?.stringValue { facts.append(Fact("grace until", g)) }
            if let w = st["willAutoRenew"]?.boolValue {
                facts.append(Fact("auto-renew", w ? "on (\(st["autoRenewProductId"]?.stringValue ?? "?"))" : "off"))
            }
            if let o = st["offer"], !o.isNull { facts.append(Fact("current offer", "\(o["type"]?.stringValue ?? "?") \(o["id"]?.stringValue ?? "")")) }
            if let p = st["pendingOffer"], !p.isNull { facts.append(Fact("next renewal's offer", "\(p["type"]?.stringValue ?? "?") \(p["id"]?.stringValue ?? "")")) }
            if let r = st["expirationReason"]?.stringValue { facts.append(Fact("expiration reason", r)) }
            facts += Apple2026Facts.subscription(st)
            facts.append(Fact("ownership", st["ownership"]?.stringValue ?? "?"))
        } else {
            facts.append(Fact("product", s.productId))
        }
        let renewal: HTML = s.renewalInfo == nil ? .empty
            : "<h3>Renewal info (newest)</h3>\(Fmt.payload(s.renewalInfo, jws: s.renewalInfoJWS))"
        return """
            <section class="card" id="sub-\(s.originalTransactionId)"><h2>Subscription \(s.productId) \(badge)</h2>
            \(Fmt.facts(facts))
            \(extendForm(session: session, customerId: customerId, originalTransactionId: s.originalTransactionId, formKey: formKey))
            \(renewal)
            <h3>History</h3>
            <div class="scroll"><table><tr><th>when (App Store)</th><th>what</th><th></th></tr>\
            \(s.history.map { historyRow($0, session: session, customerId: customerId) })</table></div>
            </section>
            """
    }

    /// Extend a Subscription Renewal Date, as Apple takes it: 1 to 90 days and one of its four reasons.
    static func extendForm(session: AdminSession, customerId: String, originalTransactionId otid: String, formKey: String) -> HTML {
        let reasons = [("customerSatisfaction", "customer satisfaction"), ("serviceIssueOrOutage", "service issue or outage"),
                       ("other", "other"), ("undeclared", "undeclared")]
        let options = reasons.map { r -> HTML in "<option value=\"\(r.0)\">\(r.1)</option>" }
        return """
            <form class="inline extend" method="post" action="\(Link.customer(customerId))/subscriptions/\(URLText.encode(otid))/extend">\
            \(Form.token(session))<input type="hidden" name="key" value="\(formKey)-\(otid)">\
            <label>Extend by (days)<input type="number" name="days" min="1" max="90" required></label>\
            <label>Reason<select name="reason">\(options)</select></label>\
            <button type="submit">Extend at the App Store</button>\
            <span class="small muted">moves the renewal date; Apple allows two extensions a year</span></form>
            """
    }

    static func historyRow(_ e: HistoryEntry) -> HTML { historyRow(e, session: nil, customerId: nil) }

    static func historyRow(_ e: HistoryEntry, session: AdminSession?, customerId: String?) -> HTML {
        var action = HTML.empty
        if let uuid = e.notificationUUID, let session, let customerId {
            action = """
                <form method="post" action="\(Link.replay(uuid))">\(Form.token(session))\
                <input type="hidden" name="back" value="\(Link.customer(customerId))"><button class="quiet" type="submit">Re-apply</button></form>
                """
        }
        let id: HTML = e.anchor.map { " id=\"\($0)\"" } ?? .empty
        return """
            <tr\(id)><td class="when">\(Fmt.time(e.atMs))</td><td>\(Fmt.badge(e.title, e.tone))\(Fmt.facts(e.facts))\
            \(Fmt.payload(e.decoded, jws: e.jws))</td><td>\(action)</td></tr>
            """
    }

    static func timelineSection(_ v: CustomerView) -> HTML {
        let c = v.customer.customerId
        let rows = v.timeline.items.map { item -> HTML in
            let tone: HistoryEntry.Tone = item.source == .error ? .bad : item.kind.hasPrefix("admin.") ? .warn : .neutral
            let id: HTML = item.source == .error ? " id=\"err-\(item.keyText)\"" : .empty
            return """
                <tr\(id)><td class="when">\(Fmt.time(item.atMs))</td><td><span class="kind">\(item.source.name)</span> \
                \(Fmt.badge(item.kind, tone))<div class="mono small">\(item.reference ?? "")</div></td>\
                <td class="small">\(summary(item.detail))</td></tr>
                """
        }
        var pager: [HTML] = []
        if v.timelineCursor != nil { pager.append("<a href=\"\(Link.customer(c, anchor: "timeline"))\">Newest</a>") }
        if let next = v.timeline.nextCursor?.token {
            pager.append("<a href=\"\(Link.customer(c, anchor: "timeline", query: [("events", next)]))\">Older →</a>")
        }
        return """
            <section class="card" id="timeline"><h2>Timeline</h2>
            <p class="small muted">Everything recorded for this customer on Kakin's clock: transactions as first seen, notifications as \
            received, ledger entries, purchases applied, refunds, transfers, support actions (with who did them) and errors answered \
            (with their IDs). <a href="/v1/admin/customers/\(URLText.encode(c))/events">JSON</a></p>
            <div class="scroll"><table><tr><th>when</th><th>what</th><th>detail</th></tr>\(rows)</table></div>
            <div class="pager">\(pager)</div>
            </section>
            """
    }

    /// A timeline item's detail as short `key: value` text (objects flattened one level).
    static func summary(_ detail: JSONValue) -> String {
        guard let o = detail.objectValue else { return detail.isNull ? "" : detail.jsonString }
        return o.keys.sorted().compactMap { k -> String? in
            guard let v = o[k], !v.isNull else { return nil }
            switch v {
            case .string(let s): return "\(k): \(s)"
            case .object, .array: return "\(k): \(v.jsonString)"
            default: return "\(k): \(v.jsonString)"
            }
        }.joined(separator: " · ")
    }
}

extension TimelineItem {
    var keyText: String {
        switch key {
        case .seq(let n): return String(n)
        case .text(let s): return s
        }
    }
}
