// KakinCrypto's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension DecodedJWT {
    /// JSON nesting accepted in a header or claims set.
    public static let depthMax = 8
}

extension JSONWebKeySet {
    /// Keys read from one set; more are ignored (Google lists two or three).
    public static let keysMax = 32
}

extension RSAKeySize {
    /// Largest RSA modulus accepted, in bits.
    public static let bitsMax = 8192
}

extension P256PublicKey {
    /// ES256 checks by one key before its multiples are precomputed (`P256FixedKeyVerifier`): the table costs ~26 ms
    /// and ~150 KB once and saves ~34 µs a check, so it pays after ~800; a key that checks fewer never builds one.
    static let fixedKeyVerificationsMin = 1_000
}

extension VerifyContextPool {
    /// Contexts kept between uses; more are created under contention and freed when returned to a full pool.
    static let contextsMax = 8
}

extension TimestampedSignature {
    /// Longest header accepted: a timestamp and a handful of signatures.
    public static let headerLengthMax = 1024
    /// Signatures read from one header (more are ignored, not an error: rotations rarely hold more than two).
    public static let signaturesMax = 8
}
