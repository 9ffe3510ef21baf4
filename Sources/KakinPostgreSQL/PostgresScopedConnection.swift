import KakinStorage

/// What a write or read body sees: forwards to the connection while the body runs, refuses afterwards.
final class PostgresScopedConnection: SQLConnection {
    private var connection: PGConnection?

    init(_ connection: PGConnection) { self.connection = connection }

    var dialect: SQLDialect { .postgresql }

    /// Called when the body returned; later use throws instead of touching another unit of work.
    func invalidate() { connection = nil }

    func execute(_ sql: String, _ parameters: [SQLValue]) throws -> Int {
        try live(sql).execute(sql, parameters)
    }

    func query(_ sql: String, _ parameters: [SQLValue]) throws -> [SQLRow] {
        try live(sql).query(sql, parameters)
    }

    func queryOne(_ sql: String, _ parameters: [SQLValue]) throws -> SQLRow? {
        try live(sql).queryOne(sql, parameters)
    }

    private func live(_ sql: String) throws -> PGConnection {
        guard let connection else {
            throw SQLError(kind: .misuse, message: "SQLConnection used after the closure it was handed to returned", sql: sql)
        }
        return connection
    }
}
