// KakinOfferings's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

/// Every bound of offerings, placements, experiments and customer attributes, declared once (TigerBeetle's
/// `constants.zig`): what an admin may store, what a customer's backend may set, what a read or a results run holds.
public enum OfferingLimits {
    /// An offering's, placement's, experiment's, package's or variant's id: 1–64 of `[A-Za-z0-9._-]`.
    public static let idLengthMax = 64
    /// Objects of each kind a server holds (each read compiles them all into memory).
    public static let offeringsMax = 500
    public static let placementsMax = 200
    public static let experimentsMax = 500
    /// Packages in one offering.
    public static let packagesMax = 20
    /// A product id a package names, per store.
    public static let productIdLengthMax = 255
    /// An offering's `metadata`, serialized.
    public static let metadataBytesMax = 16 * 1024
    /// Targeting rules of one placement.
    public static let rulesMax = 50
    /// Countries one rule lists.
    public static let countriesMax = 250
    /// Attributes one rule compares.
    public static let ruleAttributesMax = 20
    /// A customer's attributes, and each key's and value's length.
    public static let customerAttributesMax = 50
    public static let attributeKeyLengthMax = 64
    public static let attributeValueLengthMax = 256
    /// Variants of one experiment.
    public static let variantsMin = 2
    public static let variantsMax = 4
    /// A variant's weight: a positive number up to this.
    public static let weightMax = 1_000_000.0
    /// An app version (`1.2.3`): at most this many dot-separated numbers, each at most 9 digits.
    public static let appVersionComponentsMax = 4
    public static let appVersionLengthMax = 40
    /// Audit entries per page.
    public static let auditPageMax = 200
    /// Enrollments a results read (or a numbers filter by variant) walks; beyond, the answer says it is incomplete.
    public static let resultsEnrollmentsMax = 2_000_000
}

extension ExperimentStatistics {
    /// Terms of the exact sum before the normal approximation takes over (counts in the tens of thousands).
    static let exactTermsMax = 50_000
}
