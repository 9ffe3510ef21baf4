import Foundation
import KakinCore

/// The real time of day: what production runs on, and what the simulator's clock is anchored to (its
/// default start, checking API tokens made by clients that never heard of simulated time). Local mode
/// hands Kakin the simulator's clock instead, so statuses follow simulated time.
public struct SystemClock: Clock {
    public init() {}
    public func nowMs() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }
}
