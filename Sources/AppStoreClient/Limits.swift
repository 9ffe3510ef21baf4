// AppStoreClient's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension UploadMessageRequest {
    /// A retention message's header, in characters (Apple's limit).
    public static let headerCharactersMax = 66
    /// A retention message's body, in characters (Apple's limit).
    public static let bodyCharactersMax = 144
    /// An image's alternative text, in characters (Apple's limit).
    public static let altTextCharactersMax = 150
    /// Bullet points in one message (Apple's limit).
    public static let bulletPointsMax = 5
}

extension AppStoreServerAPIClient {
    /// Reports one page of `errors` at most (Apple lists one per bad field).
    static let reportErrorsMax = 200
    /// Apple's error bodies are a few dozen bytes (a refused external purchase report lists one error per bad
    /// field, ~150 bytes each); bigger non-2xx bodies are not parsed.
    static let errorBodyBytesMax = 64 * 1024
    /// Characters of Apple's `errorMessage` kept in an error's detail.
    static let errorMessageCharactersMax = 300
    /// JSON nesting read from Apple's answers.
    static let responseDepthMax = 16
}
