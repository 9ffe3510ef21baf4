import KakinCore
import KakinStorage
import Synchronization

/// Delivers the outbox's events to the configured webhook endpoints, at least once, in `sequence` order per customer
/// per endpoint, beside any number of workers in other processes on the same database.
///
/// A pass (run by `start()`'s loop: woken by `wake()`, else every `pollIntervalMs`):
/// 1. fan-out: events committed past each endpoint's cursor become `pending` deliveries (at most `fanOutBatchMax` per pass);
/// 2. claims: an endpoint with due customer chains and room for more claims them (`KakinStore.settleWebhookDeliveries`),
///    each with its oldest undone delivery; `concurrencyPerEndpoint` of them are sent at a time, the rest wait in memory.
///    As sends end, their results are recorded in batches: one write records every attempt that ended meanwhile, puts
///    their chains back and claims due chains again — those just put back among them, with their next delivery — so a
///    customer's next event goes out only after the previous one was delivered or went dead, and a backlog drains at
///    one write per batch of deliveries, not one per delivery;
/// 3. retention, at most every `retentionIntervalMs` and by one process at a time (a lease); a worker without endpoints
///    does only this, so the feed keeps `retentionDays` whether or not webhooks are configured.
///
/// What is bounded, and what happens at the bound:
/// - deliveries held in memory: `heldMax` per endpoint (a few rounds of `concurrencyPerEndpoint`, each with its event's
///   JSON, ≤ 1 MiB), of which `concurrencyPerEndpoint` are being sent. A full endpoint claims nothing more; its due chains wait
///   in the database, oldest due first, and other endpoints go on. A slow or dead endpoint therefore fills only its own
///   slots, each for at most `timeoutMs` per attempt; a claim that waited in memory until its lease could end during an
///   attempt is put back unsent;
/// - events fanned out per pass: `fanOutBatchMax` (a full batch runs the next pass at once);
/// - an answer's body read: `HTTPWebhookSender.excerptBytesMax`; stored: `KakinStore.answerExcerptMax`;
/// - the durable queue (the tables): every undone delivery ends, delivered or dead, once its deadline (`schedule.windowMs`
///   after fan-out or replay) passed and it had an attempt; finished deliveries and events go after `retentionDays`,
///   never an event a cursor has not read yet (an endpoint's fan-out, the business numbers': `heldBackCursors`).
/// - a chain's lease (`leaseMs`, above `timeoutMs`): a worker that dies holding chains delays them by at most that much,
///   and the delivery it was sending is sent again.
public final class WebhookDeliveryWorker: Sendable {
    public struct Options: Sendable {
        /// Deliveries in flight per endpoint, at most (customer chains sent side by side).
        public var concurrencyPerEndpoint = 8
        /// One attempt's deadline (the contract: 10 s).
        public var timeoutMs: Int64 = 10_000
        /// How long a claim holds a chain; above `timeoutMs`, so a live worker never loses one mid-send.
        public var leaseMs: Int64 = 60_000
        public var pollIntervalMs: Int64 = 1_000
        public var fanOutBatchMax = 500
        public var schedule = RetrySchedule()
        /// Events and finished deliveries older than this are purged (`events.retentionDays`).
        public var retentionDays = 30
        public var retentionIntervalMs: Int64 = 3_600_000
        /// Rows one retention write deletes; a pass runs at most `retentionBatchesMax` of them.
        public var retentionBatchMax = 1_000
        public var retentionBatchesMax = 10

        public init() {}
    }

    public enum LogLevel: String, Sendable { case info, warning, error }
    public typealias Log = @Sendable (_ level: LogLevel, _ message: String, _ metadata: [String: JSONValue]) -> Void

    let store: KakinStore
    public let endpoints: [WebhookEndpoint]
    let sender: any WebhookSender
    /// Real time: schedules, leases and the signatures' `t=` (receivers compare it with their own clock).
    let clock: any Clock
    /// The clock events are stamped with (Kakin's: the simulator's in local mode), for their retention.
    let eventClock: any Clock
    /// This process's name in claims (`claimed_by`).
    public let owner: String
    public let options: Options
    let log: Log
    private let state = Mutex(State())

    /// Claims an endpoint holds per slot at most: while `concurrencyPerEndpoint` deliveries are being sent, the rest
    /// wait to be sent or recorded, so sends never wait for a write, and records come in larger batches.
    public static let claimsPerSlotMax = 16

    /// One endpoint's deliveries in this process: claimed and waiting to be sent, being sent, ended and waiting to be
    /// recorded. Every claim is in exactly one of these until a settle records it or puts it back.
    struct EndpointDeliveries {
        var ready: [(claim: ClaimedWebhookDelivery, leaseUntilMs: Int64)] = []
        var sending = 0
        var ended: [(claim: ClaimedWebhookDelivery, result: WebhookAttemptResult)] = []
        /// Claimed and never sent (stopping, or held too near their lease's end): put back by the next settle.
        var unsent: [ClaimedWebhookDelivery] = []
        /// Claims held: ready, being sent, ended or unsent, not settled yet.
        var held = 0
        var settling = false
        /// A pass found due chains: claim at the next settle.
        var claimWanted = false

        var isIdle: Bool { held == 0 && !settling }
    }

    struct State {
        var deliveries: [String: EndpointDeliveries] = [:]
        var idleWaiters: [CheckedContinuation<Void, Never>] = []
        var registered = false
        var lastPurgeMs: Int64?
        var wakeRequested = false
        var sleeper: CheckedContinuation<Void, Never>?
        var loop: Task<Void, Never>?
        /// Wakes the loop every `pollIntervalMs` if it sleeps (one timer for the worker's life, not one per pass).
        var ticker: Task<Void, Never>?
        var stopped = false
        /// Attempts this process made per endpoint, by what they came to (`/metrics`).
        var attempts: [String: AttemptCounts] = [:]
    }

    /// What this process's attempts to one endpoint came to, since it started.
    public struct AttemptCounts: Sendable, Hashable {
        public var delivered = 0
        public var retrying = 0
        public var dead = 0
        public init() {}
    }

    /// - Parameters:
    ///   - clock: real time (schedules, leases, signatures).
    ///   - eventClock: the clock the ingest stamps events with, when it is not `clock` (local mode's simulated time).
    ///   - owner: this process's name in claims (as the notification inbox's).
    public init(store: KakinStore, endpoints: [WebhookEndpoint], sender: any WebhookSender, clock: any Clock, eventClock: (any Clock)? = nil,
                owner: String, options: Options = Options(), log: @escaping Log = { _, _, _ in }) {
        precondition(Set(endpoints.map(\.id)).count == endpoints.count, "endpoint ids are unique")
        precondition(options.concurrencyPerEndpoint >= 1 && options.fanOutBatchMax >= 1, "a worker sends something")
        precondition(options.timeoutMs >= 1 && options.leaseMs > options.timeoutMs, "a lease outlasts an attempt")
        precondition(options.pollIntervalMs >= 1 && options.retentionDays >= 1, "the worker polls and keeps events at least a day")
        self.store = store
        self.endpoints = endpoints
        self.sender = sender
        self.clock = clock
        self.eventClock = eventClock ?? clock
        self.owner = owner
        self.options = options
        self.log = log
    }

    /// Deliveries each endpoint is being sent in this process now.
    public var inFlight: [String: Int] { state.withLock { $0.deliveries.mapValues(\.sending) } }

    /// Attempts this process made per endpoint since it started, by outcome.
    public var attemptCounts: [String: AttemptCounts] { state.withLock { $0.attempts } }

    /// How long the oldest event waiting for an endpoint has waited (`counts` from `KakinStore.webhookCounts`): an
    /// undone delivery by this worker's clock, an event not fanned out yet by the events' clock; nil when none waits.
    public func oldestWaitingAgeMs(_ counts: WebhookEndpointCounts) -> Int64? {
        let ages = [counts.oldestDeliveryCreatedAtMs.map { clock.nowMs() - $0 }, counts.oldestNotFannedOutCreatedAtMs.map { eventClock.nowMs() - $0 }]
        return ages.compactMap { $0 }.max().map { max(0, $0) }
    }

    // MARK: The loop

    /// Registers the endpoints' fan-out cursors at the current end of the feed (an endpoint seen for the first time
    /// delivers what commits from then on). Await it before the process takes requests, so nothing it ingests is
    /// behind a cursor registered later; `runPass` does it too when it was not done.
    public func prepare() async throws(KakinError) {
        if endpoints.isEmpty || state.withLock({ $0.registered }) { return }
        try await store.registerWebhookCursors(endpointIds: endpoints.map(\.id), nowMs: clock.nowMs())
        state.withLock { $0.registered = true }
    }

    /// Starts the loop (once).
    public func start() {
        state.withLock { s in
            precondition(s.loop == nil, "a worker starts once")
            s.loop = Task.detached { [self] in
                while !Task.isCancelled, !isStopped {
                    if !(await runPass()) { await sleep() }
                }
            }
            s.ticker = Task.detached { [self] in
                while (try? await Task.sleep(for: .milliseconds(options.pollIntervalMs))) != nil { tick() }
            }
        }
    }

    /// Runs a pass now (after one in progress): the ingest calls it after committing events, for low latency.
    public func wake() {
        let sleeper = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.wakeRequested = true
            defer { s.sleeper = nil }
            return s.sleeper
        }
        sleeper?.resume()
    }

    /// The poll: wakes the loop if it sleeps. A pass longer than `pollIntervalMs` (a loaded machine) is not followed by
    /// another at once, as a `wake()` during it would make it: polls come at most every `pollIntervalMs`, and at most
    /// that long after the loop began to sleep.
    private func tick() {
        let sleeper = state.withLock { s -> CheckedContinuation<Void, Never>? in
            defer { s.sleeper = nil }
            return s.sleeper
        }
        sleeper?.resume()
    }

    /// Stops the loop, then waits for the deliveries in flight: each finishes its attempt (at most `timeoutMs`) and
    /// records it, and sends no more.
    public func stop() async {
        let (loop, ticker) = state.withLock { s in
            s.stopped = true
            return (s.loop, s.ticker)
        }
        ticker?.cancel()
        loop?.cancel()
        wake()
        await loop?.value
        for endpoint in endpoints { pump(endpoint) }
        await waitForSends()
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Waits until no endpoint holds a claim: every delivery a pass started was sent and recorded, and so were the
    /// chains' next ones that were due (a caller that steps the worker itself, `kakin simulate`, runs a pass and then
    /// this, instead of the loop).
    public func waitForSends() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let idle = state.withLock { s -> Bool in
                if s.deliveries.values.allSatisfy(\.isIdle) { return true }
                s.idleWaiters.append(c)
                return false
            }
            if idle { c.resume() }
        }
    }

    /// Until `wake()` (the ingest's, since the last pass began), or the ticker's next poll (at most `pollIntervalMs` on).
    private func sleep() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.wakeRequested || s.stopped {
                    s.wakeRequested = false
                    return true
                }
                s.sleeper = c
                return false
            }
            if now { c.resume() }
        }
        state.withLock { $0.wakeRequested = false }
    }

    // MARK: A pass

    /// One pass: register new endpoints, fan out, claim into free slots (the sends run on after it returns), retention.
    /// Answers whether more work is waiting right now (a full fan-out batch).
    @discardableResult
    public func runPass() async -> Bool {
        let now = clock.nowMs()
        do {
            // Without endpoints the worker only keeps the feed to its retention.
            if endpoints.isEmpty {
                try await purgeIfDue(nowMs: now)
                return false
            }
            try await prepare()
            let fanOut = try await store.fanOutWebhookEvents(routes: endpoints.map(\.route), nowMs: now,
                                                             deadlineMs: options.schedule.deadline(fromMs: now), batchMax: options.fanOutBatchMax)
            try await claimDue(nowMs: now, fannedOut: fanOut.endpointsDue)
            try await purgeIfDue(nowMs: now)
            return fanOut.eventsRead >= options.fanOutBatchMax
        } catch {
            log(.warning, "webhook delivery pass failed; retrying at the next pass", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return false
        }
    }

    /// Claims for the endpoints with room that have due chains: those the fan-out just gave deliveries (no read needed),
    /// and those an indexed read finds due (retries come due by time).
    private func claimDue(nowMs: Int64, fannedOut: Set<String>) async throws(KakinError) {
        let room = state.withLock { s in
            s.stopped ? [] : endpoints.filter { (s.deliveries[$0.id]?.held ?? 0) < heldMax }.map(\.id)
        }
        if room.isEmpty { return }
        let unknown = room.filter { !fannedOut.contains($0) }
        let due = fannedOut.union(unknown.isEmpty ? [] : try await store.dueWebhookEndpoints(endpointIds: unknown, nowMs: nowMs))
        for endpoint in endpoints where due.contains(endpoint.id) && room.contains(endpoint.id) {
            state.withLock { $0.deliveries[endpoint.id, default: EndpointDeliveries()].claimWanted = true }
            pump(endpoint)
        }
    }

    /// Claims one endpoint holds at most: `concurrencyPerEndpoint` per slot-round of attempts a claim can wait through
    /// and still be sent before its lease ends (`leaseMs / timeoutMs - 1`: 5 with the contract's 10 s and 60 s), at most
    /// `claimsPerSlotMax`.
    var heldMax: Int { options.concurrencyPerEndpoint * max(1, min(Self.claimsPerSlotMax, Int(options.leaseMs / options.timeoutMs) - 1)) }

    /// Moves one endpoint's deliveries along: starts sends into free slots, and starts a settle (one write) for what
    /// ended or is put back, claiming again when it records ended deliveries (their chains' next ones), when a pass found
    /// due chains, or when the last claim came back full. At most one settle per endpoint runs at a time; sends go on
    /// meanwhile.
    private func pump(_ endpoint: WebhookEndpoint) {
        let now = clock.nowMs()
        let (sends, settle, idleWaiters) = state.withLock { s in
            var d = s.deliveries[endpoint.id, default: EndpointDeliveries()]
            var sends: [ClaimedWebhookDelivery] = []
            while !d.ready.isEmpty, s.stopped || d.sending + sends.count < options.concurrencyPerEndpoint {
                let next = d.ready.removeFirst()
                // Sent only if its attempt ends before the lease does: else another worker may take the chain meanwhile.
                if s.stopped || now + options.timeoutMs >= next.leaseUntilMs {
                    d.unsent.append(next.claim)
                } else {
                    sends.append(next.claim)
                }
            }
            d.sending += sends.count
            var settle: (ended: [(claim: ClaimedWebhookDelivery, result: WebhookAttemptResult)], unsent: [ClaimedWebhookDelivery], claimLimit: Int)?
            // Recording ended deliveries puts their chains back: claim again, so each chain's next delivery comes along.
            let room = heldMax - (d.held - d.ended.count - d.unsent.count)
            let claimLimit = s.stopped || !(d.claimWanted || !d.ended.isEmpty) ? 0 : max(0, room)
            // Recorded in batches of a slot-round at least, unless the sends would run dry first.
            let recordNow = !d.ended.isEmpty
                && (d.ended.count >= options.concurrencyPerEndpoint || d.ready.count < options.concurrencyPerEndpoint || d.sending == 0 || s.stopped)
            if !d.settling, recordNow || !d.unsent.isEmpty || (d.claimWanted && claimLimit > 0) {
                let taken = min(d.ended.count, KakinStore.settleBatchMax)
                let unsent = min(d.unsent.count, KakinStore.settleBatchMax - taken)
                settle = (Array(d.ended.prefix(taken)), Array(d.unsent.prefix(unsent)), max(0, claimLimit))
                d.ended.removeFirst(taken)
                d.unsent.removeFirst(unsent)
                d.settling = true
                d.claimWanted = false
            }
            s.deliveries[endpoint.id] = d
            var waiters: [CheckedContinuation<Void, Never>] = []
            if s.deliveries.values.allSatisfy(\.isIdle) { swap(&waiters, &s.idleWaiters) }
            return (sends, settle, waiters)
        }
        for waiter in idleWaiters { waiter.resume() }
        for claim in sends {
            // On the sender's thread when the exchange ends: no task per delivery, and the next send starts from there.
            attempt(claim, endpoint: endpoint) { [self] result in
                state.withLock { s in
                    s.deliveries[endpoint.id]!.sending -= 1
                    s.deliveries[endpoint.id]!.ended.append((claim, result))
                    switch result.state {
                    case .delivered: s.attempts[endpoint.id, default: AttemptCounts()].delivered += 1
                    case .retrying: s.attempts[endpoint.id, default: AttemptCounts()].retrying += 1
                    case .dead, .pending: s.attempts[endpoint.id, default: AttemptCounts()].dead += 1
                    }
                }
                pump(endpoint)
            }
        }
        if let settle {
            Task { [self] in await self.settle(endpoint, settle.ended, settle.unsent, claimLimit: settle.claimLimit) }
        }
    }

    /// One settle: records what ended, puts back what was not sent, claims up to `claimLimit` chains; then pumps again.
    private func settle(_ endpoint: WebhookEndpoint, _ ended: [(claim: ClaimedWebhookDelivery, result: WebhookAttemptResult)],
                        _ unsent: [ClaimedWebhookDelivery], claimLimit: Int) async {
        let now = clock.nowMs()
        var claimed: [ClaimedWebhookDelivery] = []
        do {
            claimed = try await store.settleWebhookDeliveries(endpointId: endpoint.id, results: ended, unattempted: unsent, owner: owner, nowMs: now,
                                                              leaseMs: options.leaseMs, claimLimit: claimLimit)
        } catch {
            // Their chains stay claimed until the lease runs out; the deliveries are then sent again.
            log(.warning, "webhook delivery results not recorded; they will be sent again", [
                "webhook.id": .string(endpoint.id), "deliveries": .int(ended.count + unsent.count), "error.id": .string(error.kind.id),
                "error.detail": .string(error.detail)])
        }
        state.withLock { s in
            var d = s.deliveries[endpoint.id]!
            precondition(claimed.count <= max(claimLimit, 0), "a claim holds at most what was asked")
            d.held += claimed.count - ended.count - unsent.count
            precondition(d.held >= 0, "held claims never go below zero")
            d.ready += claimed.map { ($0, now + options.leaseMs) }
            d.settling = false
            // A full claim: more chains may be due.
            if claimLimit > 0, claimed.count == claimLimit { d.claimWanted = true }
            s.deliveries[endpoint.id] = d
        }
        pump(endpoint)
    }

    /// One attempt; `completion` gets what it comes to on the schedule (on the sender's thread).
    func attempt(_ claim: ClaimedWebhookDelivery, endpoint: WebhookEndpoint, completion: @escaping @Sendable (WebhookAttemptResult) -> Void) {
        guard let payload = claim.payload else {
            return completion(WebhookAttemptResult(state: .dead, status: nil, answer: "the event is no longer stored"))
        }
        let request = WebhookRequest(endpoint: endpoint, eventId: claim.eventId, payload: payload,
                                     nowSeconds: clock.nowMs() / 1000, timeoutMs: options.timeoutMs)
        sender.send(request) { [self] response in completion(result(of: response, claim, endpoint: endpoint)) }
    }

    /// What an answer comes to on the schedule.
    private func result(of response: WebhookResponse, _ claim: ClaimedWebhookDelivery, endpoint: WebhookEndpoint) -> WebhookAttemptResult {
        let status: Int?
        let answer: String
        switch response {
        case .answered(let s, let excerpt):
            if (200...299).contains(s) { return WebhookAttemptResult(state: .delivered, status: s, answer: excerpt.isEmpty ? nil : excerpt) }
            (status, answer) = (s, excerpt)
        case .failed(let reason):
            (status, answer) = (nil, reason)
        }
        switch options.schedule.afterFailure(failedAttempts: claim.attempts + 1, nowMs: clock.nowMs(), deadlineMs: claim.deadlineMs) {
        case .retry(let at): return WebhookAttemptResult(state: .retrying, status: status, answer: answer, nextAttemptMs: at)
        case .dead:
            log(.warning, "webhook delivery is dead (replay it once the endpoint takes it)", [
                "webhook.id": .string(endpoint.id), "event.id": .string(claim.eventId), "http.status": .int(status),
                "attempts": .int(claim.attempts + 1)])
            return WebhookAttemptResult(state: .dead, status: status, answer: answer)
        }
    }

    // MARK: Retention

    var retentionMs: Int64 { Int64(options.retentionDays) * 86_400_000 }

    /// Each cursor that reads the outbox (`webhook:<id>` per endpoint, `metrics` for the business numbers) and whether it
    /// is held back past the retention window: the first event it has not read is older than `retentionDays` by the
    /// events' clock. Retention never purges an event a cursor has not read, so such a cursor keeps the outbox growing
    /// instead of losing data: `/metrics` shows it (`kakin_outbox_cursor_held_back`) and the desk warns.
    public func heldBackCursors() async throws(KakinError) -> [(cursor: String, heldBack: Bool)] {
        let cutoff = eventClock.nowMs() - retentionMs
        return try await store.outboxCursorLags(endpointIds: endpoints.map(\.id)).map { lag in
            (lag.name, lag.oldestUnreadCreatedAtMs.map { $0 < cutoff } ?? false)
        }
    }

    /// Name of the lease that makes one process at a time purge (the others find nothing left anyway).
    static let retentionLease = "eventsRetention"

    private func purgeIfDue(nowMs: Int64) async throws(KakinError) {
        let due = state.withLock { s in s.lastPurgeMs.map { nowMs - $0 >= options.retentionIntervalMs } ?? true }
        if !due { return }
        state.withLock { $0.lastPurgeMs = nowMs }
        // In turn with the other processes: once per interval across all of them.
        guard try await store.takeLease(Self.retentionLease, owner: owner, nowMs: nowMs, untilMs: nowMs + options.retentionIntervalMs * 9 / 10) else { return }
        let (eventCutoff, deliveryCutoff) = (eventClock.nowMs() - retentionMs, nowMs - retentionMs)
        for _ in 0..<options.retentionBatchesMax {
            let purged = try await store.purgeOutbox(eventCutoffMs: eventCutoff, deliveryCutoffMs: deliveryCutoff, endpointIds: endpoints.map(\.id),
                                                     batchMax: options.retentionBatchMax)
            if purged.events < options.retentionBatchMax, purged.deliveries < options.retentionBatchMax { break }
        }
    }
}
