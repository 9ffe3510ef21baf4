import KakinCore
import KakinEvents

/// Webhook delivery in `/metrics`, per configured endpoint (label `endpoint`, the config's id):
/// - gauges read from the database at scrape time (every process reports the same; one indexed read per endpoint):
///   `kakin_webhook_backlog` (pending and retrying deliveries plus events not fanned out yet, the latter counted up to
///   `KakinStore.fanOutLagCountMax`), `kakin_webhook_deliveries{state}` (pending, retrying, dead),
///   `kakin_webhook_dead`, `kakin_webhook_oldest_pending_age_seconds` (0 when nothing waits);
/// - this process: `kakin_webhook_in_flight` and `kakin_webhook_attempts_total{outcome}` (delivered, retrying, dead).
/// Nothing when no endpoint is configured.
extension KakinApp {
    func webhookMetricsText() async -> String {
        let worker = services.webhooks
        let endpoints = worker.endpoints.map(\.id)
        if endpoints.isEmpty { return "" }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) { out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n" }
        if let counts = try? await store.webhookCounts(endpointIds: endpoints) {
            family("kakin_webhook_backlog", "gauge", "Events waiting for the endpoint: pending and retrying deliveries plus events not fanned out yet.")
            for c in counts { out += "kakin_webhook_backlog{endpoint=\"\(c.endpointId)\"} \(c.backlog)\n" }
            family("kakin_webhook_deliveries", "gauge", "The endpoint's deliveries waiting (pending, retrying) or given up on (dead).")
            for c in counts {
                out += "kakin_webhook_deliveries{endpoint=\"\(c.endpointId)\",state=\"pending\"} \(c.pending)\n"
                out += "kakin_webhook_deliveries{endpoint=\"\(c.endpointId)\",state=\"retrying\"} \(c.retrying)\n"
                out += "kakin_webhook_deliveries{endpoint=\"\(c.endpointId)\",state=\"dead\"} \(c.dead)\n"
            }
            family("kakin_webhook_dead", "gauge", "Deliveries given up on (dead) and kept until replayed or past retention.")
            for c in counts { out += "kakin_webhook_dead{endpoint=\"\(c.endpointId)\"} \(c.dead)\n" }
            family("kakin_webhook_oldest_pending_age_seconds", "gauge", "Age of the oldest event waiting for the endpoint (0 when none).")
            for c in counts {
                let ms = worker.oldestWaitingAgeMs(c) ?? 0
                out += "kakin_webhook_oldest_pending_age_seconds{endpoint=\"\(c.endpointId)\"} \(Double(ms) / 1000)\n"
            }
        }
        let inFlight = worker.inFlight
        family("kakin_webhook_in_flight", "gauge", "Deliveries this process is sending to the endpoint now.")
        for id in endpoints { out += "kakin_webhook_in_flight{endpoint=\"\(id)\"} \(inFlight[id] ?? 0)\n" }
        let attempts = worker.attemptCounts
        family("kakin_webhook_attempts_total", "counter", "Delivery attempts this process made, by what they came to.")
        for id in endpoints {
            let a = attempts[id] ?? WebhookDeliveryWorker.AttemptCounts()
            out += "kakin_webhook_attempts_total{endpoint=\"\(id)\",outcome=\"delivered\"} \(a.delivered)\n"
            out += "kakin_webhook_attempts_total{endpoint=\"\(id)\",outcome=\"retrying\"} \(a.retrying)\n"
            out += "kakin_webhook_attempts_total{endpoint=\"\(id)\",outcome=\"dead\"} \(a.dead)\n"
        }
        return out
    }
}

/// The outbox's readers in `/metrics`: `kakin_outbox_cursor_held_back{cursor}` (1 when a cursor's first unread event is
/// older than `events.retentionDays`: retention keeps those events for it, so the outbox grows until it catches up;
/// `cursor` is `webhook:<endpoint id>` or `metrics`, the business numbers' rollup worker). Read at scrape time.
extension KakinApp {
    func outboxMetricsText() async -> String {
        guard let cursors = try? await services.webhooks.heldBackCursors(), !cursors.isEmpty else { return "" }
        var out = "# HELP kakin_outbox_cursor_held_back 1 when the cursor has not read an event older than the events' retention (kept for it).\n"
        out += "# TYPE kakin_outbox_cursor_held_back gauge\n"
        for c in cursors { out += "kakin_outbox_cursor_held_back{cursor=\"\(c.cursor)\"} \(c.heldBack ? 1 : 0)\n" }
        return out
    }
}
