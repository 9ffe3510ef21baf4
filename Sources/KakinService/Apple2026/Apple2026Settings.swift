import KakinCore

/// Kakin's half of Finish Transaction (App Store Server API 1.20), per app (`serverFinish`): a consumable
/// Kakin credited from a notification or a restore, which the app has not sent within `afterSeconds`, is
/// finished by Kakin through the Server API (the app was killed before it could; seed 000's worst case).
/// An app that sent the transaction finishes it itself.
public struct ServerFinishPolicy: Sendable, Hashable {
    public var afterSeconds: Int64

    public init(afterSeconds: Int64) { self.afterSeconds = afterSeconds }

    /// 1 minute to 30 days.
    public static let afterSecondsRange: ClosedRange<Int64> = 60...(30 * 86_400)
}

/// The per-app settings of Apple's 2026 additions (`apps[].retentionMessaging`, `apps[].serverFinish`), read by
/// `RetentionMessages` and the server-finish job.
public struct Apple2026AppSettings: Sendable, Hashable {
    public var retentionMessaging: RetentionMessagingConfig?
    public var serverFinish: ServerFinishPolicy?
    public init(retentionMessaging: RetentionMessagingConfig? = nil, serverFinish: ServerFinishPolicy? = nil) {
        self.retentionMessaging = retentionMessaging
        self.serverFinish = serverFinish
    }

    /// Nothing configured.
    public var isEmpty: Bool { retentionMessaging == nil && serverFinish == nil }

    /// The app keys `Configuration+Apple2026.swift` parses.
    public static let appKeys: Set<String> = ["retentionMessaging", "serverFinish"]
}
