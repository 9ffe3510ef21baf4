import KakinCore

/// Writes a body has decided and whose answers it needs none of (it read what they depend on first, in the same
/// write), gathered so they go to the database together: `Records.write` runs them with `SQLConnection.executeBatch`,
/// one round trip on PostgreSQL. Each statement says how many rows it must change; a different count is a broken
/// invariant (the reads they were decided from are the write's own), not an error to answer.
public struct WriteBatch: Sendable {
    var statements: [SQLStatement] = []
    var changes: [Int] = []

    public init() {}

    public var isEmpty: Bool { statements.isEmpty }

    mutating func add(_ sql: String, _ parameters: [SQLValue], changes count: Int) {
        precondition(statements.count < KakinStore.batchStatementsMax, "a write batch holds at most \(KakinStore.batchStatementsMax) statements")
        statements.append(SQLStatement(sql, parameters))
        changes.append(count)
    }
}

extension SQLConnection {
    /// Runs `batch` (nothing when it is empty) and checks that each statement changed the rows it said.
    public func write(_ batch: WriteBatch) throws {
        if batch.isEmpty { return }
        let counts = try executeBatch(batch.statements)
        precondition(counts == batch.changes, "a write batch changed \(counts) rows, decided \(batch.changes)")
    }
}

extension Records {
    /// `SQLConnection.write` inside a use case's write.
    public func write(_ batch: WriteBatch) throws { try db.write(batch) }
}
