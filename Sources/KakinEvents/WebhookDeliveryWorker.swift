import KakinCore
import KakinStorage
import Synchronization

/// Delivers the outbox's events to the configured webhook endpoints, at least once, in `sequence` order per customer
/// per endpoint, beside any number of workers in other processes on the same database.
///
/// A pass (run by `start()`'s loop: woken by `wake()`, else every `pollIntervalMs`):
/// 1. fan-out: events committed past each endpoint's cursor become `pending` deliveries (at most `fanOutBatchMax` per pass);
/// 2. claims: per endpoint, as many due customer chains as the endpoint has free slots (`concurrencyPerEndpoint`); each
///    claimed chain is sent by a task of its own, one delivery at a time (a customer's next event only after the
///    previous one was delivered or went dead), up to `chainRunMax` in a row, then the chain goes back;
/// 3. retention, at most every `retentionIntervalMs` and by one process at a time (a lease); a worker without endpoints
///    does only this, so the feed keeps `retentionDays` whether or not webhooks are configured.
///
/// What is bounded, and what happens at the bound:
/// - deliveries held in memory: `concurrencyPerEndpoint` per endpoint (each with its event's JSON, ≤ 1 MiB). A full
///   endpoint claims nothing more; its due chains wait in the database, oldest due first, and other endpoints go on.
///   A slow or dead endpoint therefore fills only its own slots, each for at most `timeoutMs` per attempt;
/// - events fanned out per pass: `fanOutBatchMax` (a full batch runs the next pass at once);
/// - an answer's body read: `URLSessionWebhookSender.excerptBytesMax`; stored: `KakinStore.answerExcerptMax`;
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
        /// Deliveries one claimed chain sends in a row before it goes back (fairness between a customer's backlog and others).
        public var chainRunMax = 100
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

    struct State {
        var inFlight: [String: Int] = [:]
        var registered = false
        var lastPurgeMs: Int64?
        var wakeRequested = false
        var sleeper: CheckedContinuation<Void, Never>?
        var loop: Task<Void, Never>?
        var stopped = false
        var runs: [Int: Task<Void, Never>] = [:]
        var nextRun = 0
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
        precondition(options.concurrencyPerEndpoint >= 1 && options.chainRunMax >= 1 && options.fanOutBatchMax >= 1, "a worker sends something")
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

    /// Deliveries each endpoint has in flight in this process now.
    public var inFlight: [String: Int] { state.withLock { $0.inFlight } }

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

    /// Stops the loop, then waits for the deliveries in flight: each finishes its attempt (at most `timeoutMs`) and
    /// records it, and sends no more.
    public func stop() async {
        let loop = state.withLock { s -> Task<Void, Never>? in
            s.stopped = true
            return s.loop
        }
        loop?.cancel()
        wake()
        await loop?.value
        while let run = state.withLock({ $0.runs.values.first }) { await run.value }
    }

    var isStopped: Bool { state.withLock { $0.stopped } }

    /// Waits for the deliveries a pass started (a caller that steps the worker itself, `kakin simulate`, runs a pass
    /// and then this, instead of the loop).
    public func waitForSends() async {
        while let run = state.withLock({ $0.runs.values.first }) { await run.value }
    }

    private func sleep() async {
        // A timer cancelled because something else woke the loop must not wake it again (a busy loop).
        let timer = Task { [self] in
            guard (try? await Task.sleep(for: .milliseconds(options.pollIntervalMs))) != nil else { return }
            wake()
        }
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
        timer.cancel()
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
            try await claimIntoFreeSlots(nowMs: now)
            try await purgeIfDue(nowMs: now)
            return fanOut.eventsRead >= options.fanOutBatchMax
        } catch {
            log(.warning, "webhook delivery pass failed; retrying at the next pass", ["error.id": .string(error.kind.id), "error.detail": .string(error.detail)])
            return false
        }
    }

    private func claimIntoFreeSlots(nowMs: Int64) async throws(KakinError) {
        let free = state.withLock { s in
            endpoints.filter { (s.inFlight[$0.id] ?? 0) < options.concurrencyPerEndpoint }.map(\.id)
        }
        if free.isEmpty { return }
        let due = try await store.dueWebhookEndpoints(endpointIds: free, nowMs: nowMs)
        for endpoint in endpoints where due.contains(endpoint.id) {
            // Take the slots before claiming, so the count never understates what is in flight.
            let slots = state.withLock { s -> Int in
                let n = options.concurrencyPerEndpoint - (s.inFlight[endpoint.id] ?? 0)
                if n > 0 { s.inFlight[endpoint.id, default: 0] += n }
                return max(0, n)
            }
            if slots == 0 { continue }
            let claims: [ClaimedWebhookDelivery]
            do {
                claims = try await store.claimWebhookDeliveries(endpointId: endpoint.id, owner: owner, nowMs: nowMs, leaseMs: options.leaseMs, limit: slots)
            } catch {
                state.withLock { $0.inFlight[endpoint.id, default: 0] -= slots }
                throw error
            }
            precondition(claims.count <= slots, "a claim holds at most the free slots")
            state.withLock { s in
                s.inFlight[endpoint.id, default: 0] -= slots - claims.count
                for claim in claims {
                    let id = s.nextRun
                    s.nextRun += 1
                    s.runs[id] = Task { [self] in
                        await self.run(claim, endpoint: endpoint)
                        state.withLock { s in
                            s.inFlight[endpoint.id, default: 0] -= 1
                            precondition(s.inFlight[endpoint.id, default: 0] >= 0, "in-flight counts never go below zero")
                            s.runs[id] = nil
                        }
                        wake()
                    }
                }
            }
        }
    }

    /// Sends a claimed chain's deliveries one after another: the next only after the previous one ended or was put
    /// off (then the chain goes back, due at its retry).
    private func run(_ first: ClaimedWebhookDelivery, endpoint: WebhookEndpoint) async {
        var claim: ClaimedWebhookDelivery? = first
        var sent = 0
        while let current = claim {
            sent += 1
            let result = await attempt(current, endpoint: endpoint)
            state.withLock { s in
                switch result.state {
                case .delivered: s.attempts[endpoint.id, default: AttemptCounts()].delivered += 1
                case .retrying: s.attempts[endpoint.id, default: AttemptCounts()].retrying += 1
                case .dead, .pending: s.attempts[endpoint.id, default: AttemptCounts()].dead += 1
                }
            }
            do {
                claim = try await store.finishWebhookDelivery(current, result: result, owner: owner, nowMs: clock.nowMs(), leaseMs: options.leaseMs,
                                                              continueChain: sent < options.chainRunMax && !isStopped)
            } catch {
                // The chain stays claimed until its lease runs out; the delivery is then sent again.
                log(.warning, "webhook delivery result not recorded; it will be sent again", [
                    "webhook.id": .string(endpoint.id), "event.id": .string(current.eventId), "error.id": .string(error.kind.id),
                    "error.detail": .string(error.detail)])
                claim = nil
            }
        }
    }

    /// One attempt and what it comes to on the schedule.
    func attempt(_ claim: ClaimedWebhookDelivery, endpoint: WebhookEndpoint) async -> WebhookAttemptResult {
        guard let payload = claim.payload else {
            return WebhookAttemptResult(state: .dead, status: nil, answer: "the event is no longer stored")
        }
        let request = WebhookRequest(endpoint: endpoint, eventId: claim.eventId, payload: payload,
                                     nowSeconds: clock.nowMs() / 1000, timeoutMs: options.timeoutMs)
        let response = await sender.send(request)
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
