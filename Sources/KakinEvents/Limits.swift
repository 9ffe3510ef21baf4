// KakinEvents's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension EventTypeFilter {
    /// Patterns in one filter, at most.
    public static let patternsMax = 64
}

extension WebhookEndpoint {
    /// Longest endpoint id (it names the endpoint in URLs, metrics and the database).
    public static let idLengthMax = 64
    /// Characters of an endpoint's URL.
    public static let urlLengthMax = 2048
    /// Secrets in `secretEnv`, at most: the current one and the one being rotated out.
    public static let secretsMax = 2
}

extension EventsSettings {
    /// Webhook endpoints configured.
    public static let webhooksMax = 16
}

extension HTTPWebhookSender {
    /// Bytes of a receiver's answer kept with a delivery.
    public static let excerptBytesMax = 1024
}
