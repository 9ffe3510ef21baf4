import KakinCore

/// Writes a body has decided and whose answers it needs none of (it read what they depend on first, in the same
/// write), gathered so they go to the database together, each with how many rows it must change:
/// `SQLConnection.executeLater` sends them with the write's next round trip on PostgreSQL and checks the counts there.
public struct WriteBatch: Sendable {
    public private(set) var statements: [SQLStatement] = []
    /// How many rows each statement must change.
    public private(set) var changes: [Int] = []

    public init() {}

    public var isEmpty: Bool { statements.isEmpty }

    mutating func add(_ sql: String, _ parameters: [SQLValue], changes count: Int) {
        precondition(statements.count < KakinStore.batchStatementsMax, "a write batch holds at most \(KakinStore.batchStatementsMax) statements")
        precondition(count >= 0, "a statement changes no rows or some")
        statements.append(SQLStatement(sql, parameters))
        changes.append(count)
    }
}

extension SQLConnection {
    /// Runs `batch` with `executeLater`, whose counts are the write's own decisions: a different count is a broken
    /// invariant (the reads they were decided from are the write's own), not an error to answer.
    public func write(_ batch: WriteBatch) throws {
        let matched = try executeLater(batch)
        precondition(matched, "a write batch changed other row counts than it decided")
    }
}

extension Records {
    /// `SQLConnection.write` inside a use case's write.
    public func write(_ batch: WriteBatch) throws { try db.write(batch) }
}
