import KakinStorage
import Synchronization

/// Read-only connections that a caller borrows to run a short read (`SQLiteDatabase.shortRead`) on its own thread:
/// no hop to a reader thread and back (a wake-up each way and the caller's task resumed), which costs more than a
/// read of a few indexed rows itself. A connection serves one borrower at a time; with none free, the read goes
/// to the reader threads. After `close`, nothing is lent and each connection closes when it comes back.
final class SQLiteBorrowedReaders: Sendable {
    /// A connection while it is idle or lent: `@unchecked` because only the one borrower (or the pool, while it
    /// is idle) touches its handle, which is what `SQLITE_OPEN_NOMUTEX` asks.
    final class Reader: @unchecked Sendable {
        let handle: SQLiteHandle
        init(handle: SQLiteHandle) { self.handle = handle }
    }

    private struct State: Sendable {
        var idle: [Reader]
        var isClosed = false
    }

    private let state: Mutex<State>

    init(_ handles: [SQLiteHandle]) {
        state = Mutex(State(idle: handles.map(Reader.init)))
    }

    /// An idle connection, or nil when all are lent or the pool is closed.
    func borrow() -> Reader? {
        state.withLock { $0.isClosed ? nil : $0.idle.popLast() }
    }

    func giveBack(_ reader: Reader) {
        let keep = state.withLock { state in
            if !state.isClosed { state.idle.append(reader) }
            return !state.isClosed
        }
        if !keep { reader.handle.close() }
    }

    /// Closes the idle connections; the lent ones close as they come back.
    func close() {
        let idle = state.withLock { state in
            state.isClosed = true
            defer { state.idle = [] }
            return state.idle
        }
        for reader in idle { reader.handle.close() }
    }
}

extension SQLiteHandle {
    /// One read body inside this connection's read transaction, its statements counted in `recorder`.
    func runRead<T>(_ body: (any SQLConnection) throws -> T, recorder: SQLiteStatisticsRecorder) -> Result<T, any Error> {
        let connection = ScopedSQLConnection(self)
        let result = Result { try body(connection) }
        connection.invalidate()
        recorder.recordRead(work: takeWork())
        return result
    }
}
