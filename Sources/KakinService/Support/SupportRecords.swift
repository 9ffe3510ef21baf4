import KakinCore
import KakinStorage

/// The support desk's own records, written through this use case (the desk, `KakinAdmin`, writes nothing to storage
/// itself): its sign-in sessions and the recent errors its search finds by request ID; and the operator's record of
/// the clock rows are stamped with (local mode's simulated clock, which `kakin export` takes its window from).
public struct SupportRecords: Sendable {
    let store: any SupportRepository

    public init(store: any SupportRepository) {
        self.store = store
    }

    /// Stores a signed-in session (its token's SHA-256 only).
    public func startSession(_ session: AdminSession) async throws(KakinError) {
        try await store.createAdminSession(session)
    }

    public func endSession(tokenSHA256: String) async throws(KakinError) {
        try await store.deleteAdminSession(tokenSHA256: tokenSHA256)
    }

    /// Writes a batch of errors answered, keeping the table within `keepMax` rows and `keepForMs` (when `prune`).
    public func recordErrors(_ errors: [RecentError], keepMax: Int, keepForMs: Int64, prune: Bool) async throws(KakinError) {
        try await store.recordErrors(errors, keepMax: keepMax, keepForMs: keepForMs, prune: prune)
    }

    /// Records the clock rows are stamped with (local mode: the simulator's; `stopped` readings at shutdown).
    public func recordStampClock(_ reading: StampClock) async throws(KakinError) {
        try await store.recordStampClock(reading)
    }
}
