internal import CSQLite
import Foundation
import KakinStorage

/// What `SQLiteDatabase.backup` wrote.
public struct SQLiteBackupSummary: Sendable, Hashable {
    public var pages: Int
    public var bytes: Int
}

extension SQLiteDatabase {
    /// Copies the database at `path` to `destination` with SQLite's online backup API while a running Kakin
    /// keeps reading and writing it: the copy is one consistent snapshot (one read transaction over WAL, which
    /// never blocks the writer). The copy is written beside `destination`, checked (`PRAGMA quick_check`),
    /// and renamed into place, so `destination` is either the previous file or a complete backup.
    /// Runs on its own thread: the copy blocks for as long as the database takes to read.
    public static func backup(path: String, to destination: String) async throws -> SQLiteBackupSummary {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SQLiteBackupSummary, any Error>) in
            let thread = Thread {
                continuation.resume(with: Result { try copy(path: path, to: destination) })
            }
            thread.name = "sql-backup"
            thread.start()
        }
    }

    private static func copy(path: String, to destination: String) throws -> SQLiteBackupSummary {
        guard FileManager.default.fileExists(atPath: path) else {
            throw SQLError(kind: .database, message: "cannot open database: \(path) does not exist")
        }
        let partial = destination + ".partial"
        try? FileManager.default.removeItem(atPath: partial)
        var source: OpaquePointer?
        var target: OpaquePointer?
        defer {
            sqlite3_close_v2(source)
            sqlite3_close_v2(target)
        }
        try check(sqlite3_open_v2(path, &source, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil), source, "open \(path)")
        sqlite3_busy_timeout(source, 5_000)
        try check(sqlite3_open_v2(partial, &target, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil), target,
                  "create \(partial)")
        guard let backup = sqlite3_backup_init(target, "main", source, "main") else {
            throw error(target, "start the backup")
        }
        // One step copies every page inside one read transaction: a consistent snapshot, never restarted by
        // concurrent writes.
        var rc = sqlite3_backup_step(backup, -1)
        var waits = 0
        while rc == SQLITE_BUSY || rc == SQLITE_LOCKED, waits < 100 {
            waits += 1
            sqlite3_sleep(50)
            rc = sqlite3_backup_step(backup, -1)
        }
        let pages = Int(sqlite3_backup_pagecount(backup))
        let finish = sqlite3_backup_finish(backup)
        guard rc == SQLITE_DONE else { throw error(target, "copy the pages", code: rc) }
        try check(finish, target, "finish the backup")
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v2(target, "PRAGMA quick_check", -1, &statement, nil), target, "check the copy")
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0), String(cString: text) == "ok" else {
            throw SQLError(kind: .database, message: "the copy failed its integrity check")
        }
        sqlite3_finalize(statement)
        statement = nil
        sqlite3_close_v2(target)
        target = nil
        let bytes = ((try? FileManager.default.attributesOfItem(atPath: partial))?[.size] as? Int) ?? 0
        if rename(partial, destination) != 0 {
            throw SQLError(kind: .database, message: "cannot move the copy to \(destination) (errno \(errno))")
        }
        return SQLiteBackupSummary(pages: pages, bytes: bytes)
    }

    private static func check(_ rc: Int32, _ db: OpaquePointer?, _ what: String) throws {
        guard rc == SQLITE_OK else { throw error(db, what, code: rc) }
    }

    private static func error(_ db: OpaquePointer?, _ what: String, code: Int32? = nil) -> SQLError {
        let rc = code ?? (db.map { sqlite3_errcode($0) } ?? SQLITE_ERROR)
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        return SQLError(kind: .database, code: rc & 0xff, extendedCode: rc, message: "cannot \(what): \(message)")
    }
}
