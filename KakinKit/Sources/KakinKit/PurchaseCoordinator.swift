import Foundation

/// Drives purchases so that a customer is charged once and credited once, whatever fails in between
/// (seeds 000, 001, 004). Its rules:
/// - `launch()` starts listening to the store's updates before anything else, retries unfinished
///   transactions, then asks Kakin who the customer is (new / active / inactive);
/// - a purchase is sent to Kakin with `X-Purchase-Process-Id: purchase-<uuid>` and finished **only** when
///   Kakin answered 201 or 409 (or recorded a refund); otherwise it stays unfinished;
/// - unfinished transactions are retried at launch, on foreground and before the wallet, each on its own
///   process (`retry-<trigger>-<uuid>`) with backoff, never on the purchase path; each outcome is an event;
/// - a purchase of a product that has an unfinished transaction is refused (`.stillProcessing`) without
///   showing the payment sheet: no second charge;
/// - pending and cancelled are outcomes, not errors; every error carries a `KKN-…` ID.
public actor PurchaseCoordinator {
    public struct Options: Sendable {
        public var retry: RetryPolicy
        /// The promotional-offer signature the store adapter applies.
        public var offerFormat: OfferSignatureFormat
        /// Waits between retry attempts (injected so tests never sleep).
        public var sleep: @Sendable (Duration) async -> Void
        /// Process IDs and nothing else come from here.
        public var makeUUID: @Sendable () -> UUID

        public init(retry: RetryPolicy = RetryPolicy(), offerFormat: OfferSignatureFormat = .legacy,
                    sleep: @escaping @Sendable (Duration) async -> Void = { try? await Task.sleep(for: $0) },
                    makeUUID: @escaping @Sendable () -> UUID = { UUID() }) {
            self.retry = retry
            self.offerFormat = offerFormat
            self.sleep = sleep
            self.makeUUID = makeUUID
        }
    }

    public let customerID: String
    let store: any Store
    let backend: any Backend
    let options: Options

    /// Retry outcomes, "still processing" alerts and status changes, for the UI. Keeps the newest 100 when
    /// nobody reads it.
    public nonisolated let events: AsyncStream<PurchaseEvent>
    let eventSink: AsyncStream<PurchaseEvent>.Continuation

    var listener: Task<Void, Never>?
    var customer: CustomerStatus?
    /// Transactions being sent to Kakin right now. The purchase path owns its own; a retry is a task any
    /// other trigger joins instead of sending the same transaction twice at once.
    var inFlight: [String: InFlight] = [:]
    /// Products whose payment sheet is up (a double tap must not open a second one).
    var buying: Set<String> = []
    /// The trigger of the retry round running now: an update that arrives meanwhile (StoreKit hands every
    /// unfinished transaction to a new listener) belongs to that round.
    var round: RetryTrigger?
    /// Retries that ended during the round, whoever ran them: the listener may finish one before the round
    /// even lists what is unfinished, and the round's report must still show it.
    var roundOutcomes: [RetryOutcome] = []

    enum InFlight {
        case purchase(productID: String)
        case retry(productID: String, Task<RetryOutcome, Never>)

        var productID: String {
            switch self {
            case .purchase(let p), .retry(let p, _): return p
            }
        }
    }

    /// - Parameters:
    ///   - customerID: the app's own user ID (Kakin's `{customerId}`).
    ///   - store: StoreKit (`StoreKitStore`) or the simulator (`SimulatedStore`).
    ///   - backend: Kakin (`URLSessionBackend`).
    public init(customerID: String, store: any Store, backend: any Backend, options: Options = Options()) {
        self.customerID = customerID
        self.store = store
        self.backend = backend
        self.options = options
        (events, eventSink) = AsyncStream.makeStream(of: PurchaseEvent.self, bufferingPolicy: .bufferingNewest(100))
    }

    deinit {
        listener?.cancel()
        eventSink.finish()
    }

    // MARK: Launch, foreground, wallet

    /// The launch sequence: listen first (so no update is missed), retry what is unfinished, then ask Kakin
    /// for the customer's status. Call it from `application(_:didFinishLaunchingWithOptions:)` / `App.init`.
    public func launch() async -> LaunchReport {
        startListening()
        let retries = await retryUnfinished(.launch)
        let status: Result<CustomerStatus, KakinKitError>
        do {
            status = .success(try await refreshStatus())
        } catch {
            status = .failure(error)
        }
        return LaunchReport(status: status, retries: retries, stillUnfinished: await announceUnfinished())
    }

    /// Call when the app returns to the foreground.
    public func enterForeground() async -> [RetryOutcome] {
        let retries = await retryUnfinished(.foreground)
        _ = await announceUnfinished()
        return retries
    }

    /// Call before showing the balance: unfinished purchases are retried first, so the balance the user
    /// sees already holds them (seed 000).
    public func wallet() async throws(KakinKitError) -> WalletReport {
        let retries = await retryUnfinished(.wallet)
        return WalletReport(wallet: try await backend.wallet(customerID), retries: retries)
    }

    /// Starts consuming the store's updates. `launch()` calls it first; idempotent.
    public func startListening() {
        guard listener == nil else { return }
        let updates = store.updates()
        listener = Task { [weak self] in
            for await transaction in updates {
                guard let self else { return }
                await self.handleUpdate(transaction)
            }
        }
    }

    /// Stops listening (a test, or a command that ends).
    public func stopListening() {
        listener?.cancel()
        listener = nil
    }

    /// `GET /v1/customers/{id}`.
    @discardableResult
    public func refreshStatus() async throws(KakinKitError) -> CustomerStatus {
        let status = try await backend.customer(customerID)
        remember(status)
        return status
    }

    /// What a placement's paywall shows (`onboarding`, `settings`…): Kakin's targeting rules or the customer's experiment
    /// variant decide, so the paywall changes from the server. Load the packages' products with `products(_:)` and
    /// buy with `purchase(_:)` as usual; a purchase after the paywall counts for the customer's variant.
    /// - Parameters:
    ///   - appVersion: the app's version (`CFBundleShortVersionString`), for rules on app versions.
    ///   - country: the storefront's ISO 3166-1 alpha-2 country (StoreKit's `Storefront.countryCode` is alpha-3).
    public func offering(placement: String, appVersion: String? = nil, country: String? = nil) async throws(KakinKitError) -> PaywallOffering {
        try await backend.offering(customerID, placement: placement, appVersion: appVersion, country: country)
    }

    public func unfinishedTransactions() async -> [StoreTransaction] {
        await store.unfinished()
    }

    public func products(_ ids: [String]) async throws(KakinKitError) -> [StoreProduct] {
        try await store.products(for: ids)
    }

    // MARK: Restore

    /// "Restore purchases": `AppStore.sync()`, the unfinished transactions (mission 9: restore considers
    /// them as well as the entitlements), then Kakin's restore from the App Store's history.
    public func restore() async throws(KakinKitError) -> RestoreReport {
        var syncError: KakinKitError?
        do {
            try await store.sync()
        } catch {
            syncError = error
        }
        let retries = await retryUnfinished(.restore)
        let anyTransaction = await store.currentEntitlements().first?.id ?? retries.first?.transaction.id
        let status = try await backend.restore(customerID, transactionID: anyTransaction)
        remember(status)
        return RestoreReport(status: status, retries: retries, syncError: syncError)
    }

    // MARK: Purchase

    /// A tap on "buy".
    /// - Parameters:
    ///   - productID: the App Store product.
    ///   - offerID: a promotional offer; its signature is fetched from Kakin first. Without one, a subscription is
    ///     bought with Kakin's signed introductory-offer eligibility, so the App Store follows Kakin's decision.
    ///   - quantity: for consumables.
    public func purchase(_ productID: String, offerID: String? = nil, quantity: Int = 1) async -> PurchaseOutcome {
        if buying.contains(productID) || inFlight.values.contains(where: { $0.productID == productID }) {
            return .stillProcessing(productID: productID, unfinished: [], error: KakinKitError(.purchaseStillProcessing))
        }
        buying.insert(productID)
        defer { buying.remove(productID) }
        let earlier = await store.unfinished().filter { $0.productID == productID }
        if !earlier.isEmpty {
            return .stillProcessing(productID: productID, unfinished: earlier, error: KakinKitError(.purchaseStillProcessing))
        }

        let token: UUID
        var offer: SignedOffer?
        var eligibility: String?
        let result: StorePurchaseResult
        do {
            token = try await appAccountToken()
            if let offerID {
                offer = try await backend.offerSignature(customerID, productID: productID, offerID: offerID, format: options.offerFormat)
            } else {
                eligibility = try await introductoryOfferEligibility(productID)
            }
            result = try await store.purchase(productID, options: StorePurchaseOptions(appAccountToken: token, quantity: quantity, offer: offer,
                                                                                       introductoryOfferEligibility: eligibility))
        } catch {
            return .failed(error)
        }
        switch result {
        case .pending: return .pending
        case .cancelled: return .cancelled
        case .purchased(let transaction): return await deliver(transaction)
        }
    }

    /// The purchase path's one send to Kakin. A failure leaves the transaction to the retry process.
    func deliver(_ transaction: StoreTransaction) async -> PurchaseOutcome {
        if case .retry(_, let task) = inFlight[transaction.id] {
            // The updates stream handed it over first and a retry is sending it: take that answer.
            let outcome = await task.value
            switch outcome.result {
            case .credited(let s), .alreadyCredited(let s):
                return .completed(CompletedPurchase(transaction: transaction, processID: outcome.processID, submission: s))
            case .revoked(let e): return .failed(e)
            case .stillUnfinished(let e): return .unfinished(transaction, processID: outcome.processID, error: e)
            }
        }
        inFlight[transaction.id] = .purchase(productID: transaction.productID)
        defer { inFlight[transaction.id] = nil }
        let processID = "purchase-" + options.makeUUID().uuidString.lowercased()
        do {
            switch try await backend.submit(transaction, customerID: customerID, processID: processID) {
            case .credited(let s), .alreadyProcessed(let s):
                await store.finish(transaction)
                if let c = s.customer { remember(c) }
                return .completed(CompletedPurchase(transaction: transaction, processID: processID, submission: s))
            case .revoked(let e):
                await store.finish(transaction)
                return .failed(e)
            }
        } catch {
            return .unfinished(transaction, processID: processID, error: error)
        }
    }

    /// Kakin's signed introductory-offer eligibility for an auto-renewable subscription (nil for other products,
    /// or when Kakin has none to give). Kakin's rule is the contract's: a customer who ever subscribed in the
    /// group is not eligible, whichever Apple account they used.
    func introductoryOfferEligibility(_ productID: String) async throws(KakinKitError) -> String? {
        guard try await store.products(for: [productID]).first?.type == .autoRenewable else { return nil }
        return try await backend.introductoryOfferEligibility(customerID, productID: productID, appTransactionID: await store.appTransactionID())
    }

    func appAccountToken() async throws(KakinKitError) -> UUID {
        let status: CustomerStatus
        if let customer {
            status = customer
        } else {
            status = try await refreshStatus()
        }
        guard let raw = status.appAccountToken, let token = UUID(uuidString: raw) else {
            throw KakinKitError(.invalidServerResponse, message: "Kakin sent no appAccountToken for this customer.")
        }
        return token
    }

    // MARK: Retries

    /// Sends every unfinished transaction the purchase path is not sending right now, one by one.
    func retryUnfinished(_ trigger: RetryTrigger) async -> [RetryOutcome] {
        var attemptsMax = options.retry.attemptsMax
        round = trigger
        roundOutcomes = []
        defer {
            round = nil
            roundOutcomes = []
        }
        for transaction in await store.unfinished() {
            guard let outcome = await retry(transaction, trigger, attemptsMax: attemptsMax) else { continue }
            // Kakin is unreachable: the rest of this round gets one try each instead of a backoff each.
            if case .stillUnfinished(let e) = outcome.result, e.isRetryable { attemptsMax = 1 }
        }
        return roundOutcomes
    }

    func handleUpdate(_ transaction: StoreTransaction) async {
        // StoreKit hands a new listener every unfinished transaction; one the launch round (or the purchase
        // path) finished meanwhile is still in the stream, and needs nothing more.
        if inFlight[transaction.id] == nil {
            guard await store.unfinished().contains(where: { $0.id == transaction.id }) else { return }
        }
        _ = await retry(transaction, round ?? .update, attemptsMax: options.retry.attemptsMax)
    }

    /// nil when the purchase path owns the transaction (seed 000: unfinished transactions include the one
    /// being bought; the retry must leave it alone).
    func retry(_ transaction: StoreTransaction, _ trigger: RetryTrigger, attemptsMax: Int) async -> RetryOutcome? {
        switch inFlight[transaction.id] {
        case .purchase:
            return nil
        case .retry(_, let task):
            let outcome = await task.value
            noteInRound(outcome)
            return outcome
        case nil:
            let task = Task { await self.send(transaction, trigger, attemptsMax: attemptsMax) }
            inFlight[transaction.id] = .retry(productID: transaction.productID, task)
            let outcome = await task.value
            inFlight[transaction.id] = nil
            if case .credited(let s) = outcome.result, let c = s.customer { remember(c) }
            noteInRound(outcome)
            eventSink.yield(.retryFinished(outcome))
            return outcome
        }
    }

    /// Whichever waiter resumes first reports a retry that ended during a round; the others find it there.
    func noteInRound(_ outcome: RetryOutcome) {
        guard round != nil, !roundOutcomes.contains(where: { $0.processID == outcome.processID }) else { return }
        roundOutcomes.append(outcome)
    }

    /// One retry process: the same process ID for each attempt, doubling waits between retryable failures.
    func send(_ transaction: StoreTransaction, _ trigger: RetryTrigger, attemptsMax: Int) async -> RetryOutcome {
        let processID = "retry-\(trigger.rawValue)-" + options.makeUUID().uuidString.lowercased()
        var attempt = 0
        while true {
            attempt += 1
            do {
                let answer = try await backend.submit(transaction, customerID: customerID, processID: processID)
                await store.finish(transaction)
                let result: RetryOutcome.Result
                switch answer {
                case .credited(let s): result = .credited(s)
                case .alreadyProcessed(let s): result = .alreadyCredited(s)
                case .revoked(let e): result = .revoked(e)
                }
                return RetryOutcome(transaction: transaction, trigger: trigger, processID: processID, attempts: attempt, result: result)
            } catch {
                if error.isRetryable, attempt < attemptsMax, !Task.isCancelled {
                    await options.sleep(options.retry.delay(afterAttempt: attempt))
                    continue
                }
                return RetryOutcome(transaction: transaction, trigger: trigger, processID: processID, attempts: attempt,
                                    result: .stillUnfinished(error))
            }
        }
    }

    func announceUnfinished() async -> [StoreTransaction] {
        let left = await store.unfinished()
        if !left.isEmpty { eventSink.yield(.stillProcessing(left)) }
        return left
    }

    func remember(_ status: CustomerStatus) {
        customer = status
        eventSink.yield(.statusUpdated(status))
    }
}
