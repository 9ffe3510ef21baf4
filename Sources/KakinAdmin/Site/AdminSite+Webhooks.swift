import HTTPServer
import KakinCore
import KakinEvents
import KakinService
import KakinStorage

/// `/admin/webhooks…`: each endpoint's queue and deliveries, and replays (the admin API's replay, by event id).
extension SupportDesk {
    static func webhookNotice(_ request: HTTPRequest) -> HTML {
        let count = request.query["count"].flatMap { Int($0) } ?? 0
        switch request.query["done"] {
        case "replayed": return "<div class=\"flash\">Delivery queued again (pending); the endpoint gets it shortly.</div>"
        case "replayedDead": return "<div class=\"flash\">\(count) dead deliveries queued again (pending).</div>"
        default: return .empty
        }
    }

    func webhookSummaries() async throws(KakinError) -> [WebhookSummary] {
        let worker = services.webhooks
        let counts = try await store.webhookCounts(endpointIds: worker.endpoints.map(\.id))
        return zip(worker.endpoints, counts).map { e, c in
            WebhookSummary(id: e.id, url: e.url, types: e.types == .all ? ["* (every type)"] : e.types.admittedNames.sorted(), counts: c, oldestWaitingAgeMs: worker.oldestWaitingAgeMs(c))
        }
    }

    func webhookSummary(_ id: String) async throws(KakinError) -> WebhookSummary {
        guard let summary = try await webhookSummaries().first(where: { $0.id == id }) else { throw KakinError(.webhookNotFound) }
        return summary
    }

    public func webhooksPage(_ request: HTTPRequest) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            Layout.response(WebhooksPage.render(session: session, endpoints: try await webhookSummaries()))
        }
    }

    public func webhookPage(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        await page(request) { session throws(KakinError) in
            let summary = try await webhookSummary(id)
            var state: WebhookDeliveryState?
            if let s = request.query["state"], !s.isEmpty {
                guard let parsed = WebhookDeliveryState(rawValue: s) else { throw KakinError(.invalidField, "state must be pending, delivered, retrying or dead.") }
                state = parsed
            }
            let rows = try await store.webhookDeliveries(endpointId: id, state: state, limit: WebhookPage.rowsMax)
            return Layout.response(WebhookPage.render(session: session, endpoint: summary, state: state, rows: rows,
                                                      notice: Self.webhookNotice(request), nowMs: clock.nowMs()))
        }
    }

    /// One delivery back to pending with a fresh retry budget (the admin API's replay with its event id).
    public func replayWebhookDelivery(_ request: HTTPRequest, id: String, eventId: String) async -> HTTPResponse {
        await action(request) { session, form throws(KakinError) in
            guard !eventId.isEmpty, eventId.utf8.count <= 128 else { throw KakinError(.invalidReplayRequest) }
            _ = try await services.webhooks.replay(endpointId: id, .eventIds([eventId]))
            let back = Link.safeBack(form["back"]) ?? Link.webhook(id)
            return Layout.redirect(Self.with(back, done: "replayed"))
        }
    }

    /// Every dead delivery of the endpoint (up to `WebhookPage.replayDeadMax`, oldest included last) back to pending.
    public func replayDeadWebhookDeliveries(_ request: HTTPRequest, id: String) async -> HTTPResponse {
        await action(request) { session, _ throws(KakinError) in
            _ = try await webhookSummary(id)
            let dead = try await store.webhookDeliveries(endpointId: id, state: .dead, limit: WebhookPage.replayDeadMax)
            let queued = dead.isEmpty ? 0 : try await services.webhooks.replay(endpointId: id, .eventIds(dead.map(\.eventId)))
            return Layout.redirect(Self.with(Link.webhook(id, state: .dead), done: "replayedDead", count: queued))
        }
    }

    /// The customer's latest events (at most `CustomerEventsSection.rowsMax`), oldest first.
    func latestOutboxEvents(_ customerId: String) async throws(KakinError) -> [OutboxEventRow] {
        let last = try await store.eventVersion(customerId: customerId)
        if last == 0 { return [] }
        return try await store.customerEvents(customerId: customerId, afterSequence: max(0, last - Int64(CustomerEventsSection.rowsMax)),
                                              limit: CustomerEventsSection.rowsMax)
    }
}
