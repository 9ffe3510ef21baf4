// GooglePlaySecurity's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension PushTokenVerifier {
    /// Largest token accepted (Google's are about 1 KB).
    public static let tokenBytesMax = 16 * 1024
}

extension GoogleServiceAccount {
    /// Largest key file read (Google's are about 2.4 KB).
    public static let fileBytesMax = 64 * 1024
}

extension ServiceAccountAssertion {
    /// Google refuses assertions living longer than an hour.
    public static let lifetimeSecondsMax: Int64 = 3600
    /// Clock difference tolerated between the signer and the token endpoint.
    public static let clockSkewSecondsMax: Int64 = 300
    /// Largest assertion accepted.
    public static let bytesMax = 16 * 1024
}
