import Foundation

/// How a process's writer threads share the database: their transactions run side by side, except one
/// being run again after a serialization failure, which runs alone (the others finish what they run, and
/// wait meanwhile). Two batches of one process that keep failing each other then cannot turn into a storm
/// of re-runs: the second attempt meets no other writer of this process.
final class WriterGate: @unchecked Sendable {
    // @unchecked: every stored var below is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var together = 0
    private var aloneWaiting = 0
    private var aloneRunning = false

    /// Runs `body` beside the other writers' transactions (after any waiting to run alone).
    func runTogether<T>(_ body: () -> T) -> T {
        condition.lock()
        while aloneRunning || aloneWaiting > 0 { condition.wait() }
        together += 1
        condition.unlock()
        defer {
            condition.lock()
            together -= 1
            condition.broadcast()
            condition.unlock()
        }
        return body()
    }

    /// Runs `body` with no other writer's transaction running.
    func runAlone<T>(_ body: () -> T) -> T {
        condition.lock()
        aloneWaiting += 1
        while aloneRunning || together > 0 { condition.wait() }
        aloneWaiting -= 1
        aloneRunning = true
        condition.unlock()
        defer {
            condition.lock()
            aloneRunning = false
            condition.broadcast()
            condition.unlock()
        }
        return body()
    }
}
