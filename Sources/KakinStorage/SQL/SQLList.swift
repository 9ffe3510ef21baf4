/// SQL for lists of any length in a handful of statement texts. Both engines prepare a statement once per text and
/// keep the least recently used ones (`statementsCachedMax`): a text per list length would prepare again and again and
/// push the hot paths' statements out of the cache. So lists come in powers of two.
public enum SQLList {
    /// `?, ?, …` for an `IN (…)` list of `values`, padded with copies of the last value to the next power of two (a
    /// value listed twice means the same), with the parameters to bind.
    public static func inList(_ values: [SQLValue]) -> (sql: String, parameters: [SQLValue]) {
        precondition(!values.isEmpty, "an IN list holds at least one value")
        let size = paddedCount(values.count)
        return (placeholders(size), values + Array(repeating: values[values.count - 1], count: size - values.count))
    }

    /// `count` rows in chunks whose sizes are powers of two, largest first, none above `max` (a power of two): the
    /// multi-row statements of any batch come in at most log2(max) + 1 texts.
    public static func chunks(_ count: Int, max: Int) -> [Range<Int>] {
        precondition(max >= 1 && max & (max - 1) == 0, "the largest chunk is a power of two")
        var ranges: [Range<Int>] = []
        var start = 0
        var size = max
        while start < count {
            while size > count - start { size /= 2 }
            ranges.append(start..<(start + size))
            start += size
        }
        return ranges
    }

    /// `row, row, …` `count` times, for a multi-row `VALUES` (`row` like `"(?, ?, 'pending')"`).
    public static func rows(_ count: Int, _ row: String) -> String {
        precondition(count >= 1, "a VALUES list has a row")
        return Array(repeating: row, count: count).joined(separator: ", ")
    }

    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    static func paddedCount(_ count: Int) -> Int {
        var size = 1
        while size < count { size *= 2 }
        return size
    }
}
