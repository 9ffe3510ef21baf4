// KakinEventsListener's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension WebhookListener {
    /// Event ids remembered for deduplication (and attempts counted for the fail rate), oldest forgotten first.
    public static let rememberedMax = 100_000
    /// What `kakin events listen` bounds a request body to (an event is at most 1 MiB).
    public static let bodyBytesMax = 2 << 20
}
