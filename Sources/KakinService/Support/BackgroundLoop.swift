import Foundation
import KakinCore
import Synchronization

/// A background job that runs its work, then sleeps until woken or until the poll interval passes:
/// the notification worker (woken when one arrives, polling for retries that come due) and the
/// Notification History recovery (every few minutes). Stops cleanly after its current pass.
public final class BackgroundLoop: Sendable {
    let pollIntervalMs: Int64
    private let state = Mutex<State>(State())

    struct State {
        var wakeRequested = false
        var sleeper: CheckedContinuation<Void, Never>?
        var task: Task<Void, Never>?
        var stopped = false
        /// Passes begun and finished; a pass counted in `passesBegun` has already read its work.
        var passesBegun = 0
        var passesFinished = 0
        /// Callers of `completePass()`, each waiting for the pass with this number to finish.
        var passWaiters: [(pass: Int, continuation: CheckedContinuation<Void, Never>)] = []
    }

    public init(pollIntervalMs: Int64 = 1000) { self.pollIntervalMs = pollIntervalMs }

    public func start(_ work: @escaping @Sendable () async -> Void) {
        let task = Task.detached { [self] in
            while !Task.isCancelled {
                state.withLock { $0.passesBegun += 1 }
                await work()
                finishPass()
                await self.sleep()
            }
            releasePassWaiters()
        }
        state.withLock { $0.task = task }
    }

    /// Wakes the loop and returns once a pass that began after this call has finished: everything
    /// handed over before the call has had its turn. Returns at once when the loop is not running.
    /// (Local mode's read-your-writes: the simulator answers only after Kakin applied what it sent.)
    public func completePass() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let waiting = state.withLock { s -> Bool in
                guard s.task != nil, !s.stopped else { return false }
                s.passWaiters.append((pass: s.passesBegun + 1, continuation: c))
                return true
            }
            if waiting { wake() } else { c.resume() }
        }
    }

    private func finishPass() {
        let done = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.passesFinished += 1
            let finished = s.passesFinished
            let (ready, waiting) = (s.passWaiters.filter { $0.pass <= finished }, s.passWaiters.filter { $0.pass > finished })
            s.passWaiters = waiting
            return ready.map(\.continuation)
        }
        for c in done { c.resume() }
    }

    private func releasePassWaiters() {
        let all = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            defer { s.passWaiters = [] }
            return s.passWaiters.map(\.continuation)
        }
        for c in all { c.resume() }
    }

    /// Waiting for a wake-up or its timer, with none pending: a resting loop (what a test polls for).
    var isAsleep: Bool { state.withLock { $0.sleeper != nil && !$0.wakeRequested } }

    /// Makes the loop run again now.
    public func wake() {
        let sleeper = state.withLock { s -> CheckedContinuation<Void, Never>? in
            s.wakeRequested = true
            defer { s.sleeper = nil }
            return s.sleeper
        }
        sleeper?.resume()
    }

    private func sleep() async {
        // A timer cancelled because something else woke the loop must not wake it again: that would
        // start the next pass at once, whose timer is cancelled in turn — a busy loop on an idle server.
        let timer = Task { [self] in
            guard (try? await Task.sleep(for: .milliseconds(pollIntervalMs))) != nil else { return }
            wake()
        }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.wakeRequested || s.stopped {
                    s.wakeRequested = false
                    return true
                }
                s.sleeper = c
                return false
            }
            if resumeNow { c.resume() }
        }
        state.withLock { $0.wakeRequested = false }
        timer.cancel()
    }

    /// Stops the loop after its current pass.
    public func stop() async {
        let task = state.withLock { s -> Task<Void, Never>? in
            s.stopped = true
            return s.task
        }
        task?.cancel()
        wake()
        await task?.value
    }
}
