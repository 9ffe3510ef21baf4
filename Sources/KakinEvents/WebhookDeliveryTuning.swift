/// Config `events.delivery` (an addition to the contract's `events`): how this process's delivery worker times its
/// attempts, leases and retries. Absent = the contract's values (10 s per attempt, retries from 1 s doubling to 1 h
/// for 72 h). Meant for tests and benchmarks that run Kakin as a process (a short deadline, a short lease so a killed
/// process's claims come back soon), and for an operator who must answer a slow receiver sooner or later.
public struct WebhookDeliveryTuning: Sendable, Hashable {
    public static let timeoutMsRange: ClosedRange<Int64> = 100...60_000
    public static let leaseMsRange: ClosedRange<Int64> = 200...3_600_000
    public static let delayMsRange: ClosedRange<Int64> = 1...86_400_000
    public static let windowHoursRange: ClosedRange<Int64> = 1...720
    public static let concurrencyRange: ClosedRange<Int64> = 1...64
    public static let pollIntervalMsRange: ClosedRange<Int64> = 10...60_000

    public var timeoutMs: Int64?
    public var leaseMs: Int64?
    public var retryFirstDelayMs: Int64?
    public var retryMaxDelayMs: Int64?
    public var retryWindowHours: Int64?
    public var concurrencyPerEndpoint: Int?
    public var pollIntervalMs: Int64?

    public init() {}

    /// Why these values cannot work together (a lease must outlast an attempt; the first delay is at most the
    /// longest), or nil.
    public func problem(base: WebhookDeliveryWorker.Options = WebhookDeliveryWorker.Options()) -> String? {
        var o = base
        applyUnchecked(to: &o)
        if o.leaseMs <= o.timeoutMs { return "leaseMs must be longer than timeoutMs (\(o.timeoutMs))" }
        if o.schedule.delayMaxMs < o.schedule.firstDelayMs { return "retryMaxDelayMs must be at least retryFirstDelayMs (\(o.schedule.firstDelayMs))" }
        return nil
    }

    /// The worker's options with these values in place of `options`' (checked against the defaults when the
    /// configuration was read; over other options, a lease that would not outlast an attempt becomes twice the attempt).
    public func apply(to options: inout WebhookDeliveryWorker.Options) {
        applyUnchecked(to: &options)
        if options.leaseMs <= options.timeoutMs { options.leaseMs = options.timeoutMs * 2 }
    }

    private func applyUnchecked(to o: inout WebhookDeliveryWorker.Options) {
        if let v = timeoutMs { o.timeoutMs = v }
        if let v = leaseMs { o.leaseMs = v }
        if let v = concurrencyPerEndpoint { o.concurrencyPerEndpoint = v }
        if let v = pollIntervalMs { o.pollIntervalMs = v }
        let first = retryFirstDelayMs ?? o.schedule.firstDelayMs
        let maxDelay = retryMaxDelayMs ?? max(o.schedule.delayMaxMs, first)
        o.schedule = RetrySchedule(firstDelayMs: first, delayMaxMs: max(maxDelay, 1), windowMs: retryWindowHours.map { $0 * 3_600_000 } ?? o.schedule.windowMs)
    }
}
