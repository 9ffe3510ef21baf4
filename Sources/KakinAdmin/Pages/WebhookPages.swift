import KakinCore
import KakinStorage

/// One configured webhook endpoint as the desk lists it.
struct WebhookSummary: Sendable {
    var id: String
    var url: String
    var types: [String]
    var counts: WebhookEndpointCounts
    /// How long the oldest waiting event has waited (nil when none waits).
    var oldestWaitingAgeMs: Int64?
}

extension Link {
    static func webhooks() -> String { "/admin/webhooks" }

    static func webhook(_ id: String, state: WebhookDeliveryState? = nil) -> String {
        "/admin/webhooks/\(URLText.encode(id))" + (state.map { "?state=\($0.rawValue)" } ?? "")
    }

    static func webhookReplay(_ id: String, eventId: String) -> String {
        "/admin/webhooks/\(URLText.encode(id))/deliveries/\(URLText.encode(eventId))/replay"
    }

    static func webhookReplayDead(_ id: String) -> String { "/admin/webhooks/\(URLText.encode(id))/replay-dead" }
}

extension Fmt {
    static func tone(_ state: WebhookDeliveryState) -> HistoryEntry.Tone {
        switch state {
        case .delivered: return .good
        case .retrying: return .warn
        case .dead: return .bad
        case .pending: return .neutral
        }
    }

    static func age(_ ms: Int64?) -> String {
        guard let ms else { return "—" }
        let s = ms / 1000
        if s < 120 { return "\(s) s" }
        if s < 7_200 { return "\(s / 60) min" }
        if s < 172_800 { return "\(s / 3_600) h" }
        return "\(s / 86_400) days"
    }
}

/// `/admin/webhooks`: each endpoint with its queue.
enum WebhooksPage {
    static func render(session: AdminSession, endpoints: [WebhookSummary]) -> HTML {
        let rows = endpoints.map { e -> HTML in
            let c = e.counts
            return """
                <tr><td><a href="\(Link.webhook(e.id))"><strong>\(e.id)</strong></a><div class="small mono">\(e.url)</div>\
                <div class="small muted">\(e.types.count > 4 ? "\(e.types.count) event types" : e.types.joined(separator: ", "))</div></td>\
                <td class="num">\(Fmt.number(Int64(c.pending + c.notFannedOut)))</td><td class="num">\(Fmt.number(Int64(c.retrying)))</td>\
                <td class="num"><a href="\(Link.webhook(e.id, state: .dead))">\(c.dead > 0 ? Fmt.badge(Fmt.number(Int64(c.dead)), .bad) : "0")</a></td>\
                <td>\(Fmt.age(e.oldestWaitingAgeMs))</td></tr>
                """
        }
        let empty: HTML = endpoints.isEmpty
            ? "<p class=\"muted\">No webhook endpoint is configured (<code>events.webhooks</code>; local mode: <code>KAKIN_WEBHOOK_URL</code>). Events are still in the feed, <code>GET /v1/events</code>.</p>"
            : .empty
        return Layout.page("Webhooks", session: session, """
            <h1>Webhooks</h1>
            <section class="card">
            <p class="small muted">Every change a customer sees is an event, sent to each endpoint at least once, in sequence order per \
            customer; a failed delivery is retried (1 s doubling to 1 h, for 72 h), then dead until replayed.</p>
            <div class="scroll"><table><tr><th>endpoint</th><th class="num">pending</th><th class="num">retrying</th><th class="num">dead</th>\
            <th>oldest waiting</th></tr>\(rows)</table></div>\(empty)
            </section>
            """)
    }
}

/// `/admin/webhooks/{id}`: the endpoint's deliveries, newest first, with their state, attempts and last answer, and a
/// replay button on each (and one for every dead delivery).
public enum WebhookPage {
    static func render(session: AdminSession, endpoint e: WebhookSummary, state: WebhookDeliveryState?, rows: [WebhookDeliveryRow],
                       notice: HTML, nowMs: Int64) -> HTML {
        let all: HTML = "<a class=\"\(state == nil ? "on" : "")\" href=\"\(Link.webhook(e.id))\">all</a>"
        let tabs = [all]
            + WebhookDeliveryState.allCases.map { s -> HTML in
                "<a class=\"\(s == state ? "on" : "")\" href=\"\(Link.webhook(e.id, state: s))\">\(s.rawValue)</a>"
            }
        let back = Link.webhook(e.id, state: state)
        let list = rows.map { d -> HTML in
            var answer = HTML.empty
            if let status = d.lastStatus { answer = answer + "<strong>HTTP \(status)</strong> " }
            if let text = d.lastAnswer { answer = answer + "<span class=\"small\">\(String(text.prefix(200)))</span>" }
            let next: HTML = d.state == .retrying || d.state == .pending ? "<div class=\"small muted\">next \(Fmt.time(d.nextAttemptMs))</div>" : .empty
            return """
                <tr id="d-\(d.eventId)"><td class="when">\(Fmt.time(d.createdAtMs))</td>\
                <td><strong>\(d.type ?? "(event purged)")</strong> · #\(d.sequence)<div class="small mono">\(d.eventId)</div></td>\
                <td><a href="\(Link.customer(d.customerId, anchor: "outbox"))">\(d.customerId)</a></td>\
                <td>\(Fmt.badge(d.state.rawValue, Fmt.tone(d.state)))\(next)</td><td class="num">\(d.attempts)</td>\
                <td>\(answer)\(d.lastAttemptMs.map { ms -> HTML in "<div class=\"small muted\">\(Fmt.time(ms))</div>" } ?? .empty)</td>\
                <td><form method="post" action="\(Link.webhookReplay(e.id, eventId: d.eventId))">\(Form.token(session))\
                <input type="hidden" name="back" value="\(back)"><button class="quiet" type="submit">Replay</button></form></td></tr>
                """
        }
        let replayDead: HTML = e.counts.dead > 0 ? """
            <form class="inline" method="post" action="\(Link.webhookReplayDead(e.id))">\(Form.token(session))\
            <button type="submit">Replay every dead delivery</button>\
            <span class="small muted">once the endpoint takes them again (at most \(WebhookPage.replayDeadMax) at a time)</span></form>
            """ : .empty
        let empty: HTML = rows.isEmpty ? "<p class=\"muted\">None.</p>" : .empty
        let c = e.counts
        return Layout.page("Webhook \(e.id)", session: session, notice: notice, """
            <h1>Webhook \(e.id)</h1>
            <section class="card">
            \(Fmt.facts([Fact("url", e.url), Fact("types", e.types.joined(separator: ", ")),
                         Fact("pending", Fmt.number(Int64(c.pending))), Fact("not fanned out yet", Fmt.number(Int64(c.notFannedOut))),
                         Fact("retrying", Fmt.number(Int64(c.retrying))), Fact("dead", Fmt.number(Int64(c.dead))),
                         Fact("oldest waiting", Fmt.age(e.oldestWaitingAgeMs))]))
            \(replayDead)
            </section>
            <div class="tabs">\(tabs)</div>
            <section class="card">
            <p class="small muted">Newest \(WebhookPage.rowsMax) first. pending: not tried yet (or replayed) · retrying: failed, due again · \
            delivered: answered 2xx · dead: failed until its deadline; replay it once the endpoint is fixed (receivers deduplicate by \
            <code>Kakin-Event-Id</code>).</p>
            <div class="scroll"><table><tr><th>created</th><th>event</th><th>customer</th><th>state</th><th class="num">attempts</th>\
            <th>last answer</th><th></th></tr>\(list)</table></div>\(empty)
            </section>
            """)
    }

}

/// The customer page's list of the customer's events (the ones sent to webhooks and the feed), newest first.
enum CustomerEventsSection {
    static func render(customerId: String, events: [OutboxEventRow]) -> HTML {
        let rows = events.reversed().map { e -> HTML in
            """
            <tr><td class="num">\(e.sequence)</td><td><strong>\(e.type)</strong><div class="small mono">\(e.eventId)</div></td>\
            <td class="when">\(Fmt.time(e.createdAtMs))</td></tr>
            """
        }
        let empty: HTML = events.isEmpty ? "<p class=\"muted\">No events yet.</p>" : .empty
        return """
            <section class="card" id="outbox"><h2>Events sent to your backend</h2>
            <p class="small muted">The latest \(rowsMax), as webhooks and the feed (<code>GET /v1/customers/\(customerId)/events</code>) \
            carry them; the status's version is the last sequence. <a href="\(Link.webhooks())">Webhooks</a></p>
            <div class="scroll"><table><tr><th class="num">sequence</th><th>type</th><th>when</th></tr>\(rows)</table></div>\(empty)
            </section>
            """
    }
}
