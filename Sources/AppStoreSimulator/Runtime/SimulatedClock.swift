import KakinCore
import KakinSystem
import Synchronization

/// The simulated App Store's time: it stands still and moves only when told (`advance`), or, with a time
/// rate, runs at that many simulated seconds per real second, like StoreKit Testing's `timeRate`. In
/// local mode Kakin reads this clock too, so statuses follow simulated time. It never goes backwards.
public final class SimulatedClock: Clock, Sendable {
    struct Anchor {
        var simulatedMs: Int64
        var realMs: Int64
        var rate: Double
    }

    private let anchor: Mutex<Anchor>
    private let wall: any Clock

    /// - Parameters:
    ///   - startMs: the simulated time to start at.
    ///   - timeRate: simulated seconds per real second; 0 (the default) stops time between advances.
    ///   - wall: the real clock the rate is measured against.
    public init(startMs: Int64, timeRate: Double = 0, wall: any Clock = SystemClock()) {
        self.wall = wall
        anchor = Mutex(Anchor(simulatedMs: startMs, realMs: wall.nowMs(), rate: max(0, min(timeRate, Self.timeRateMax))))
    }

    public func nowMs() -> Int64 {
        let real = wall.nowMs()
        return anchor.withLock { Self.simulated($0, real: real) }
    }

    public var timeRate: Double { anchor.withLock { $0.rate } }

    static func simulated(_ a: Anchor, real: Int64) -> Int64 {
        guard a.rate > 0 else { return a.simulatedMs }
        return a.simulatedMs + Int64((Double(max(0, real - a.realMs)) * a.rate).rounded(.down))
    }

    /// Moves to `targetMs` if that is ahead; returns the time now.
    @discardableResult
    func moveForward(toMs targetMs: Int64) -> Int64 {
        let real = wall.nowMs()
        return anchor.withLock { a in
            let now = Self.simulated(a, real: real)
            a = Anchor(simulatedMs: max(now, targetMs), realMs: real, rate: a.rate)
            return a.simulatedMs
        }
    }

    /// Sets the time outright, backwards too: only for loading a saved state (a replay starts where it was saved).
    func reset(toMs targetMs: Int64) {
        let real = wall.nowMs()
        anchor.withLock { a in a = Anchor(simulatedMs: targetMs, realMs: real, rate: a.rate) }
    }

    func setTimeRate(_ rate: Double) {
        let real = wall.nowMs()
        anchor.withLock { a in
            a = Anchor(simulatedMs: Self.simulated(a, real: real), realMs: real, rate: max(0, min(rate, Self.timeRateMax)))
        }
    }
}
