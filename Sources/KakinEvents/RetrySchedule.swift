import KakinStorage

/// When a failed webhook delivery is tried again (the contract: 1 s doubling to 1 h, for 72 h, then `dead`).
/// Pure: times in, decision out. Tests and the benchmarks scale it down; production uses the defaults.
public struct RetrySchedule: Sendable, Hashable {
    /// The wait after the first failed attempt.
    public var firstDelayMs: Int64
    /// Waits double up to this.
    public var delayMaxMs: Int64
    /// How long after a delivery is created (or replayed) it may still be retried: its deadline.
    public var windowMs: Int64

    public init(firstDelayMs: Int64 = 1_000, delayMaxMs: Int64 = 3_600_000, windowMs: Int64 = 72 * 3_600_000) {
        precondition(firstDelayMs >= 1 && delayMaxMs >= firstDelayMs && windowMs >= 0, "a schedule waits at least 1 ms, doubling up to its maximum")
        self.firstDelayMs = firstDelayMs
        self.delayMaxMs = delayMaxMs
        self.windowMs = windowMs
    }

    /// The wait after the `failedAttempts`-th failed attempt (1 = the first): `firstDelayMs × 2^(n−1)`, at most `delayMaxMs`.
    public func delayMs(afterFailedAttempts failedAttempts: Int) -> Int64 {
        precondition(failedAttempts >= 1, "a delay follows a failed attempt")
        var delay = firstDelayMs
        for _ in 1..<min(failedAttempts, 64) {
            if delay > delayMaxMs / 2 { return delayMaxMs }
            delay *= 2
        }
        return min(delay, delayMaxMs)
    }

    public enum Decision: Sendable, Hashable {
        case retry(atMs: Int64)
        case dead
    }

    /// After the `failedAttempts`-th failed attempt at `nowMs`: retry after the delay, unless that is past `deadlineMs`.
    public func afterFailure(failedAttempts: Int, nowMs: Int64, deadlineMs: Int64) -> Decision {
        let (next, overflow) = nowMs.addingReportingOverflow(delayMs(afterFailedAttempts: failedAttempts))
        return !overflow && next <= deadlineMs ? .retry(atMs: next) : .dead
    }

    /// The deadline of a delivery created (or replayed) at `nowMs`.
    public func deadline(fromMs nowMs: Int64) -> Int64 { nowMs.addingReportingOverflow(windowMs).overflow ? .max : nowMs + windowMs }
}
