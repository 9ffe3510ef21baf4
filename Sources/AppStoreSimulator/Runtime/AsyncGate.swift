import Synchronization

/// Lets one async task at a time through, in arrival order. Advancing the clock delivers notifications
/// between steps (awaiting I/O); the gate keeps a second advance or action from interleaving with it.
/// Reads never take it: they only hold the engine's lock, briefly.
final class AsyncGate: Sendable {
    private struct State {
        var busy = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let enter = state.withLock { s in
                if s.busy {
                    s.waiters.append(continuation)
                    return false
                }
                s.busy = true
                return true
            }
            if enter { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.waiters.isEmpty {
                s.busy = false
                return nil
            }
            return s.waiters.removeFirst()
        }
        next?.resume()
    }
}
