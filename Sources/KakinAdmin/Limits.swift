// KakinAdmin's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension SupportDesk {
    /// Characters of the name a support person signs in with.
    public static let actorNameLengthMax = 64
    /// Bytes of an admin key typed at sign-in.
    public static let keyLengthMax = 4096
    /// The most RESCIND_CONSENTs the page lists.
    static let unplacedRescissionsMax = 200
    /// Customers in the desk's unused-balance CSV; past it, `kakin report unused-balance --format csv`.
    static let csvLinesMax = 1_000_000
}

extension RecentErrorLog {
    /// Errors waiting in memory; beyond it new ones are dropped (and counted).
    public static let bufferMax = 1_000
    /// Rows the recent-errors table keeps (the oldest purged first; 30 days at most).
    public static let rowsMax = 100_000
}

extension SearchQuery {
    /// Characters of a search box query.
    public static let lengthMax = 256
}

extension SupportDesk.Limits {
    /// Hits one search shows.
    static let searchHitsMax = 50
    /// Orders of one Play chain an order lookup or a customer page lists (a monthly chain renews 12 times a year).
    static let playChainOrdersMax = 500
    /// Play chains a customer page lists.
    static let playChainsMax = 20
    /// Bytes of a Play purchase token `GET /v1/admin/orders/{orderId}` looks up.
    static let playPurchaseTokenBytesMax = 1_024
    /// Transactions a customer page reads.
    static let customerTransactionsMax = 500
    /// Subscriptions a customer page shows.
    static let subscriptionItemsMax = 100
    /// Timeline entries of one page, at most (`limit`).
    static let timelinePageMax = 200
    /// Notifications of one page, at most (`limit`).
    static let notificationsPageMax = 200
    /// Dead notifications one "Replay every dead notification" replays.
    static let replayAllMax = 1_000
}

extension WebhookPage {
    /// Deliveries an endpoint's page lists (the newest).
    static let rowsMax = 100
    /// Dead deliveries one "Replay every dead delivery" puts back.
    public static let replayDeadMax = 500
}

extension CustomerEventsSection {
    /// Events the customer page lists (the newest).
    static let rowsMax = 50
}

extension FormFields {
    /// Bytes of a desk form's body.
    public static let bodyBytesMax = 64 * 1024
}

extension ImportPage {
    /// Rejected rows an import's page lists (the rest are at the rejects URL).
    static let rejectsMax = 200
}
