import Dispatch
import Foundation
import KakinSQLite
import KakinStorage
import Testing

/// A fresh directory under the system temp dir, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-sql-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    var databasePath: String { path + "/kakin.sqlite" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Opens a database in a temporary directory, runs `body`, closes it and removes the files.
func withDatabase<R>(
    _ options: SQLiteDatabase.Options = .init(),
    _ body: (SQLiteDatabase) async throws -> R
) async throws -> R {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let database = try SQLiteDatabase(path: directory.databasePath, options: options)
    do {
        let result = try await body(database)
        await database.close()
        return result
    } catch {
        await database.close()
        throw error
    }
}

/// Holds the writer thread inside one write body until `open()`, so tests can line up the next batch.
final class WriterGate: Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let entered: AsyncStream<Void>
    private let enteredContinuation: AsyncStream<Void>.Continuation

    init() {
        (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
    }

    /// Starts a write that runs `before`, then blocks the writer until `open()` (at most 30 s).
    func hold(
        _ database: SQLiteDatabase,
        before: @escaping @Sendable (any SQLConnection) throws -> Void = { _ in }
    ) async -> Task<Void, any Error> {
        let task = Task { [release, enteredContinuation] in
            try await database.write { connection in
                try before(connection)
                enteredContinuation.yield()
                _ = release.wait(timeout: .now() + 30)
            }
        }
        for await _ in entered { break }
        return task
    }

    func open() { release.signal() }
}

/// Polls `condition` every millisecond for up to 60 s (a loaded machine); records an issue if it never holds.
func waitUntil(_ what: String, _ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(1))
    }
    Issue.record("timed out waiting until \(what)")
}

/// Queues writes one at a time, each after the previous one is waiting, so they run in this order.
func queueWritesInOrder<T: Sendable>(
    _ database: SQLiteDatabase,
    _ bodies: [@Sendable (any SQLConnection) throws -> T]
) async throws -> [Task<T, any Error>] {
    var tasks: [Task<T, any Error>] = []
    for body in bodies {
        let depth = database.statistics.writeQueueDepth
        tasks.append(Task { try await database.write(body) })
        try await waitUntil("write \(tasks.count) is queued") { database.statistics.writeQueueDepth == depth + 1 }
    }
    return tasks
}

struct ExpectedFailure: Error, Equatable {
    let id: Int
}
