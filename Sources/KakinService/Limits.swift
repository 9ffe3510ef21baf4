// KakinService's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension AppStoreLimits {
    /// 20 transactions a page: a restore reads at most 10,000 transactions per id.
    public static let historyPagesMax = 500
    /// Original transactions restored in one request when the app names none.
    public static let restoreOriginalsMax = 50
    /// Notification History pages one recovery pass reads.
    public static let notificationHistoryPagesMax = 500
}

extension Ingest {
    /// Facts one write may apply (a restore's whole history): beyond it the write is refused before anything is read
    /// (`restore_too_large`).
    public static let factsPerWriteMax = 5_000
}

extension AppStoreJobs {
    /// Due jobs (refund answers, app account tokens, server finishes) claimed per pass.
    public static let batchMax = 20
    /// Tries before a call that keeps failing is given up (30 s doubling to 30 min: about 8 hours).
    static let appAccountTokenAttemptsMax: Int64 = 24
    /// Tries before a call that keeps failing is given up (30 s doubling to 30 min: about 8 hours).
    static let serverFinishAttemptsMax: Int64 = 24
}

extension AppStoreSync {
    /// Receipt lookups in one `POST …/transactions`: the newest purchase of each chain (a subscription's
    /// renewals are one chain), newest first. Older chains beyond it are left to a restore.
    public static let receiptLookupsMax = 25
    /// IDs a restore tries (newest first) until the App Store knows one: one is enough, history is per customer.
    public static let receiptRestoreAttemptsMax = 3
}

extension SubscriptionExtensions {
    /// Characters of an extension's request identifier.
    public static let requestIdentifierLengthMax = 128
    /// Storefronts one mass extension names.
    public static let storefrontCodesMax = 250
}

extension ExternalPurchaseReporter {
    /// Tokens planned and reports sent per pass at most (a backlog drains pass after pass).
    public static let batchMax = 50
}

extension BusinessMetrics {
    /// Days one range covers.
    public static let daysMax: Int64 = 3_660
    /// Points of one series (days, weeks or months in the range).
    public static let pointsMax = 1_000
}

extension NotificationRetryPolicy {
    /// Attempts before a failing notification is dead.
    public static let attemptsMax = 24
    /// Longest wait between attempts, in milliseconds.
    static let delayMsMax: Int64 = 600_000
}

extension Metrics {
    /// Bounds the labelled families (methods, routes and statuses are few; this guards against surprises).
    static let seriesPerFamilyMax = 2_000
}

extension Imports {
    /// Back-off while the App Store or the database is unavailable: 1 s doubling to this, or Apple's `Retry-After`.
    public static let backoffMsMax: Int64 = 300_000
    /// Transactions remembered per run as covered by a history already applied (later rows naming them need no call).
    public static let coveredMax = 200_000
    /// Jobs the desk lists.
    public static let listMax = 50
}
