import KakinCore
import KakinCrypto

/// One app whose signed data is accepted.
public struct AppIdentity: Sendable, Hashable {
    /// The app's bundle ID; nil accepts any app (`kakin verify` without `--bundle-id`).
    public var bundleId: String?
    /// The App Store's numeric app ID. Checked, as Apple's library does, on Production notifications
    /// and app transactions; nil skips that check.
    public var appAppleId: Int64?
    /// Environments accepted for this app. `Xcode` and `LocalTesting` data is not signed by Apple and
    /// is refused unless listed here.
    public var environments: Set<AppStoreEnvironment>

    public init(
        bundleId: String?, appAppleId: Int64? = nil,
        environments: Set<AppStoreEnvironment> = [.production, .sandbox]
    ) {
        self.bundleId = bundleId
        self.appAppleId = appAppleId
        self.environments = environments
    }
}

/// Signed data that passed verification.
public struct VerifiedSignedData: Sendable, Hashable {
    /// What the payload is: the kind asked for, or the kind told by its fields for `verify(_:)`.
    public var kind: SignedPayloadKind
    /// The decoded payload (a JSON object).
    public var payload: JSONValue
    /// The payload exactly as signed (UTF-8 JSON), for storage and byte-exact output.
    public var payloadBytes: [UInt8]
    /// `signedDate` (`receiptCreationDate` for app transactions) in ms, nil when the payload has neither.
    public var signedDate: Int64?
    /// The environment the payload names (for notifications: of its data/summary/appData/token).
    public var environment: AppStoreEnvironment?
    /// True when the signature was checked against a chain to a trusted root. False only for
    /// Xcode/LocalTesting data accepted unverified because an app lists the environment, as Apple's library does.
    public var isAppleSigned: Bool
}
