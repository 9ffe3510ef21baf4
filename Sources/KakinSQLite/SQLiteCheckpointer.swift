import Foundation
import KakinStorage

/// Copies the WAL back into the database file on its own thread and connection, so that commits don't
/// pay for it. SQLite's automatic checkpoint runs inside the COMMIT that crosses its threshold: every
/// write of the next batch then waits for a copy of the WAL and an fsync of the database file.
///
/// The writer's WAL hook asks for one checkpoint each time the WAL has grown by `checkpointFramesMin`
/// frames, as often as SQLite's own would run (checkpointing more often copies pages that commits keep
/// changing again and again, and fsyncs more). A background checkpoint copies frames while commits go
/// on, so under steady load it seldom reaches the end of the WAL, and SQLite restarts the WAL from its
/// beginning only once every frame is copied. So at `walFramesMax` frames the writer checkpoints once
/// itself, after its commit and before the next batch, waiting first for a background checkpoint in
/// progress (a PASSIVE checkpoint beside another one does nothing, and on a slow disk the WAL would keep
/// growing): that one catches up (nothing commits meanwhile) and only has the frames since the last
/// background checkpoint left to copy. The WAL stays within `walFramesMax` frames plus one batch.
final class SQLiteCheckpointer: @unchecked Sendable {
    // @unchecked: `requested` and `isClosed` are read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var requested = false
    private var isClosed = false
    /// Held while a checkpoint runs on either connection.
    private let running = NSLock()

    /// Wakes the checkpoint thread; never blocks (called on the writer thread after a commit).
    func request() {
        condition.lock()
        defer { condition.unlock() }
        requested = true
        condition.signal()
    }

    /// Makes `run` return after the round in progress, if any.
    func close() {
        condition.lock()
        defer { condition.unlock() }
        isClosed = true
        condition.broadcast()
    }

    /// The checkpoint thread's loop: one request at a time, until `close()`. Closes `handle` at the end.
    /// - Parameter record: takes each checkpoint's syncs, for the statistics.
    func run(_ handle: SQLiteHandle, record: (SQLWorkCounts) -> Void) {
        while waitForRequest() {
            // A failed checkpoint (I/O error, busy) changes nothing on disk; the next request retries.
            _ = try? exclusively { try handle.checkpoint() }
            record(handle.takeWork())
        }
        handle.close()
    }

    /// Runs `checkpoint` once no other checkpoint is running (the writer's catch-up waits for the
    /// background one instead of failing beside it).
    func exclusively<R>(_ checkpoint: () throws -> R) rethrows -> R {
        running.lock()
        defer { running.unlock() }
        return try checkpoint()
    }

    /// Blocks until a checkpoint is requested (true) or the checkpointer is closed (false).
    private func waitForRequest() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !requested && !isClosed { condition.wait() }
        requested = false
        return !isClosed
    }
}

/// The writer connection's WAL hook: after each commit, hands checkpoints to the `SQLiteCheckpointer`,
/// or runs one on the writer's own connection when the WAL has grown to `walFramesMax` frames.
/// Lives on the writer thread, as long as the writer's connection.
final class WALCommitHook {
    private let checkpointer: SQLiteCheckpointer
    private let checkpointFramesMin: Int
    private let walFramesMax: Int
    /// The writer's connection (which keeps this hook alive through `SQLiteWriter`).
    weak var connection: SQLiteHandle?
    /// The WAL's size when the last checkpoint was asked for; 0 after the WAL restarted.
    private var requestedAtFrames = 0

    init(checkpointer: SQLiteCheckpointer, checkpointFramesMin: Int, walFramesMax: Int) {
        self.checkpointer = checkpointer
        self.checkpointFramesMin = checkpointFramesMin
        self.walFramesMax = walFramesMax
    }

    func committed(walFrames: Int) {
        if walFrames < requestedAtFrames { requestedAtFrames = 0 }
        if walFrames >= walFramesMax, let connection {
            // Like SQLite's own automatic checkpoint, a failure here is left for the next commit.
            _ = try? checkpointer.exclusively { try connection.checkpoint() }
            requestedAtFrames = 0
        } else if walFrames >= requestedAtFrames + checkpointFramesMin {
            requestedAtFrames = walFrames
            checkpointer.request()
        }
    }
}
