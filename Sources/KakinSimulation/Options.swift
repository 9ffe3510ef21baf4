import KakinCore

/// The faults a run injects (`--faults none|all|LIST`, names comma-separated).
public struct FaultSet: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// A notification never arrives (Kakin recovers it from Notification History).
    public static let drop = FaultSet(rawValue: 1 << 0)
    /// A notification arrives twice.
    public static let duplicate = FaultSet(rawValue: 1 << 1)
    /// Notifications arrive out of order (a few minutes of jitter).
    public static let reorder = FaultSet(rawValue: 1 << 2)
    /// A notification arrives hours or days late.
    public static let delay = FaultSet(rawValue: 1 << 3)
    /// The app is killed after the charge (before it told Kakin) or before `finish`.
    public static let kill = FaultSet(rawValue: 1 << 4)
    /// The network between app and Kakin fails: the request is lost, or Kakin's answer is.
    public static let network = FaultSet(rawValue: 1 << 5)
    /// Kakin crashes (a write in progress is lost) and restarts on the same database.
    public static let crash = FaultSet(rawValue: 1 << 6)
    /// The disk is full for a step: every write fails.
    public static let disk = FaultSet(rawValue: 1 << 7)
    /// The customer's webhook receiver fails or times out a share of deliveries.
    public static let webhook = FaultSet(rawValue: 1 << 8)
    /// Google Play's Developer API fails a call or two (503): Kakin answers 503 and the app retries; reads and
    /// acknowledgements are retried by Kakin.
    public static let playAPI = FaultSet(rawValue: 1 << 9)
    /// Kakin's acknowledgement of a Play purchase never gets through (as when Kakin is down past 3 days): Play refunds
    /// it (`voidedReason` 8) and Kakin takes the coins back.
    public static let ack = FaultSet(rawValue: 1 << 10)

    public static let all: FaultSet = [.drop, .duplicate, .reorder, .delay, .kill, .network, .crash, .disk, .webhook, .playAPI, .ack]

    public static let names: [(String, FaultSet)] = [
        ("drop", .drop), ("duplicate", .duplicate), ("reorder", .reorder), ("delay", .delay), ("kill", .kill),
        ("network", .network), ("crash", .crash), ("disk", .disk), ("webhook", .webhook), ("playapi", .playAPI), ("ack", .ack),
    ]

    /// `none`, `all`, or names separated by commas.
    public init?(list: String) {
        if list == "none" { self = []; return }
        if list == "all" { self = .all; return }
        var set: FaultSet = []
        for name in list.split(separator: ",") {
            guard let f = Self.names.first(where: { $0.0 == name })?.1 else { return nil }
            set.insert(f)
        }
        self = set
    }

    public var description: String {
        if self == .all { return "all" }
        if isEmpty { return "none" }
        return Self.names.filter { contains($0.1) }.map(\.0).joined(separator: ",")
    }
}

/// One run's shape. The seed decides everything else.
public struct SimulationOptions: Sendable {
    public var seed: UInt64
    public var customers: Int
    public var days: Int
    public var faults: FaultSet
    /// PostgreSQL (`postgres://…`); nil: SQLite in a temporary directory.
    public var databaseURL: String?
    /// Stop after this step (replay), printing the world there.
    public var untilStep: Int?
    /// Shorter schedules for the shrinker: only the first `actionsMax` customer actions of the run are made.
    public var actionsMax: Int?
    /// How often a customer acts on a day, on average.
    public var actionsPerCustomerDay: Double
    /// Print one line per day.
    public var printDays: Bool

    public init(seed: UInt64, customers: Int = 100, days: Int = 30, faults: FaultSet = .all, databaseURL: String? = nil,
                untilStep: Int? = nil, actionsMax: Int? = nil, actionsPerCustomerDay: Double = 0.08, printDays: Bool = true) {
        precondition((1...Self.customersMax).contains(customers), "customers 1...\(Self.customersMax)")
        precondition((1...Self.daysMax).contains(days), "days 1...\(Self.daysMax)")
        self.seed = seed
        self.customers = customers
        self.days = days
        self.faults = faults
        self.databaseURL = databaseURL
        self.untilStep = untilStep
        self.actionsMax = actionsMax
        self.actionsPerCustomerDay = actionsPerCustomerDay
        self.printDays = printDays
    }
}

/// A broken invariant: where, which, and what was seen.
public struct InvariantFailure: Error, Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var step: Int
    public var invariant: String
    public var detail: String

    public var description: String { "seed \(seed) step \(step) invariant \(invariant): \(detail)" }
}

/// What a run printed at its end.
public struct SimulationResult: Sendable {
    public var digest: String
    public var steps: Int
    /// Customer actions made (what the shrinker cuts).
    public var actions: Int
    public var failure: InvariantFailure?
    /// Set when `untilStep` stopped the run.
    public var stoppedAt: Int?
    public var notifications: Int
    public var faultsInjected: Int
    /// Simulated days begun (the day of a failure, for the shrinker).
    public var days: Int = 0
}
