// HTTPServer's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension RunningDaemon {
    /// A longer grace period is taken as this one (a day); so is infinity.
    static let gracePeriodSecondsMax = 86_400.0
}

extension ServerRuntime {
    /// Bytes reserved up front for a body of a declared length (the rest grows as it arrives).
    static let bodyReserveBytesMax = 64 * 1024
}
