import KakinCore
import KakinEvents
import KakinStorage

/// What the events routes read: the feed, one customer's events, the webhook endpoints' counts and deliveries.
public struct EventReads: Sendable {
    let store: any EventRepository
    let webhooks: WebhookDeliveryWorker

    /// `GET /v1/events`: every customer's events in commit order after `cursor`.
    public func feed(after cursor: EventFeedCursor, limit: Int, types: Set<String>?) async throws(KakinError) -> EventFeedPage {
        try await store.eventFeed(after: cursor, limit: limit, types: types)
    }

    /// `GET /v1/customers/{id}/events`: one customer's events in `sequence` order.
    public func customerEvents(_ customerId: String, afterSequence: Int64, limit: Int) async throws(KakinError) -> [OutboxEventRow] {
        try await store.customerEvents(customerId: customerId, afterSequence: afterSequence, limit: limit)
    }

    /// Each configured endpoint's counts, in the endpoints' order.
    public func endpointCounts() async throws(KakinError) -> [WebhookEndpointCounts] {
        try await store.webhookCounts(endpointIds: webhooks.endpoints.map(\.id))
    }

    public func deliveries(endpointId: String, state: WebhookDeliveryState?, limit: Int) async throws(KakinError) -> [WebhookDeliveryRow] {
        try await store.webhookDeliveries(endpointId: endpointId, state: state, limit: limit, before: nil)
    }
}
