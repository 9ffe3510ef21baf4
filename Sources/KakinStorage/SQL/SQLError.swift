/// An error from the SQL layer. Carries the statement text but never parameter values, so it is
/// safe to log.
public struct SQLError: Error, Sendable, CustomStringConvertible {
    /// Engine-independent category; switch on this rather than on `code`.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: String {
            case database, constraintViolation, busy, overloaded, closed, misuse, migration, resultTooLarge, full
            case unavailable, outcomeUnknown, conflict
        }
        private let code: Code

        /// Any other engine error (I/O, corruption, syntax, …).
        public static let database = Kind(code: .database)
        /// UNIQUE, PRIMARY KEY, FOREIGN KEY, CHECK or NOT NULL constraint failed.
        public static let constraintViolation = Kind(code: .constraintViolation)
        /// The database stayed locked by another process for longer than the busy timeout.
        public static let busy = Kind(code: .busy)
        /// The job queue is full; nothing was queued. Shed load or retry later.
        public static let overloaded = Kind(code: .overloaded)
        /// The database was closed; nothing was queued.
        public static let closed = Kind(code: .closed)
        /// The API was used in a way it does not allow (placeholder count, several statements, BEGIN/COMMIT inside a body, …).
        public static let misuse = Kind(code: .misuse)
        /// A migration failed or the database schema does not match the migrations this build knows.
        public static let migration = Kind(code: .migration)
        /// A query returned more rows than `queryRowsMax`.
        public static let resultTooLarge = Kind(code: .resultTooLarge)
        /// The database server could not be reached, or the connection broke before the write was
        /// committed: nothing was applied. Retry later.
        public static let unavailable = Kind(code: .unavailable)
        /// The connection broke while the server was committing: the write may or may not have been
        /// applied. Never report it as done; retrying it is safe because every change is keyed by a
        /// unique idempotency key.
        public static let outcomeUnknown = Kind(code: .outcomeUnknown)
        /// Concurrent transactions (of this or other processes) kept conflicting with this write past
        /// the retry limit; nothing was applied. Retry later.
        public static let conflict = Kind(code: .conflict)
        /// The disk (or the database's size limit) is full; the write was not applied. Retry once
        /// space is freed: nothing needs restarting.
        public static let full = Kind(code: .full)

        public var description: String { code.rawValue }
    }

    public let kind: Kind
    /// Primary engine result code (SQLite: `SQLITE_CONSTRAINT` = 19, …); 0 when the error did not come from the engine.
    public let code: Int32
    /// Extended engine result code (SQLite: `SQLITE_CONSTRAINT_UNIQUE` = 2067, …); 0 when not from the engine.
    public let extendedCode: Int32
    /// PostgreSQL's SQLSTATE (`23505`, `40001`, …); nil for other engines and errors not from the server.
    public let sqlState: String?
    public let message: String
    /// The statement that failed, without parameter values.
    public let sql: String?

    public var isConstraintViolation: Bool { kind == .constraintViolation }
    public var isBusy: Bool { kind == .busy }
    public var isOverloaded: Bool { kind == .overloaded }

    public var description: String {
        var text = "SQLError(\(kind)"
        if code != 0 { text += ", code \(code)/\(extendedCode)" }
        if let sqlState { text += ", SQLSTATE \(sqlState)" }
        text += "): \(message)"
        if let sql { text += " [sql: \(Self.truncated(sql))]" }
        return text
    }

    package init(kind: Kind, code: Int32 = 0, extendedCode: Int32 = 0, sqlState: String? = nil, message: String, sql: String? = nil) {
        self.kind = kind
        self.code = code
        self.extendedCode = extendedCode
        self.sqlState = sqlState
        self.message = message
        self.sql = sql
    }

    private static func truncated(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: \.isNewline).joined(separator: " ")
        guard flat.count > sqlDescriptionCharactersMax else { return flat }
        return flat.prefix(sqlDescriptionCharactersMax) + "…"
    }
}
