// KakinCore's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension StoreKitConfiguration {
    /// Files bigger than this are refused: real ones are under 100 kB.
    public static let fileBytesMax = 8 * 1024 * 1024
}

extension RetentionMessagingConfig {
    /// Retention messaging rules of one app.
    public static let rulesMax = 100
    /// Product IDs one rule names.
    public static let productIdsMax = 100
}

extension ExternalEntitlement {
    /// Characters of `source` and `id` at most (the generic source's limits are tighter).
    public static let idLengthMax = 255
}

extension WalletRules {
    /// Largest amount a single spend or grant may move (bounds every input).
    public static let amountMax: Int64 = 100_000_000
}

extension CustomerID {
    /// Characters of a customer ID.
    public static let lengthMax = 128
}

extension WriteRerunPlan {
    /// The longest jittered pause, in milliseconds.
    public static let pauseMsMax = 16
}

/// Every limit of an import, in one place.
public enum ImportLimits {
    /// The uploaded file (the import route's body limit).
    public static let fileBytesMax = 64 << 20
    /// Rows in one job.
    public static let rowsMax = 200_000
    /// Jobs queued or running at once (across every process on the database).
    public static let jobsAtOnceMax = 4
    /// One field's value; a CSV record's physical lines.
    public static let fieldBytesMax = 4_096
    public static let recordLinesMax = 16
    /// Columns of a header (RevenueCat's export has about 40).
    public static let columnsMax = 200
    /// Rejects answered per page.
    public static let rejectsPageMax = 1_000

    static func check() {
        precondition(fieldBytesMax * 4 <= fileBytesMax && rowsMax <= fileBytesMax / 8, "limits that can be reached")
    }
}
