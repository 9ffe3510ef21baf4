import Foundation

/// A bounded FIFO handing jobs from async callers to dedicated worker threads.
///
/// `enqueue` never blocks (it throws when full or closed); `take` blocks the calling worker thread
/// on a condition variable until work arrives. After `close`, queued jobs are still handed out and
/// `take` returns `nil` once the queue is empty.
package final class JobQueue<Job: Sendable>: @unchecked Sendable {
    // @unchecked: every stored var below is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var slots: [Job?] = []
    private var head = 0
    private var isClosed = false
    private let depthMax: Int
    private let name: String

    /// - Parameters:
    ///   - name: "write" or "read", for error messages.
    ///   - depthMax: queued jobs beyond which `enqueue` throws `.overloaded`.
    package init(name: String, depthMax: Int) {
        precondition(depthMax > 0)
        self.name = name
        self.depthMax = depthMax
    }

    package var depth: Int {
        condition.lock()
        defer { condition.unlock() }
        return slots.count - head
    }

    package func enqueue(_ job: Job) throws {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { throw SQLError(kind: .closed, message: "database is closed") }
        guard slots.count - head < depthMax else {
            throw SQLError(kind: .overloaded, message: "\(name) queue is full (\(depthMax) jobs waiting)")
        }
        slots.append(job)
        condition.signal()
    }

    /// Blocks until at least one job is queued, then takes the first one and, if `joins(first, next)`
    /// holds, the jobs following it, up to `countMax` in all. Returns `nil` when closed and drained, and
    /// `[]` when `waitingAtMostMs` passed with nothing queued.
    package func take(countMax: Int, waitingAtMostMs: Int? = nil, joining joins: (Job, Job) -> Bool) -> [Job]? {
        precondition(countMax > 0)
        condition.lock()
        defer { condition.unlock() }
        let deadline = waitingAtMostMs.map { Date().addingTimeInterval(Double($0) / 1000) }
        while slots.count == head {
            if isClosed { return nil }
            if let deadline {
                if !condition.wait(until: deadline), slots.count == head { return isClosed ? nil : [] }
            } else {
                condition.wait()
            }
        }
        var jobs: [Job] = []
        jobs.reserveCapacity(min(countMax, slots.count - head))
        while head < slots.count, jobs.count < countMax {
            let job = slots[head]!
            if let first = jobs.first, !joins(first, job) { break }
            jobs.append(job)
            slots[head] = nil
            head += 1
        }
        compact()
        return jobs
    }

    /// Refuses new jobs and wakes every waiting worker so it can drain and exit.
    package func close() {
        condition.lock()
        defer { condition.unlock() }
        isClosed = true
        condition.broadcast()
    }

    /// Keeps `slots` from growing without bound: reclaim the consumed prefix once it dominates.
    private func compact() {
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1_024, head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
    }
}
