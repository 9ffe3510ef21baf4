import GooglePlayClient
import GooglePlaySecurity
import KakinCore
import StoreAPITransport
import KakinStorage
import Synchronization

/// Google Play's real-time developer notifications: `POST /v1/notifications/googleplay` (a Pub/Sub push) is checked
/// (the OIDC bearer against the app's `rtdn`), stored once per `messageId` before it is answered, and a worker re-reads
/// the purchase from the Developer API and applies it through the one apply, as Google says to (the notification only
/// names the token; arrival order and duplicates never change the outcome).
///
/// What each notification does (the re-read decides; the type only picks the API):
/// - subscription 1 RECOVERED, 2 RENEWED, 4 PURCHASED, 7 RESTARTED: the token's current order is applied (a renewal's
///   `..N` order is a new period of the chain, counted once) and the status follows `subscriptionState`;
/// - 3 CANCELED, 5 ON_HOLD, 6 IN_GRACE_PERIOD, 9 DEFERRED, 10 PAUSED, 11 PAUSE_SCHEDULE_CHANGED, 13 EXPIRED,
///   17 ITEMS_CHANGED, 18 CANCELLATION_SCHEDULED, 19 PRICE_CHANGE_UPDATED, 20 PENDING_PURCHASE_CANCELED,
///   22 PRICE_STEP_UP_CONSENT_UPDATED, 8 PRICE_CHANGE_CONFIRMED: no new order; the status (served or not, dates,
///   auto-renew) follows the re-read, with its events;
/// - 12 REVOKED: Play revokes only with a refund: the token's newest order is revoked at the notification's time (the
///   entitlement ends as `revoked`, never `expired`), whichever of it and the VOIDED_PURCHASE that follows is applied first;
/// - one-time 1 ONE_TIME_PRODUCT_PURCHASED: the order is applied for the owner its obfuscated account id names (stored
///   until the app presents it when nobody does); 2 ONE_TIME_PRODUCT_CANCELED: a pending purchase cancelled, nothing
///   was granted (the re-read keeps it);
/// - voided purchase: the order is revoked (refund type 1 in full; type 2 by the units no longer refundable) and
///   the coins taken back under the wallet policy, an entitlement revoked;
/// - test notification: recorded (`ignored`) and answered.
public final class GooglePlayNotifications: Sendable {
    let store: any NotificationRepository & PurchaseRepository
    let purchases: GooglePlayPurchases
    let retryClock: any Clock
    let logger: Logger
    let metrics: Metrics
    public let worker: BackgroundLoop
    /// The voided purchases poll (`GooglePlayNotifications+VoidedPurchases.swift`): a pass a minute, each app's run in turn
    /// with the other processes at its interval.
    let voidedPoll: BackgroundLoop
    /// This process's name in the poll's lease.
    let leaseOwner: String
    let verifiers = Mutex<[String: PushTokenVerifier]>([:])

    /// Attempts before a stored notification is `dead` (about 2.5 hours with the backoff below).
    public static let attemptsMax = 24
    public static let bodyBytesMax = 64 * 1024
    static let leaseMs: Int64 = 60_000

    init(store: any NotificationRepository & PurchaseRepository, purchases: GooglePlayPurchases, retryClock: any Clock, logger: Logger,
         metrics: Metrics, leaseOwner: String, worker: BackgroundLoop, voidedPoll: BackgroundLoop = BackgroundLoop(pollIntervalMs: 60_000)) {
        self.store = store
        self.purchases = purchases
        self.retryClock = retryClock
        self.logger = logger
        self.metrics = metrics
        self.leaseOwner = leaseOwner
        self.worker = worker
        self.voidedPoll = voidedPoll
    }

    /// Accepts pushes for the app whose bearer token its `rtdn` settings accept, the keys fetched from its `certsUrl`
    /// (or from `keys`: local mode hands the simulator's in-process). An app without `rtdn` takes no pushes.
    public func accept(_ app: GooglePlayAppSettings, keys: (any JSONWebKeySetSource)? = nil) {
        guard let rtdn = app.rtdn else { return }
        let policy = PushTokenPolicy(audience: rtdn.audience, serviceAccountEmail: rtdn.serviceAccountEmail,
                                     issuers: rtdn.issuer.map { [$0] } ?? PushTokenPolicy.googleIssuers)
        let verifier = PushTokenVerifier(policy: policy, source: keys ?? HTTPKeySetSource(url: rtdn.certsURL, transport: URLSessionTransport()))
        verifiers.withLock { $0[app.packageName] = verifier }
    }

    /// Starts the notification worker.
    public func start() {
        worker.start { [self] in await processDue(owner: "rtdn-\(ObjectIdentifier(self).hashValue)") }
    }

    /// Starts the voided purchases poll (`kakin serve`, local mode included; tests poll when they choose).
    public func startVoidedPoll() {
        voidedPoll.start { [self] in await pollVoidedInTurn() }
    }

    public func stop() async {
        await voidedPoll.stop()
        await worker.stop()
    }

    /// A push: 401 for a bad token (nothing stored), 422 for a package this server does not serve, else stored once
    /// (a redelivery of the same `messageId` is acknowledged and ignored) and the worker woken.
    public func receive(authorization: String?, body: JSONValue) async throws(KakinError) {
        do {
            if try await keep(authorization: authorization, body: body) { metrics.increment(.playNotificationsReceived) }
        } catch {
            metrics.increment(.playNotificationsRefused)
            throw error
        }
        worker.wake()
    }

    /// Checks a push and stores it; true when its `messageId` was new.
    func keep(authorization: String?, body: JSONValue) async throws(KakinError) -> Bool {
        let message: PubSubPushMessage
        let notification: DeveloperNotification
        do {
            message = try PubSubPushMessage(json: body)
            notification = try message.developerNotification()
        } catch {
            throw KakinError(.invalidField, "The body is not a Pub/Sub push of a Google Play developer notification.")
        }
        let (own, any) = verifiers.withLock { ($0[notification.packageName], $0.values.first) }
        guard let verifier = own ?? any else { throw KakinError(.playUnknownPackage, detail: "no Play app takes notifications") }
        do {
            // The business clock: Google's and the push's (the simulator signs on its simulated time in local mode).
            _ = try await verifier.verify(authorization: authorization, nowMs: purchases.clock.nowMs())
        } catch {
            throw KakinError(error.errorKind, detail: error.description)
        }
        guard own != nil else { throw KakinError(.playUnknownPackage, detail: "push for package \(notification.packageName)") }
        return try await store.receivePlayNotification(messageId: message.messageId, packageName: notification.packageName,
                                                       purchaseToken: notification.purchaseToken, body: notification.raw,
                                                       publishedAtMs: message.publishTimeMs)
    }

    /// One pass of the worker: claims due notifications and applies each; a failure is retried with backoff (1 s doubling
    /// to 10 min), and `dead` after `attemptsMax` (a refusal by Google that retrying cannot fix is dead at once).
    public func processDue(owner: String, limit: Int = 50) async {
        let nowMs = retryClock.nowMs()
        guard let jobs = try? await store.claimDuePlayNotifications(nowMs: nowMs, owner: owner, leaseMs: Self.leaseMs, limit: limit) else { return }
        for job in jobs {
            do {
                if try await apply(job) { metrics.increment(.playNotificationsApplied) }
            } catch {
                let dead = error.kind == .playPurchaseNotFound || job.attempts + 1 >= Self.attemptsMax
                do {
                    if dead {
                        try await store.finishPlayNotification(job.messageId, state: .dead, error: "\(error)")
                        metrics.increment(.playNotificationsDead)
                    } else {
                        try await store.retryPlayNotification(job.messageId, error: "\(error)",
                                                              nextAttemptMs: nowMs + min(Int64(1_000) << min(job.attempts, 10), 600_000))
                    }
                } catch {
                    logger.error("could not record a Play notification attempt", ["play.messageId": .string(job.messageId)])
                }
            }
        }
        if jobs.count == limit { worker.wake() }
    }

    /// Applies a stored notification; false when it was only recorded (`ignored`).
    func apply(_ job: PlayNotificationJob) async throws(KakinError) -> Bool {
        let notification: DeveloperNotification
        do {
            notification = try DeveloperNotification(json: job.body)
        } catch {
            throw KakinError(.invalidField, detail: "stored notification \(job.messageId) no longer decodes")
        }
        switch notification.kind {
        case .test, .other:
            try await store.finishPlayNotification(job.messageId, state: .ignored, error: nil)
            return false
        case .subscription(let type, let token):
            try await purchases.applyNotification(packageName: notification.packageName, purchaseToken: token, kind: .subscription,
                                                  productId: nil, voided: [], revokedAtMs: type == .revoked ? notification.eventTimeMs : nil,
                                                  messageId: job.messageId)
        case .oneTimeProduct(_, let token, let sku):
            try await purchases.applyNotification(packageName: notification.packageName, purchaseToken: token, kind: .product,
                                                  productId: sku, voided: [], revokedAtMs: nil, messageId: job.messageId)
        case .voidedPurchase(let token, let orderId, let productType, let refundType):
            var voided: [VoidedPurchase] = []
            // A refund in full names its order; a quantity-based partial one is read back from the units still refundable.
            if refundType != 2, let orderId, let v = VoidedPurchase.told(purchaseToken: token, orderId: orderId, atMs: notification.eventTimeMs) {
                voided = [v]
            }
            try await purchases.applyNotification(packageName: notification.packageName, purchaseToken: token,
                                                  kind: productType == 1 ? .subscription : .product, productId: nil, voided: voided,
                                                  revokedAtMs: nil, messageId: job.messageId)
        }
        return true
    }
}

extension GooglePlayPurchases {
    /// Re-reads a token a notification named and applies it for whoever owns its chain (the `notification` path), marking
    /// the notification applied in the same write. `revokedAtMs`: a subscription's revocation (RTDN 12) voids the token's
    /// newest order then.
    func applyNotification(packageName: String, purchaseToken: String, kind: PlayTokenRow.Kind, productId: String?,
                           voided: [VoidedPurchase], revokedAtMs: Int64?, messageId: String) async throws(KakinError) {
        let app = try connected(packageName)
        let known = try await store.playTokenRow(purchaseToken)
        var read: PlayRead
        let product: Product
        switch (kind, productId ?? known?.productId) {
        case (_, let id?):
            guard let p = app.settings.catalog[id] else { throw KakinError(.unknownProduct, detail: "product \(id) of a Play notification") }
            product = p
            read = try await self.read(app, product: product, purchaseToken: purchaseToken)
        case (.subscription, nil):
            // A subscription the app never presented: the read names its product.
            let s: SubscriptionPurchaseV2
            do { s = try await app.client.subscriptionV2(token: purchaseToken) } catch { throw Self.kakinError(error) }
            guard let id = s.lineItems.first?.productId, let p = app.settings.catalog[id] else {
                throw KakinError(.unknownProduct, detail: "product of a Play subscription notification")
            }
            product = p
            read = PlayRead(packageName: packageName, purchaseToken: purchaseToken, resource: .subscription(s), readAtMs: clock.nowMs())
        case (.product, nil):
            throw KakinError(.unknownProduct, detail: "one-time Play notification without a product")
        }
        read.voided = voided
        if let revokedAtMs, case .subscription(let s) = read.resource,
           let order = s.lineItems.max(by: { ($0.expiryTimeMs ?? 0) < ($1.expiryTimeMs ?? 0) })?.latestSuccessfulOrderId,
           let v = VoidedPurchase.told(purchaseToken: purchaseToken, orderId: order, atMs: revokedAtMs) {
            read.voided.append(v)
        }
        _ = try await ingest.applyPlay(read, product: product, path: .notification, presenter: nil, withStatus: false,
                                       context: IngestContext(playMessageId: messageId))
        worker.wake()
    }
}

extension VoidedPurchase {
    /// A refund in full a notification told: the order, voided at the notification's time.
    static func told(purchaseToken: String, orderId: String, atMs: Int64) -> VoidedPurchase? {
        try? VoidedPurchase(json: ["purchaseToken": .string(purchaseToken), "orderId": .string(orderId), "voidedTimeMillis": .string(String(atMs))])
    }
}
