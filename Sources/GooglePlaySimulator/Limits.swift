// GooglePlaySimulator's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension PlayEngine {
    /// Bounds: purchases kept (new ones refused past it), notifications kept (the oldest settled ones dropped).
    static let purchasesMax = 100_000
    /// Real-time developer notifications kept (the oldest delivered ones forgotten first).
    static let notificationsMax = 100_000
    /// Push attempts per message before the simulator gives up (Pub/Sub would retry for its 7-day retention).
    static let pushAttemptsMax = 12
    /// Longest wait between push attempts, in milliseconds.
    static let pushBackoffMsMax: Int64 = 600_000
}

extension GooglePlaySimulator {
    /// How many pushes are sent at once.
    static let pushConcurrencyMax = 8
    /// Access tokens kept (expired ones are dropped first, then the oldest).
    static let accessTokensMax = 10_000
}

extension PlayStateFile {
    /// Largest state file read.
    static let bytesMax = 256 * 1024 * 1024
}
