import GooglePlayClient
import GooglePlaySecurity
import KakinCore
import KakinStorage
import StoreAPITransport
import Synchronization

/// One Play app (`apps[]` entry with `"store": "googlePlay"`): its package, catalog (the same `groupId`s and coin amounts
/// as the App Store app), the service account Kakin calls the Developer API with, and where Google is.
public struct GooglePlayAppSettings: Sendable {
    public var packageName: String
    public var catalog: Catalog
    public var serviceAccount: GoogleServiceAccount
    /// Google's `https://androidpublisher.googleapis.com/`, or the Play simulator's (trailing slash).
    public var apiRoot: String
    /// What the RTDN push tokens must say (`rtdn`); nil: Play's notifications are not configured for this app.
    public var rtdn: RTDN?
    /// How often the voided purchases poll reads this app's list (`voidedPurchasesPollMinutes`; at least daily).
    public var voidedPollIntervalMs: Int64 = GooglePlayAppSettings.voidedPollIntervalMsDefault
    public static let voidedPollIntervalMsDefault: Int64 = 6 * 3_600_000
    /// The interval's bounds: not more often than every 5 minutes (Google's quota), at least once a day.
    public static let voidedPollIntervalMsRange: ClosedRange<Int64> = 5 * 60_000...86_400_000

    public struct RTDN: Sendable, Equatable {
        public var audience: String
        public var serviceAccountEmail: String
        public var issuer: String?
        public var certsURL: String

        public init(audience: String, serviceAccountEmail: String, issuer: String? = nil, certsURL: String = PushTokenPolicy.googleCertsURL) {
            self.audience = audience
            self.serviceAccountEmail = serviceAccountEmail
            self.issuer = issuer
            self.certsURL = certsURL
        }
    }

    public init(packageName: String, catalog: Catalog, serviceAccount: GoogleServiceAccount,
                apiRoot: String = GooglePlayClientConfiguration.googleAPIRoot, rtdn: RTDN? = nil) {
        self.packageName = packageName
        self.catalog = catalog
        self.serviceAccount = serviceAccount
        self.apiRoot = apiRoot
        self.rtdn = rtdn
    }
}

/// What the app's POST of a Play purchase answers: the outcome (201/409), the transaction as the contract shows it, and
/// the customer's status when the write evaluated it.
public struct PlayPurchaseAnswer: Sendable {
    public var outcome: IngestOutcome
    public var transaction: JSONValue
    public var status: EvaluatedCustomer?
}

/// Google Play purchases: the app hands a purchase token over (`present`), Kakin reads it from the Developer API, checks
/// package, product, state and owner, applies it through the one apply (`Ingest.applyPlay`), and after the commit
/// acknowledges (and consumes a consumable) as a durable job retried until Play's 3-day limit (`acknowledgeDue`).
public final class GooglePlayPurchases: Sendable {
    let store: any StoreJobRepository & PurchaseRepository
    let ingest: Ingest
    /// Where an order's charge goes once read (`readChargesDue`): the customer's numbers are recomputed in that write.
    let numbers: BusinessMetrics
    let clock: any Clock
    let retryClock: any Clock
    let logger: Logger
    let metrics: Metrics
    /// The acknowledgement worker (local mode waits for its pass after a push, like for the notifications').
    public let worker: BackgroundLoop
    let apps: Mutex<[String: Connected]>

    struct Connected: Sendable {
        var settings: GooglePlayAppSettings
        var client: GooglePlayDeveloperAPIClient
    }

    /// Play refunds a purchase not acknowledged within 3 days of it.
    public static let acknowledgementWindowMs: Int64 = 3 * 86_400_000
    static let leaseMs: Int64 = 60_000
    static let purchaseTokenLengthMax = 1_024

    init(store: any StoreJobRepository & PurchaseRepository, ingest: Ingest, numbers: BusinessMetrics, clock: any Clock, retryClock: any Clock,
         logger: Logger, metrics: Metrics, worker: BackgroundLoop) {
        self.store = store
        self.ingest = ingest
        self.numbers = numbers
        self.clock = clock
        self.retryClock = retryClock
        self.logger = logger
        self.metrics = metrics
        self.worker = worker
        apps = Mutex([:])
    }

    /// Connects an app's Developer API client (at start; in local mode once the simulator's port is known). `sleeper` waits
    /// between the client's retries (`kakin simulate` passes one that returns at once: its time is simulated).
    public func connect(_ app: GooglePlayAppSettings, transport: any HTTPTransport = URLSessionTransport(),
                        sleeper: any RetrySleeper = TaskSleeper()) throws(KakinError) {
        let client: GooglePlayDeveloperAPIClient
        do {
            client = try GooglePlayDeveloperAPIClient(
                configuration: GooglePlayClientConfiguration(serviceAccount: app.serviceAccount, packageName: app.packageName, apiRoot: app.apiRoot),
                transport: CountingTransport(inner: transport, metrics: metrics, store: PurchaseSource.googlePlay, words: CountingTransport.googlePlayWords),
                clock: retryClock, sleeper: sleeper)
        } catch {
            throw KakinError(.invalidConfiguration, detail: "Google Play client for \(app.packageName): \(error)")
        }
        apps.withLock { $0[app.packageName] = Connected(settings: app, client: client) }
    }

    func connected(_ packageName: String) throws(KakinError) -> Connected {
        guard let app = apps.withLock({ $0[packageName] }) else {
            throw KakinError(.playUnknownPackage, detail: "package \(packageName) is not configured")
        }
        return app
    }

    /// Starts the acknowledgement worker.
    public func start() {
        worker.start { [self] in
            _ = await acknowledgeDue(owner: "ack-\(ObjectIdentifier(self).hashValue)", limit: 20)
            _ = await readChargesDue(limit: 20)
        }
    }

    public func stop() async { await worker.stop() }

    // MARK: The app's POST

    /// `POST /v1/customers/{id}/transactions` `{"store": "googlePlay", "packageName", "productId", "purchaseToken"}`.
    public func present(customerId: String, packageName: String, productId: String, purchaseToken: String,
                        withStatus: Bool = true) async throws(KakinError) -> PlayPurchaseAnswer {
        let app = try connected(packageName)
        guard let product = app.settings.catalog[productId] else {
            throw KakinError(.unknownProduct, "Product \(productId) is not in this server's catalog.")
        }
        let read = try await self.read(app, product: product, purchaseToken: purchaseToken)
        // The owner: the obfuscated account id KakinKit sets is the customer's appAccountToken; one naming anyone else is refused.
        if let account = read.accountId {
            let customer = try await store.customer(customerId)
            guard customer?.appAccountToken.lowercased() == account.lowercased() else {
                throw KakinError(.belongsToAnotherCustomer, detail: "purchase token's obfuscatedExternalAccountId names another customer")
            }
        }
        switch read.resource {
        case .subscription(let s):
            if s.subscriptionState == .pending { throw KakinError(.playPurchasePending, detail: "subscription \(productId) is pending") }
            if s.subscriptionState == .pendingPurchaseCanceled { throw KakinError(.playPurchaseCancelled, detail: "pending purchase cancelled") }
        case .product(let p):
            if p.purchaseState == .pending { throw KakinError(.playPurchasePending, detail: "product \(productId) is pending") }
        }
        let result = try await ingest.applyPlay(read, product: product, path: .app, presenter: customerId, withStatus: withStatus)
        guard let outcome = result.outcome else { throw KakinError(.playPurchasePending, detail: "no order yet for \(productId)") }
        switch outcome {
        case .revoked: throw KakinError(.playPurchaseCancelled, detail: "order of \(productId) revoked before it was applied")
        case .notApplied(let reason): throw KakinError(.internalError, detail: "Play purchase not applied: \(reason)")
        case .applied, .alreadyProcessed: break
        }
        worker.wake()
        return PlayPurchaseAnswer(outcome: outcome, transaction: read.transactionJSON, status: result.status)
    }

    /// Reads a token from the Developer API (subscriptionsv2 for subscriptions, productsv2 otherwise) and checks it names
    /// the product asked for.
    func read(_ app: Connected, product: Product, purchaseToken: String) async throws(KakinError) -> PlayRead {
        guard !purchaseToken.isEmpty, purchaseToken.utf8.count <= Self.purchaseTokenLengthMax else {
            throw KakinError(.invalidField, "purchaseToken must be 1 to \(Self.purchaseTokenLengthMax) bytes.")
        }
        let resource: PlayRead.Resource
        do {
            if product.kind == .autoRenewable {
                resource = .subscription(try await app.client.subscriptionV2(token: purchaseToken))
            } else {
                resource = .product(try await app.client.productPurchaseV2(token: purchaseToken))
            }
        } catch {
            throw Self.kakinError(error)
        }
        let read = PlayRead(packageName: app.settings.packageName, purchaseToken: purchaseToken, resource: resource, readAtMs: clock.nowMs())
        guard read.productIds.contains(product.productId) else {
            throw KakinError(.playProductMismatch, detail: "token names \(read.productIds), not \(product.productId)")
        }
        return read
    }

    static func kakinError(_ error: GooglePlayAPIError) -> KakinError {
        if error.isRetryable { return KakinError(.playAPIUnavailable, detail: error.description) }
        if error.isRefused { return KakinError(.playPurchaseNotFound, detail: error.description) }
        return KakinError(.playAPIFailed, detail: error.description)
    }

    // MARK: Acknowledgements

    /// One pass of the acknowledgement worker: acknowledges (and consumes) due tokens; a failure is retried with backoff
    /// until the token's 3-day deadline (`expired`), a refusal Play will repeat ends it `failed`. Returns how many ended.
    @discardableResult
    public func acknowledgeDue(owner: String, limit: Int) async -> Int {
        let nowMs = retryClock.nowMs()
        guard let jobs = try? await store.claimDuePlayAcknowledgements(nowMs: nowMs, owner: owner, leaseMs: Self.leaseMs, limit: limit) else { return 0 }
        var ended = 0
        for job in jobs {
            do {
                let app = try connected(job.packageName)
                try await Self.acknowledge(job, client: app.client)
                try await store.finishPlayAcknowledgement(job, state: .done, error: nil)
                metrics.increment(.playAcknowledgementsDone)
                ended += 1
            } catch {
                let message = "\(error)"
                do {
                    if clock.nowMs() >= job.deadlineMs {
                        try await store.finishPlayAcknowledgement(job, state: .expired, error: message)
                        metrics.increment(.playAcknowledgementsFailed)
                        ended += 1
                    } else {
                        let delayMs = min(Int64(30_000) << min(job.attempts, 6), 30 * 60_000)
                        try await store.retryPlayAcknowledgement(job.purchaseToken, error: message, nextAttemptMs: nowMs + delayMs)
                    }
                } catch {
                    logger.error("could not record a Play acknowledgement attempt", ["play.token": .string(String(job.purchaseToken.prefix(12)))])
                }
            }
        }
        // A full batch: more may be due now (a burst of purchases), not at the next poll.
        if jobs.count == limit { worker.wake() }
        return ended
    }

    // MARK: Order charges

    /// Reads of an order's charge before it is left unread (30 s doubling to 30 min: about 9.5 hours).
    static let chargeAttemptsMax = 24

    /// One pass of the charge reads: for each order applied whose charge is unread, `orders.get`, then ONE write that keeps
    /// the `Order` and recomputes its customer's numbers. A failed read is retried later; the purchase was credited
    /// anyway, the numbers catch up when the read succeeds. Returns how many were read.
    @discardableResult
    public func readChargesDue(limit: Int) async -> Int {
        let nowMs = retryClock.nowMs()
        guard let due = try? await store.duePlayOrderCharges(nowMs: nowMs, attemptsMax: Self.chargeAttemptsMax, limit: limit) else { return 0 }
        var read = 0
        for order in due {
            do {
                let charge = try await connected(order.packageName).client.order(orderId: order.orderId)
                let orderId = order.orderId
                try await numbers.recompute(customerIds: [order.customerId]) { r in try r.setPlayOrderCharge(orderId, order: charge) }
                read += 1
            } catch {
                logger.warning("could not read a Play order's charge", ["play.order": .string(order.orderId), "error": .string("\(error)")])
                try? await store.retryPlayOrderCharge(order.orderId, nextAttemptMs: nowMs + min(Int64(30_000) << min(order.attempts, 6), 30 * 60_000))
            }
        }
        return read
    }

    static func acknowledge(_ job: PlayAcknowledgementJob, client: GooglePlayDeveloperAPIClient) async throws(GooglePlayAPIError) {
        switch job.kind {
        case .subscription:
            try await client.acknowledgeSubscription(subscriptionId: job.productId, token: job.purchaseToken)
        case .product where job.consume:
            try await client.consumeProduct(productId: job.productId, token: job.purchaseToken)
        case .product:
            try await client.acknowledgeProduct(productId: job.productId, token: job.purchaseToken)
        }
    }
}

/// One read of a Play purchase token from the Developer API.
public struct PlayRead: Sendable {
    public enum Resource: Sendable {
        case subscription(SubscriptionPurchaseV2)
        case product(ProductPurchaseV2)
    }

    public var packageName: String
    public var purchaseToken: String
    public var resource: Resource
    /// Voided purchases known for this token (a notification's, the poll's).
    public var voided: [VoidedPurchase] = []
    public var readAtMs: Int64

    var accountId: String? {
        switch resource {
        case .subscription(let s): return s.externalAccountIdentifiers.obfuscatedExternalAccountId
        case .product(let p): return p.externalAccountIdentifiers.obfuscatedExternalAccountId
        }
    }

    var productIds: [String] {
        switch resource {
        case .subscription(let s): return s.lineItems.map(\.productId)
        case .product(let p): return p.lineItems.map(\.productId)
        }
    }

    var linkedPurchaseToken: String? {
        if case .subscription(let s) = resource { return s.linkedPurchaseToken }
        return nil
    }

    var isAcknowledged: Bool {
        switch resource {
        case .subscription(let s): return s.acknowledgementState == .acknowledged
        case .product(let p): return p.acknowledgementState == .acknowledged
        }
    }

    /// The adapter's facts (`PlayPurchaseFacts`), the chain given by the write.
    func facts(linkedChainId: String?) -> [PurchaseFact] {
        switch resource {
        case .subscription(let s):
            return PlayPurchaseFacts.subscription(s, packageName: packageName, linkedChainId: linkedChainId, voided: voided, readAtMs: readAtMs)
        case .product(let p):
            return PlayPurchaseFacts.product(p, packageName: packageName, voided: voided, readAtMs: readAtMs).map { [$0] } ?? []
        }
    }

    /// The contract's `transaction` of a Play answer.
    var transactionJSON: JSONValue {
        var o: [String: JSONValue] = ["store": "googlePlay", "packageName": .string(packageName), "purchaseToken": .string(purchaseToken)]
        switch resource {
        case .subscription(let s):
            let item = s.lineItems.first
            o["productId"] = .string(item?.productId)
            o["orderId"] = .string(item?.latestSuccessfulOrderId)
            o["purchaseTime"] = Timestamp.rfc3339(s.startTimeMs)
            o["expiryTime"] = Timestamp.rfc3339(item?.expiryTimeMs)
            o["subscriptionState"] = .string(s.subscriptionState.rawValue)
            o["linkedPurchaseToken"] = .string(s.linkedPurchaseToken)
        case .product(let p):
            o["productId"] = .string(p.lineItems.first?.productId)
            o["orderId"] = .string(p.orderId)
            o["purchaseTime"] = Timestamp.rfc3339(p.purchaseCompletionTimeMs)
            o["quantity"] = .int(Int64(p.lineItems.first?.quantity ?? 1))
            o["purchaseState"] = .string(p.purchaseState.rawValue)
        }
        return .object(o)
    }
}
