// AppStoreSimulator's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension AppStoreSimulator {
    /// `limit` of an account's pages (transactions, finished transactions), at most.
    static let accountPageLimitMax = 500
    /// `limit` of the consumption information list, at most.
    static let consumptionListMax = 1000
    /// How many notifications are sent at once when many fall due together.
    static let deliveryConcurrencyMax = 8
    /// The longest single clock move: ten years.
    static let advanceSecondsMax: Int64 = 10 * 366 * 86_400
}

extension RetentionMessagingStore {
    /// Retention messages uploaded per app.
    static let messagesMax = 2_000
    /// Retention message images uploaded per app.
    static let imagesMax = 2_000
    /// Get Retention Message calls remembered (the oldest forgotten first).
    static let callsMax = 10_000
}

extension SimulatorState {
    /// Renewal-date extensions of one subscription in 365 days (Apple's rule).
    static let extensionsPerYearMax = 2
    /// External purchase tokens issued.
    static let externalTokensMax = 50_000
    /// External purchase reports kept.
    static let externalReportsMax = 200_000
    /// Line items in one external purchase report.
    static let lineItemsPerReportMax = 1_000
    /// Nonces are remembered while their signatures could still be used; past this many the oldest usable
    /// ones would have to be forgotten, so further signed purchases are refused instead.
    static let offerNoncesMax = 100_000
    /// Transactions, past which new purchases are refused (renewals of existing subscriptions go on).
    static let transactionsMax = 200_000
    /// Subscriptions, past which new purchases are refused (renewals go on).
    static let subscriptionsMax = 50_000
    /// Past this, the oldest settled notifications are forgotten (Apple keeps 30 days of sandbox history).
    static let notificationsMax = 200_000
    /// Consumption information records kept.
    static let consumptionRecordsMax = 10_000
    /// Renewal-date extension requests kept (mass extensions included).
    static let extensionRequestsMax = 10_000
}

extension SimulatedClock {
    /// The largest time rate accepted: one simulated year per real minute.
    public static let timeRateMax: Double = 525_600
}

extension SimulatorStateFile {
    /// Largest state file accepted.
    static let bytesMax = 256 * 1024 * 1024
}
