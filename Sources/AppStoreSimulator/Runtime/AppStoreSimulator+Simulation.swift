import KakinCore

extension AppStoreSimulator {
    /// The notifications queued after `seq`, oldest first, with their signed payloads: how `kakin simulate` takes what
    /// the App Store sent when it runs the simulator without a sink (the world delivers them itself, with its faults).
    public func signedNotifications(after seq: Int64) -> [(seq: Int64, signedPayload: String)] {
        core.withLock { c in c.engine.notifications(after: seq).map { ($0.seq, $0.jws) } }
    }
}

extension SimulatorState {
    /// The notifications after `seq`: a binary search, as seqs increase along the list (appended in order; trimming
    /// removes, never reorders).
    func notifications(after seq: Int64) -> ArraySlice<SimNotification> {
        var low = store.notifications.startIndex, high = store.notifications.endIndex
        while low < high {
            let mid = (low + high) / 2
            if store.notifications[mid].seq <= seq { low = mid + 1 } else { high = mid }
        }
        return store.notifications[low...]
    }
}
