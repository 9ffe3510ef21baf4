import Foundation
import Synchronization

/// The database's dedicated threads: blocking SQLite calls never run on Swift's cooperative pool.
///
/// Counts running threads so `waitUntilAllExited()` can suspend (not block) until they are gone.
package final class WorkerThreads: Sendable {
    private struct State {
        var running = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    package init() {}

    /// Starts a thread running `body`, named `name` (Linux shows at most 15 characters). `sending`: the body's captures (a connection) move to that
    /// thread and stay there.
    package func start(name: String, _ body: sending @escaping () -> Void) {
        state.withLock { $0.running += 1 }
        let transfer = TransferredBody(body: body)
        let thread = Thread { [self] in
            transfer.body()
            didExit()
        }
        thread.name = name
        thread.start()
    }

    package func waitUntilAllExited() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let exited = state.withLock { state in
                if state.running == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if exited { continuation.resume() }
        }
    }

    private func didExit() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.running -= 1
            guard state.running == 0 else { return [] }
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Carries a `sending` closure into `Thread`'s `@Sendable` block. Sound because `start` took the
/// closure as `sending`: nothing else can reach what it captured.
private struct TransferredBody: @unchecked Sendable {
    let body: () -> Void
}
