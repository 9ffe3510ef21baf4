import Foundation
import KakinStorage

/// A thread's connection, opened again when it broke. After a failed connect, calls fail at once for
/// `reconnectBackoffMs` (with the same error) instead of each waiting out a connect timeout.
final class PGSession {
    enum Role {
        /// Writers must reach a primary: a standby (read-only, e.g. the old primary after a failover)
        /// is refused so the next attempt looks again.
        case writer
        case reader
    }

    let settings: PostgresConnectionSettings
    let options: PostgresDatabase.Options
    let statistics: PostgresStatisticsRecorder
    private var connection: PGConnection?
    /// Counts of connections dropped since the last `takeWork`.
    private var droppedWork = SQLWorkCounts()
    private var everConnected = false
    private var failing: (until: ContinuousClock.Instant, error: any Error)?

    init(settings: PostgresConnectionSettings, options: PostgresDatabase.Options, statistics: PostgresStatisticsRecorder) {
        self.settings = settings
        self.options = options
        self.statistics = statistics
    }

    /// The open connection, or a new one if it broke.
    /// - Throws: `SQLError` `.unavailable` when the server cannot be reached.
    func live(_ role: Role) throws -> PGConnection {
        if let connection, !connection.isBroken { return connection }
        discard()
        let clock = ContinuousClock()
        if let failing, clock.now < failing.until { throw failing.error }
        do {
            let fresh = try PGConnection(settings, statementsCachedMax: options.statementsCachedMax, queryRowsMax: options.queryRowsMax)
            if case .reader = role { fresh.readsOnly = true }
            if case .writer = role, try fresh.queryOne("SELECT pg_is_in_recovery() AS standby", [])?.bool("standby") == true {
                fresh.close()
                throw SQLError(kind: .unavailable, message: "connected to a standby (read-only) at \(settings.redactedURL); writes need the primary")
            }
            if everConnected { statistics.recordReconnect() }
            everConnected = true
            connection = fresh
            failing = nil
            return fresh
        } catch {
            failing = (clock.now.advanced(by: .milliseconds(options.reconnectBackoffMs)), error)
            throw error
        }
    }

    /// Drops the connection; the next `live` opens a new one.
    func discard() {
        if let connection { droppedWork.add(connection.takeWork()) }
        connection?.close()
        connection = nil
    }

    /// What this thread's connections did since the last call, for the statistics.
    func takeWork() -> SQLWorkCounts {
        var work = droppedWork.take()
        if let connection { work.add(connection.takeWork()) }
        return work
    }

    /// Opens the first connection ahead of the first job (a failure is only remembered).
    func warmUp(_ role: Role) { _ = try? live(role) }
}
