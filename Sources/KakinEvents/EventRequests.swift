import KakinCore
import KakinStorage

/// `GET /v1/events?after=<cursor>&limit=1..500&types=` read and checked (the route passes the query's values).
public struct EventFeedQuery: Sendable, Hashable {
    public static let limitDefault = 100

    public var after: EventFeedCursor
    public var limit: Int
    /// Nil: every type.
    public var types: EventTypeFilter?

    /// - Throws: `invalidCursor` for a cursor this server did not issue, `invalidEventQuery` for a bad limit or types.
    public init(after: String?, limit: String?, types: String?) throws(KakinError) {
        if let after, !after.isEmpty {
            guard let cursor = EventFeedCursor(token: after) else { throw KakinError(.invalidCursor) }
            self.after = cursor
        } else {
            self.after = .start
        }
        self.limit = try Self.limit(limit)
        if let types, !types.isEmpty {
            do {
                self.types = try EventTypeFilter(query: types)
            } catch {
                throw KakinError(.invalidEventQuery, detail: "types: \(error.message)")
            }
        }
    }

    static func limit(_ value: String?) throws(KakinError) -> Int {
        guard let value else { return limitDefault }
        guard let n = Int(value), KakinStore.feedLimitRange.contains(n) else { throw KakinError(.invalidEventQuery, detail: "limit \(value.prefix(20))") }
        return n
    }
}

/// `GET /v1/customers/{id}/events?afterSequence=N&limit=` read and checked.
public struct CustomerEventsQuery: Sendable, Hashable {
    public var afterSequence: Int64
    public var limit: Int

    public init(afterSequence: String?, limit: String?) throws(KakinError) {
        if let afterSequence {
            guard let n = Int64(afterSequence), n >= 0 else { throw KakinError(.invalidEventQuery, detail: "afterSequence \(afterSequence.prefix(20))") }
            self.afterSequence = n
        } else {
            self.afterSequence = 0
        }
        self.limit = try EventFeedQuery.limit(limit)
    }
}

/// `POST /v1/admin/webhooks/{id}/replay` `{"eventIds": […]}` or `{"since": "<RFC 3339>"}`.
public enum ReplayRequest: Sendable, Hashable {
    case eventIds([String])
    case since(ms: Int64)

    /// - Throws: `invalidReplayRequest` for anything but exactly one of the two, well formed.
    public init(json: JSONValue) throws(KakinError) {
        guard let o = json.objectValue, o.count == 1 else { throw KakinError(.invalidReplayRequest) }
        if let ids = o["eventIds"] {
            guard let list = ids.arrayValue, (1...KakinStore.replayEventIdsMax).contains(list.count) else { throw KakinError(.invalidReplayRequest) }
            var out: [String] = []
            for v in list {
                guard let id = v.stringValue, !id.isEmpty, id.utf8.count <= 128 else { throw KakinError(.invalidReplayRequest) }
                out.append(id)
            }
            self = .eventIds(out)
        } else if let since = o["since"] {
            guard let text = since.stringValue, let ms = Timestamp.parseRFC3339(text) else { throw KakinError(.invalidReplayRequest) }
            self = .since(ms: ms)
        } else {
            throw KakinError(.invalidReplayRequest)
        }
    }
}

extension WebhookDeliveryWorker {
    /// Runs a replay for one of this worker's endpoints: deliveries back to `pending` with a fresh deadline (created
    /// where missing), then wakes the loop. Answers how many were queued (the contract's 202 `{"queued"}`).
    /// - Throws: `webhookNotFound` for an id that is not configured.
    public func replay(endpointId: String, _ request: ReplayRequest) async throws(KakinError) -> Int {
        guard let endpoint = endpoints.first(where: { $0.id == endpointId }) else { throw KakinError(.webhookNotFound) }
        let queued = try await EventReplay.run(store: store, endpoint: endpoint, request, nowMs: clock.nowMs(), schedule: options.schedule)
        wake()
        return queued
    }
}

/// A replay without a running worker (`kakin events replay`): the deliveries wait for any process's worker.
public enum EventReplay {
    public static func run(store: KakinStore, endpoint: WebhookEndpoint, _ request: ReplayRequest, nowMs: Int64,
                           schedule: RetrySchedule = RetrySchedule()) async throws(KakinError) -> Int {
        let deadline = schedule.deadline(fromMs: nowMs)
        switch request {
        case .eventIds(let ids):
            return try await store.replayWebhookDeliveries(route: endpoint.route, eventIds: ids, nowMs: nowMs, deadlineMs: deadline)
        case .since(let ms):
            return try await store.replayWebhookDeliveries(route: endpoint.route, sinceMs: ms, nowMs: nowMs, deadlineMs: deadline)
        }
    }
}
