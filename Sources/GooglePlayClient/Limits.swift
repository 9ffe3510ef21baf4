// GooglePlayClient's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension HTTPKeySetSource {
    /// Google's set is about 2 KB.
    public static let bytesMax = 256 * 1024
}

extension GooglePlayDeveloperAPIClient {
    /// Bytes of a non-2xx answer read for its error (bigger bodies are not parsed).
    static let errorBodyBytesMax = 64 * 1024
}
