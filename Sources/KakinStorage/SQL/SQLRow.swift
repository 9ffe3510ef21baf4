/// One result row. Columns are read by name (as the query spelled them, e.g. `AS balance`) or by index.
///
/// Asking for a column the query did not return is a programming error and traps: a silent NULL
/// would turn a typo into a zero balance.
public struct SQLRow: Sendable {
    let columns: SQLColumns
    let values: [SQLValue]

    package init(columns: SQLColumns, values: [SQLValue]) {
        assert(columns.names.count == values.count)
        self.columns = columns
        self.values = values
    }

    /// Column names in result order.
    public var columnNames: [String] { columns.names }

    public var count: Int { values.count }

    public subscript(_ index: Int) -> SQLValue {
        precondition(values.indices.contains(index), "SQLRow has no column at index \(index) (\(values.count) columns)")
        return values[index]
    }

    public subscript(_ column: String) -> SQLValue {
        guard let index = columns.indexByName[column] else {
            preconditionFailure("SQLRow has no column '\(column)'; columns: \(columns.names)")
        }
        return values[index]
    }

    public func int(_ column: String) -> Int64? { self[column].int }
    public func double(_ column: String) -> Double? { self[column].double }
    public func string(_ column: String) -> String? { self[column].string }
    public func bytes(_ column: String) -> [UInt8]? { self[column].bytes }
    public func bool(_ column: String) -> Bool? { self[column].bool }
}

/// Column names of one result, shared by all its rows.
package final class SQLColumns: Sendable {
    package let names: [String]
    /// First occurrence wins when a join returns two columns of the same name.
    let indexByName: [String: Int]

    package init(names: [String]) {
        self.names = names
        var indexByName: [String: Int] = [:]
        for (index, name) in names.enumerated() where indexByName[name] == nil {
            indexByName[name] = index
        }
        self.indexByName = indexByName
    }
}
