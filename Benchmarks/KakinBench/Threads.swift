import Foundation
import Synchronization

/// Starts `body(worker)` on `count` threads of their own (blocking socket I/O must not sit on a shared
/// pool); wait on the group for all of them to finish.
func startThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) -> DispatchGroup {
    let group = DispatchGroup()
    for worker in 0..<count {
        group.enter()
        Thread {
            body(worker)
            group.leave()
        }.start()
    }
    return group
}

/// A flag one thread sets and others poll (the crash test: stop, the server is dead).
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}

/// Results gathered from several threads.
final class Collected<Element: Sendable>: Sendable {
    private let elements = Mutex<[Element]>([])
    func append(contentsOf more: [Element]) { elements.withLock { $0 += more } }
    var all: [Element] { elements.withLock { $0 } }
}
