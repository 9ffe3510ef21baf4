import KakinService
import Foundation
@testable import KakinServer
import Synchronization
import Testing

/// The notification worker and the recovery loop are `BackgroundLoop`s: they must rest between passes.
@Suite struct BackgroundLoopBehaviour {
    /// An idle server once spun at full speed after its first wake-up: the cancelled poll timer woke the
    /// loop again, whose timer was cancelled in turn. Three wake-ups must cost a handful of passes.
    @Test func anIdleLoopRestsAfterBeingWoken() async throws {
        let passes = Atomic<Int>(0)
        let loop = BackgroundLoop(pollIntervalMs: 60_000)
        loop.start { passes.add(1, ordering: .relaxed) }
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(50))
            loop.wake()
        }
        try await Task.sleep(for: .milliseconds(500))
        let counted = passes.load(ordering: .relaxed)
        await loop.stop()
        #expect(counted >= 2)
        #expect(counted <= 5, "an idle loop ran \(counted) passes in half a second after 3 wake-ups")
    }
}
