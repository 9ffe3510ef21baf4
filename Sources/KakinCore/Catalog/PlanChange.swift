/// A plan change inside a subscription group and when it takes effect, by Apple's rules (reference §7;
/// levels: 1 is the highest tier). One implementation for the whole project: the simulator changes plans by
/// it and the status engine warns by it, so the two can never disagree about what "the same duration" is.
public enum PlanChange: String, Sendable, Hashable, CaseIterable {
    /// To a higher tier: now, a new period, the unused part of the old one refunded prorated.
    case upgrade
    /// To a lower tier: at the next renewal.
    case downgrade
    /// Same tier, same duration: now (seed 003: a free period is discarded, a paid one refunded prorated).
    case crossgradeNow
    /// Same tier, another duration: at the next renewal.
    case crossgradeAtRenewal

    /// - Parameters:
    ///   - committed: the current subscription is inside a 12-month commitment billed monthly. The commitment
    ///     binds the customer until its end (Apple: "customers can cancel at any time, but the subscription
    ///     remains active through the end of the commitment term"; StoreKit "Supporting monthly subscriptions
    ///     with a 12-month commitment", as RevenueCat's "Apple Monthly Subscription with 12-Month Commitment"
    ///     restates it), so only an upgrade — which ends the commitment's product now for a higher one — is
    ///     immediate; a crossgrade of the same duration waits for the commitment's end like every other change.
    ///     Kakin's reading: Apple documents no crossgrade rule for commitments.
    public init(from current: Product, to target: Product, committed: Bool = false) {
        if target.level < current.level {
            self = .upgrade
        } else if target.level > current.level {
            self = .downgrade
        } else if !committed, let a = current.period, let b = target.period, a.isSameDuration(as: b) {
            self = .crossgradeNow
        } else {
            self = .crossgradeAtRenewal
        }
    }

    public var isImmediate: Bool { self == .upgrade || self == .crossgradeNow }

    /// The `DID_CHANGE_RENEWAL_PREF` (or `OFFER_REDEEMED`) subtype Apple sends. Crossgrades get none (Apple
    /// staff, forum thread 729677: "UPGRADE, DOWNGRADE, or omitted, for an upgrade, downgrade, or crossgrade
    /// respectively").
    public var subtype: NotificationSubtype? {
        switch self {
        case .upgrade: return .upgrade
        case .downgrade: return .downgrade
        case .crossgradeNow, .crossgradeAtRenewal: return nil
        }
    }
}

extension ISOPeriod {
    /// The same length of time whatever the spelling: years and months count in months (P1Y = P12M), weeks
    /// and days in days (P1W = P7D). Months and days never mix (P1M is not P30D: months differ in length).
    public func isSameDuration(as other: ISOPeriod) -> Bool {
        years * 12 + months == other.years * 12 + other.months && weeks * 7 + days == other.weeks * 7 + other.days
    }
}
