import Foundation
@testable import KakinService
import Synchronization
import Testing

/// The notification worker and the recovery loop are `BackgroundLoop`s: they must rest between passes.
@Suite struct BackgroundLoopBehaviour {
    /// An idle server once spun at full speed after its first wake-up: the cancelled poll timer woke the
    /// loop again, whose timer was cancelled in turn. Each wake-up must cost exactly one pass, and the loop
    /// must be asleep again after it (its 60 s timer never fires during the test).
    @Test func anIdleLoopRestsAfterBeingWoken() async throws {
        let passes = Atomic<Int>(0)
        let loop = BackgroundLoop(pollIntervalMs: 60_000)
        loop.start { passes.add(1, ordering: .relaxed) }
        #expect(try await eventually { loop.isAsleep }, "the first pass never ended")
        for wakeUp in 1...3 {
            await loop.completePass()   // a wake-up, and the pass it caused has finished
            #expect(try await eventually { loop.isAsleep }, "wake-up \(wakeUp): the loop never came to rest")
            #expect(passes.load(ordering: .relaxed) == 1 + wakeUp, "wake-up \(wakeUp) cost \(passes.load(ordering: .relaxed) - wakeUp) passes")
        }
        await loop.stop()
    }
}
