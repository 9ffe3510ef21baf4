// KakinStorage's limits, each declared once here (TigerBeetle's constants.zig): the unit is last in the name —
// …BytesMax, …Ms, …Seconds; …LengthMax and …CharactersMax count characters; a bare …Max counts items. How limits of
// different targets must relate (a field below the body limit, a batch below its table's) is asserted at start-up
// by `LimitRelations` (KakinServer/Limits.swift).

extension KakinStore {
    /// Ledger entries read for one customer's consumption figures (FIFO needs the whole paid history).
    static let consumptionLedgerRowsMax = 500_000
    /// Events appended in one call, at most (one change rarely produces more than a handful).
    public static let eventsPerAppendMax = 100
    /// One event's JSON, at most: it carries the customer's whole status, which is never near this.
    public static let eventPayloadBytesMax = 1 << 20
    /// Statements one `WriteBatch` holds, at most: a coin movement's and its events' writes are a handful.
    static let batchStatementsMax = 16
    /// Rows a filtered feed page looks at, at most: a filter that matches rarely still answers in bounded time,
    /// with a cursor past what it skipped.
    public static let feedScanRowsMax = 5_000
    /// Rows `kakin export` reads per statement.
    public static let exportPageRowsMax = 2_000
    /// Customers read per statement when facts are loaded in bulk.
    public static let metricFactsCustomersMax = 500
    /// Events outbox rows a rollup pass reads per statement.
    public static let metricEventsPerReadMax = 2_000
    /// Rows one multi-row rollup statement writes (`metric_days` cells, `metric_contributions` shares), at most: 7
    /// parameters a cell, far below either engine's limit on bound parameters (a power of two: `SQLList.chunks`).
    static let metricRowsPerStatementMax = 256
    /// Bounds a status read: a customer with more history than this is answered from the newest part.
    static let historyRowsMax = 10_000
    /// Problems one ledger check reports, at most.
    static let problemsMax = 100
    /// Longest stored answer excerpt (characters).
    public static let answerExcerptMax = 500
    /// Event ids one replay names, at most (the contract's `eventIds` and `--event`).
    public static let replayEventIdsMax = 1_000
    /// Events per replay write (a replay `since` a time runs in writes of this many).
    public static let replayBatchMax = 500
    /// Events not fanned out yet are counted up to this many (the count is a gauge, not a scan of the table).
    public static let fanOutLagCountMax = 10_000
}

extension Records {
    /// Rows read per list at most (a customer's purchases, a subscription's observations, a token's purchases).
    public static let externalRowsMax = 2_000
}

extension SQLError {
    /// Descriptions stay one log line even for a migration script.
    static let sqlDescriptionCharactersMax = 300
}

extension OfferingsRecords {
    /// Rows a whole-config read may return (every object of every kind, at their limits: `LimitRelations` checks it).
    public static let objectsReadMax = 2_000
}
