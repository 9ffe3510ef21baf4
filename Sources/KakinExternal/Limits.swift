// KakinExternal's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension ExternalPurchaseReportJob {
    /// Errors kept per failed report (Apple lists one per bad field).
    public static let errorsKeptMax = 100
}

extension ExternalPurchaseToken {
    /// Characters of an external purchase token (base64url).
    public static let tokenLengthMax = 4096
    /// Characters of a token's `externalPurchaseId`.
    public static let externalPurchaseIdLengthMax = 128
    /// Characters of a token's bundle ID.
    public static let bundleIdLengthMax = 255
}

extension ExternalPurchaseInput {
    /// Characters of a provider's name.
    public static let providerLengthMax = 32
    /// Characters of the provider's purchase ID.
    public static let externalIdLengthMax = 255
    /// Characters of a product ID.
    public static let productIdLengthMax = 255
    /// 10¹² minor units: far above any real price, far below overflow when converted to milli-units.
    public static let priceMax: Int64 = 1_000_000_000_000
    /// Characters of an Apple external purchase token sent with a purchase.
    public static let tokenLengthMax = 4096
}

extension StripeEvent {
    /// Stripe's events are a few kilobytes; a Checkout Session with many line items stays far below this.
    public static let bodyBytesMax = 512 * 1024
    /// JSON nesting of a Stripe event.
    public static let depthMax = 24
    /// Characters of a Stripe ID (event, object, customer).
    public static let idLengthMax = 255
}

extension StripeWebhookConfiguration {
    /// Secrets held at once (a rotation has two; more is a mistake).
    public static let secretsMax = 4
}
