// AppStoreSecurity's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension ASN1Reader {
    /// Nesting of ASN.1 elements one reader descends into.
    static let depthMax = 6
    /// Elements one reader hands out (a receipt's attributes, an in-app purchase's fields).
    static let elementsMax = 20_000
}

extension AppReceipt {
    /// A receipt's DER size. A subscriber of many years has a receipt of a few hundred KiB (every renewal
    /// is an `in_app` entry). Its base64 must fit Kakin's `appReceipt` field (`LimitRelations`).
    public static let derBytesMax = 760 * 1024
    /// `in_app` entries read from one receipt.
    public static let inAppMax = 5_000
    /// Transaction IDs are decimal strings.
    public static let transactionIdLengthMax = 32
    /// Bytes of one string attribute (bundle ID, product ID, version).
    public static let stringBytesMax = 1024
}

extension AppStoreServerAPIToken {
    /// Apple refuses tokens whose `exp` is more than 60 minutes after `iat` (or after now).
    public static let lifetimeSecondsMax: Int64 = 3600
    /// Tolerated clock difference for an `iat` ahead of the verifier's clock.
    public static let clockSkewSecondsMax: Int64 = 60
}

extension AppStoreServerAPITokenVerifier {
    /// Largest token accepted, in bytes.
    public static let tokenBytesMax = 8 * 1024
}

extension SignedRequestVerifier {
    /// Largest signed request (promotional offer V2, introductory eligibility JWS), in bytes.
    static let jwsBytesMax = 8 * 1024
}

extension SignedDataVerifier {
    /// Largest JWS accepted, in bytes (real ones are 3–10 KiB; a notification with nested JWS ~15 KiB).
    public static let jwsBytesMax = 256 * 1024
    /// JSON nesting allowed in headers and payloads.
    static let jsonDepthMax = 16
}
