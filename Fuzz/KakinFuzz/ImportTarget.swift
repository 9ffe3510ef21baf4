import KakinCore

/// An import file (`kakin import`: uploaded by an operator, exported by another system): the first byte picks the kind
/// (mod 4: `0` appStore, `1` googlePlay, `2` balances, `3` revenuecat), the rest is the file. A refusal is
/// `import_file_invalid`; what parses holds 1 to `rowsMax` records in file order, every field within `fieldBytesMax`,
/// each record checked by `ImportRow.parse` (its reject or its row), and written back as a quoted CSV it parses back to
/// the same fields.
struct ImportTarget: FuzzTarget {
    static let roundTripBytesMax = 1 << 20

    func run(_ input: [UInt8]) {
        guard let first = input.first else { return }
        let kind = ImportKind.allCases[Int(first) % ImportKind.allCases.count]
        let file = Array(input.dropFirst())
        let records: [ImportRecord]
        do {
            records = try ImportFile.parse(file, kind: kind)
        } catch {
            if error.kind != .importFileInvalid { finding("a file refused with \(error.kind), not import_file_invalid") }
            return
        }
        guard !records.isEmpty, records.count <= ImportLimits.rowsMax else { finding("\(records.count) records") }
        for (before, record) in zip(records, records.dropFirst()) where record.line <= before.line {
            finding("record at line \(record.line) after one at line \(before.line)")
        }
        for record in records {
            if record.line < 1 { finding("record at line \(record.line)") }
            if record.fields.values.contains(where: { $0.isEmpty || $0.utf8.count > ImportLimits.fieldBytesMax }) {
                finding("a field empty or over \(ImportLimits.fieldBytesMax) bytes at line \(record.line)")
            }
            _ = try? ImportRow.parse(record, kind: kind)
            _ = record.json.serialized()
        }
        checkRoundTrip(records, kind: kind)
    }

    /// Every record written as a CSV row of quoted fields under a header of the columns they use parses back to the same
    /// fields. Skipped where CSV cannot say the same thing: a column name the header would trim, or that holds a line
    /// break or `;` (the header's separator is read from its first line), more columns than a header may have, a record
    /// spread over more lines than one record may be, or a file of more than `roundTripBytesMax`.
    func checkRoundTrip(_ records: [ImportRecord], kind: ImportKind) {
        var columns = kind.requiredColumns
        for key in records.flatMap(\.fields.keys) where !columns.contains(key) { columns.append(key) }
        guard columns.count <= ImportLimits.columnsMax,
              !columns.contains(where: { $0.isEmpty || $0.first!.isWhitespace || $0.last!.isWhitespace || $0.contains(where: \.isNewline) || $0.contains(";") })
        else { return }
        func quoted(_ value: String) -> String { "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\"" }
        var text = columns.map(quoted).joined(separator: ",") + "\n"
        for record in records {
            let row = columns.map { quoted(record.fields[$0] ?? "") }.joined(separator: ",")
            guard row.utf8.count(where: { $0 == UInt8(ascii: "\n") }) < ImportLimits.recordLinesMax else { return }
            text += row + "\n"
            // Many sparse rows under many columns: a file far larger than the input, slow to read for nothing new.
            guard text.utf8.count <= Self.roundTripBytesMax else { return }
        }
        let again: [ImportRecord]
        do {
            again = try ImportFile.parse(Array(text.utf8), kind: kind)
        } catch {
            finding("records written back as CSV are refused: \(error.message)")
        }
        guard again.map(\.fields) == records.map(\.fields) else { finding("records written back as CSV read differently") }
    }
}
