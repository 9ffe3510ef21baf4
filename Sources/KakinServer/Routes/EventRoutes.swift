import HTTPServer
import KakinCore
import KakinEvents
import KakinService
import KakinStorage

/// Events out: the feed for those who poll, and the webhook endpoints' deliveries and replays (admin).
extension KakinApp {
    /// `GET /v1/events?after=<cursor>&limit=1..500&types=`: every customer's events in commit order.
    func getEvents(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let q = try EventFeedQuery(after: c.request.query["after"], limit: c.request.query["limit"], types: c.request.query["types"])
        let page = try await services.eventReads.feed(after: q.after, limit: q.limit, types: q.types?.admittedNames)
        return .jsonBytes(EventFeed.pageJSON(page))
    }

    /// `GET /v1/customers/{id}/events?afterSequence=N`: one customer's events in `sequence` order.
    func getCustomerEvents(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let q = try CustomerEventsQuery(afterSequence: c.request.query["afterSequence"], limit: c.request.query["limit"])
        let events = try await services.eventReads.customerEvents(c.customerId, afterSequence: q.afterSequence, limit: q.limit)
        return .jsonBytes(EventFeed.customerPageJSON(events, afterSequence: q.afterSequence))
    }

    /// `GET /v1/admin/webhooks`: each endpoint with its pending, retrying and dead counts and its oldest waiting event.
    func getWebhooks(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let worker = services.webhooks
        let counts = try await services.eventReads.endpointCounts()
        let inFlight = worker.inFlight
        let endpoints: [JSONValue] = zip(worker.endpoints, counts).map { endpoint, n in
            ["id": .string(endpoint.id), "url": .string(endpoint.url), "types": .array(endpoint.types.admittedNames.sorted().map(JSONValue.string)),
             "pending": .int(Int64(n.pending)), "retrying": .int(Int64(n.retrying)), "dead": .int(Int64(n.dead)),
             "notFannedOut": .int(Int64(n.notFannedOut)), "inFlight": .int(Int64(inFlight[endpoint.id] ?? 0)),
             "oldestPendingAgeSeconds": worker.oldestWaitingAgeMs(n).map { .int($0 / 1000) } ?? .null]
        }
        return .json(["webhooks": .array(endpoints)], status: 200)
    }

    /// `GET /v1/admin/webhooks/{id}/deliveries?state=pending|delivered|retrying|dead&limit=`.
    func getWebhookDeliveries(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let endpoint = try webhookEndpoint(c["id"])
        var state: WebhookDeliveryState?
        if let s = c.request.query["state"] {
            guard let parsed = WebhookDeliveryState(rawValue: s) else { throw KakinError(.invalidField, "state must be pending, delivered, retrying or dead.") }
            state = parsed
        }
        let limit = try intParameter(c, "limit") ?? 100
        guard (1...500).contains(limit) else { throw KakinError(.invalidField, "limit must be from 1 to 500.") }
        let rows = try await services.eventReads.deliveries(endpointId: endpoint.id, state: state, limit: limit)
        return .json(["webhook": .string(endpoint.id), "deliveries": .array(rows.map(\.json))], status: 200)
    }

    /// `POST /v1/admin/webhooks/{id}/replay {"eventIds": […]} | {"since": "<RFC 3339>"}` → 202 `{"queued"}`.
    func postWebhookReplay(_ c: RouteCall) async throws(KakinError) -> HTTPResponse {
        let endpoint = try webhookEndpoint(c["id"])
        let body = try c.request.jsonObject()
        let queued = try await services.webhooks.replay(endpointId: endpoint.id, try ReplayRequest(json: .object(body.object)))
        return .json(["queued": .int(Int64(queued))], status: 202)
    }

    func webhookEndpoint(_ id: String) throws(KakinError) -> WebhookEndpoint {
        guard let endpoint = services.webhooks.endpoints.first(where: { $0.id == id }) else { throw KakinError(.webhookNotFound) }
        return endpoint
    }
}

extension WebhookDeliveryRow {
    /// A delivery as the admin API shows it.
    var json: JSONValue {
        ["eventId": .string(eventId), "customerId": .string(customerId), "sequence": .int(sequence), "type": .string(type),
         "state": .string(state.rawValue), "attempts": .int(Int64(attempts)), "createdAt": Timestamp.rfc3339(createdAtMs),
         "nextAttemptAt": state == .pending || state == .retrying ? Timestamp.rfc3339(nextAttemptMs) : .null,
         "deadline": Timestamp.rfc3339(deadlineMs), "lastAttemptAt": Timestamp.rfc3339(lastAttemptMs),
         "lastStatus": lastStatus.map { .int(Int64($0)) } ?? .null, "lastAnswer": .string(lastAnswer),
         "finishedAt": Timestamp.rfc3339(finishedAtMs)]
    }
}

extension HTTPResponse {
    /// A JSON body already serialized (the feed's stored events as they were written, a status read's answer written straight to bytes).
    static func jsonBytes(_ body: [UInt8], status: Int = 200) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json; charset=utf-8")
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}
