import KakinCore

// The narrow repositories a use case names (`KakinService`): each a small protocol over the engine-independent SQL that
// `KakinStore` carries out (it conforms to every one, below). A use case's stored property is the protocol, or the
// composition of the few, it needs: what it can touch is in its type.

/// One durable write, or one consistent read, over typed `Records` (a write body may run again on PostgreSQL: it
/// decides only from what it reads through `r`), and the ids a use case draws outside one.
public protocol Repository: Sendable {
    var ids: any IDGenerator { get }
    func transaction<T: Sendable>(_ body: @escaping @Sendable (Records) throws -> T) async throws(KakinError) -> T
    func snapshot<T: Sendable>(_ body: @escaping @Sendable (Records) throws -> T) async throws(KakinError) -> T
}

/// Wallets and the ledger (`Wallets`): balances, a customer's entries page by page, what a recipient was sent, the
/// ledger's consistency check.
public protocol WalletRepository: Repository {
    func wallet(_ customerId: String) async throws(KakinError) -> WalletBalance
    func ledger(customerId: String, limit: Int, cursor: String?) async throws(KakinError) -> LedgerPage
    func recipientSupport(_ recipient: String, top: Int) async throws(KakinError) -> RecipientSupport
    func checkLedger() async throws(KakinError) -> LedgerCheckReport
}

/// Purchases of every store and what the status reads of them (`Ingest`, `CustomerStatusReads`, the external and Play
/// purchases, restores and extensions): customers, a chain's origin and links, the status inputs, Play's tokens.
public protocol PurchaseRepository: Repository {
    func customer(_ customerId: String) async throws(KakinError) -> KakinStore.Customer?
    func subscriptionOrigin(originalTransactionId: String) async throws(KakinError) -> SubscriptionOrigin?
    func linkedOriginalTransactions(_ customerId: String, limit: Int) async throws(KakinError) -> [String]
    func customerStatusInputs(_ customerId: String) async throws(KakinError) -> CustomerSnapshot?
    func customerSnapshot(_ customerId: String) async throws(KakinError) -> CustomerSnapshot?
    func playTokenRow(_ purchaseToken: String) async throws(KakinError) -> PlayTokenRow?
}

/// The stores' notification inboxes (App Store Server Notifications, Play's RTDNs) and what reading them back needs
/// (Notification History's cursor and lease).
public protocol NotificationRepository: Repository {
    func storeNotification(_ n: NotificationPayload, jws: String, source: String) async throws(KakinError) -> Bool
    func claimDueNotifications(owner: String, nowMs: Int64, leaseUntilMs: Int64, limit: Int) async throws(KakinError) -> [InboxNotification]
    func markNotification(_ uuid: String, state: NotificationState, customerId: String?, originalTransactionId: String?) async throws(KakinError)
    func notification(_ uuid: String) async throws(KakinError) -> StoredNotification?
    func replayNotification(_ uuid: String, actor: String) async throws(KakinError) -> Bool
    func replayDeadNotifications(actor: String, limit: Int) async throws(KakinError) -> Int
    func syncValue(_ name: String) async throws(KakinError) -> String?
    func setSyncValue(_ name: String, _ value: String) async throws(KakinError)
    func takeLease(_ name: String, owner: String, nowMs: Int64, untilMs: Int64) async throws(KakinError) -> Bool
    func setLeaseEnd(_ name: String, owner: String, untilMs: Int64) async throws(KakinError)
    func receivePlayNotification(messageId: String, packageName: String, purchaseToken: String?, body: JSONValue,
                                 publishedAtMs: Int64?) async throws(KakinError) -> Bool
    func claimDuePlayNotifications(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [PlayNotificationJob]
    func retryPlayNotification(_ messageId: String, error: String, nextAttemptMs: Int64) async throws(KakinError)
    func finishPlayNotification(_ messageId: String, state: PlayNotificationJob.State, error: String?) async throws(KakinError)
}

/// The calls Kakin owes a store, as durable jobs claimed with leases (`AppStoreJobs`, Play's acknowledgements, the
/// external purchase reports): consumption answers, app account tokens, server finishes, acknowledgements.
public protocol StoreJobRepository: Repository {
    func claimDueConsumptionAnswers(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [ConsumptionJob]
    func storeConsumptionRequestBody(_ uuid: String, version: Int, body: String) async throws(KakinError)
    func retryConsumptionAnswer(_ uuid: String, error: String, nextAttemptMs: Int64) async throws(KakinError)
    func finishConsumptionAnswer(_ job: ConsumptionJob, state: ConsumptionJob.State, attempted: Bool, error: String?) async throws(KakinError)
    func consumptionLedgerFacts(transactionId: String, customerId: String?) async throws(KakinError) -> ConsumptionLedgerFacts
    func claimDueAppAccountTokens(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [AppAccountTokenJob]
    func retryAppAccountToken(_ job: AppAccountTokenJob, error: String, nextAttemptMs: Int64) async throws(KakinError)
    func finishAppAccountToken(_ job: AppAccountTokenJob, state: AppAccountTokenJob.State, error: String?) async throws(KakinError)
    func claimDueServerFinishes(businessNowMs: Int64, nowMs: Int64, owner: String, leaseMs: Int64,
                                limit: Int) async throws(KakinError) -> [ServerFinishJob]
    func retryServerFinish(_ job: ServerFinishJob, error: String, nextAttemptMs: Int64) async throws(KakinError)
    func finishServerFinish(_ job: ServerFinishJob, state: ServerFinishJob.State, error: String?) async throws(KakinError)
    func claimDuePlayAcknowledgements(nowMs: Int64, owner: String, leaseMs: Int64, limit: Int) async throws(KakinError) -> [PlayAcknowledgementJob]
    func retryPlayAcknowledgement(_ token: String, error: String, nextAttemptMs: Int64) async throws(KakinError)
    func finishPlayAcknowledgement(_ job: PlayAcknowledgementJob, state: PlayAcknowledgementJob.State, error: String?) async throws(KakinError)
    func duePlayOrderCharges(nowMs: Int64, attemptsMax: Int, limit: Int) async throws(KakinError) -> [PlayOrderChargeRead]
    func retryPlayOrderCharge(_ orderId: String, nextAttemptMs: Int64) async throws(KakinError)
}

/// The events outbox and webhook deliveries as the events routes read them (`EventReads`); appending is a write's
/// (`EventOutbox.append`), delivering the webhook worker's.
public protocol EventRepository: Sendable {
    func eventFeed(after cursor: EventFeedCursor, limit: Int, types: Set<String>?) async throws(KakinError) -> EventFeedPage
    func customerEvents(customerId: String, afterSequence: Int64, limit: Int) async throws(KakinError) -> [OutboxEventRow]
    func webhookCounts(endpointIds: [String]) async throws(KakinError) -> [WebhookEndpointCounts]
    func webhookDeliveries(endpointId: String, state: WebhookDeliveryState?, limit: Int,
                           before: (createdAtMs: Int64, eventId: String)?) async throws(KakinError) -> [WebhookDeliveryRow]
}

/// Business numbers (`BusinessMetrics`): the rollups' sums and sources; the rollup itself is a write over `Records`.
public protocol MetricsRepository: Repository {
    func metricLevels(_ metrics: [String], upToDay day: Int64) async throws(KakinError) -> [MetricCell]
    func metricSources() async throws(KakinError) -> [String]
    func metricOverviewSums(levels: [String], flows: [String], fromDay: Int64, toDay: Int64) async throws(KakinError)
        -> (before: [MetricCell], atEnd: [MetricCell], flows: [MetricCell])
    func metricSeriesCells(levels: [String], fromDay: Int64, toDay: Int64) async throws(KakinError) -> (before: [MetricCell], days: [MetricCell])
}

/// Support's records: a customer's timeline (its rows, and the entries support actions, extensions and signed offers
/// add), the desk's sessions, recent errors, the clock rows are stamped with; `ids` for an entry's nonce.
public protocol SupportRepository: Sendable {
    var ids: any IDGenerator { get }
    func timelineRows(customerId: String, limit: Int, after cursor: TimelineCursor?) async throws(KakinError) -> TimelineRowsPage
    func recordEvent(customerId: String?, kind: String, reference: String?, detail: JSONValue) async throws(KakinError)
    func recordSupportAction(customerId: String, kind: String, reference: String?, detail: JSONValue) async throws(KakinError)
    func recordOfferSigned(customerId: String, nonce: String, detail: JSONValue) async throws(KakinError)
    func createAdminSession(_ session: AdminSession) async throws(KakinError)
    func deleteAdminSession(tokenSHA256: String) async throws(KakinError)
    func recordErrors(_ errors: [RecentError], keepMax: Int, keepForMs: Int64, prune: Bool) async throws(KakinError)
    func recordStampClock(_ clock: StampClock) async throws(KakinError)
}

extension KakinStore: WalletRepository, PurchaseRepository, NotificationRepository, StoreJobRepository, EventRepository, MetricsRepository,
    SupportRepository {}
