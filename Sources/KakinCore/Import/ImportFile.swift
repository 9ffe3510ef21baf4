/// Moving in (`kakin import`): the file a team exports from the system it used before Kakin, read into rows. Pure:
/// the bytes in, numbered records out, or one error naming the line (an empty or malformed file is refused before any
/// job starts). Each record is then checked on its own (`ImportRow`), so a bad row is a reject, never a refused file.

/// What a file holds, and the columns its rows need.
public enum ImportKind: String, Sendable, CaseIterable {
    /// `customerId,transactionId`: any transaction of the customer's App Store purchases; Kakin reads the history.
    case appStore
    /// `customerId,packageName,productId,purchaseToken`: a Google Play purchase.
    case googlePlay
    /// `customerId,paid,free,reference,asOf`: the coin balances of the old coin system.
    case balances
    /// RevenueCat's scheduled data export (transactions feed): its app user ID, store and store transaction ID.
    case revenuecat

    /// Columns a CSV header must name (more are allowed and ignored).
    public var requiredColumns: [String] {
        switch self {
        case .appStore: return ["customerId", "transactionId"]
        case .googlePlay: return ["customerId", "packageName", "productId", "purchaseToken"]
        case .balances: return ["customerId", "paid", "free", "reference", "asOf"]
        case .revenuecat: return RevenueCatColumns.required
        }
    }
}

/// One row of the file: its 1-based line number (where it starts) and its fields by column name.
public struct ImportRecord: Sendable, Hashable {
    public var line: Int
    public var fields: [String: String]

    public init(line: Int, fields: [String: String]) {
        self.line = line
        self.fields = fields
    }

    /// The row as the rejects list shows it.
    public var json: JSONValue { .object(fields.mapValues(JSONValue.string)) }
}

public enum ImportFile {
    /// Reads a CSV file with a header row (`,` or, as RevenueCat writes it, `;` between fields; RFC 4180 quotes), or
    /// JSON lines (one object per line, recognised by a first `{`). Blank lines are skipped; an empty cell, or a JSON
    /// line's `null` or `""`, is an absent field.
    /// - Throws: `importFileInvalid` naming the line, for a file that is empty, not UTF-8, too large or malformed.
    public static func parse(_ bytes: [UInt8], kind: ImportKind) throws(KakinError) -> [ImportRecord] {
        ImportLimits.check()
        guard bytes.count <= ImportLimits.fileBytesMax else {
            throw invalid(nil, "the file is larger than \(ImportLimits.fileBytesMax >> 20) MiB; split it")
        }
        var body = bytes[...]
        if body.starts(with: [0xEF, 0xBB, 0xBF]) { body = body.dropFirst(3) }
        guard let text = String(validating: body, as: UTF8.self) else { throw invalid(nil, "the file is not UTF-8 text") }
        let records = text.utf8.first(where: { $0 != 0x20 && $0 != 0x09 && $0 != 0x0A && $0 != 0x0D }) == UInt8(ascii: "{")
            ? try jsonLines(text) : try csv(text, kind: kind)
        guard !records.isEmpty else { throw invalid(1, "the file has no rows") }
        guard records.count <= ImportLimits.rowsMax else {
            throw invalid(records[ImportLimits.rowsMax].line, "more than \(ImportLimits.rowsMax) rows; split the file")
        }
        return records
    }

    static func invalid(_ line: Int?, _ reason: String) -> KakinError {
        KakinError(.importFileInvalid, (line.map { "Line \($0): " } ?? "") + reason + "; no import was started.")
    }

    // MARK: JSON lines

    static func jsonLines(_ text: String) throws(KakinError) -> [ImportRecord] {
        var out: [ImportRecord] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            let trimmed = line.trimmingSuffix("\r")
            guard trimmed.contains(where: { !$0.isWhitespace }) else { continue }
            guard let value = try? JSONParser.parse(String(trimmed), depthMax: 2), case .object(let object) = value else {
                throw invalid(number, "not a JSON object")
            }
            var fields: [String: String] = [:]
            for (key, v) in object {
                switch v {
                case .string(let s) where s.isEmpty: continue
                case .string(let s): fields[key] = s
                case .int(let n): fields[key] = String(n)
                case .double(let d): fields[key] = String(d)
                case .bool(let b): fields[key] = String(b)
                case .null: continue
                case .array, .object: throw invalid(number, "field \(key) is not a string or a number")
                }
                guard fields[key]!.utf8.count <= ImportLimits.fieldBytesMax else { throw invalid(number, "field \(key) is too long") }
            }
            out.append(ImportRecord(line: number, fields: fields))
            guard out.count <= ImportLimits.rowsMax else { break }
        }
        return out
    }

    // MARK: CSV

    static func csv(_ text: String, kind: ImportKind) throws(KakinError) -> [ImportRecord] {
        var reader = CSVReader(text)
        guard let (headerLine, header) = try reader.next(separator: nil) else { throw invalid(1, "the file is empty") }
        let columns = header.map { $0.trimmingWhitespace() }
        guard columns.count <= ImportLimits.columnsMax else { throw invalid(headerLine, "more than \(ImportLimits.columnsMax) columns") }
        if let duplicate = columns.enumerated().first(where: { i, c in columns[..<i].contains(c) })?.element {
            throw invalid(headerLine, "the column \(duplicate) appears twice")
        }
        if let missing = kind.requiredColumns.first(where: { !columns.contains($0) }) {
            throw invalid(headerLine, "the header has no column \(missing) (a \(kind.rawValue) file needs \(kind.requiredColumns.joined(separator: ",")))")
        }
        var out: [ImportRecord] = []
        while let (line, values) = try reader.next(separator: reader.separator) {
            if values.count == 1, values[0].isEmpty { continue }
            guard values.count == columns.count else {
                throw invalid(line, "\(values.count) fields where the header has \(columns.count)")
            }
            var fields: [String: String] = [:]
            for (c, v) in zip(columns, values) where !v.isEmpty { fields[c] = v }
            out.append(ImportRecord(line: line, fields: fields))
            guard out.count <= ImportLimits.rowsMax else { break }
        }
        return out
    }
}

/// RFC 4180 records over the file's UTF-8 bytes (separators, quotes and line breaks are ASCII): quoted fields may hold
/// the separator, `""` and line breaks; the separator is the header's (`,`, or `;` when the header has semicolons and no
/// comma).
struct CSVReader {
    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private(set) var separator = UInt8(ascii: ",")

    init(_ text: String) { bytes = Array(text.utf8) }

    /// The next record and the line it starts on; nil at the end. `separator` nil: the header, which decides it.
    mutating func next(separator given: UInt8?) throws(KakinError) -> (Int, [String])? {
        let quote = UInt8(ascii: "\""), newline = UInt8(ascii: "\n"), cr = UInt8(ascii: "\r")
        guard index < bytes.count else { return nil }
        if given == nil {
            let header = bytes[index..<(bytes[index...].firstIndex(of: newline) ?? bytes.count)]
            separator = header.contains(UInt8(ascii: ";")) && !header.contains(UInt8(ascii: ",")) ? UInt8(ascii: ";") : UInt8(ascii: ",")
        }
        let start = line
        var fields: [String] = []
        var field: [UInt8] = []
        var quoted = false
        var wasQuoted = false
        func fail(_ reason: String) -> KakinError { ImportFile.invalid(start, reason) }
        while index < bytes.count {
            let c = bytes[index]
            index += 1
            if quoted {
                if c == quote {
                    if index < bytes.count, bytes[index] == quote {
                        field.append(quote)
                        index += 1
                    } else {
                        quoted = false
                    }
                } else {
                    if c == newline {
                        line += 1
                        guard line - start < ImportLimits.recordLinesMax else {
                            throw fail("a quoted field runs over \(ImportLimits.recordLinesMax) lines (a quote is missing)")
                        }
                    }
                    field.append(c)
                }
            } else if c == quote {
                guard field.isEmpty, !wasQuoted else { throw fail("a quote inside an unquoted field") }
                quoted = true
                wasQuoted = true
            } else if c == separator {
                fields.append(String(decoding: field, as: UTF8.self))
                field = []
                wasQuoted = false
            } else if c == newline {
                line += 1
                break
            } else if c == cr, index < bytes.count, bytes[index] == newline {
                continue
            } else {
                guard !wasQuoted else { throw fail("text after a closing quote") }
                field.append(c)
            }
            guard field.count <= ImportLimits.fieldBytesMax else { throw fail("a field is longer than \(ImportLimits.fieldBytesMax) bytes") }
        }
        if quoted { throw fail("a quoted field is not closed") }
        fields.append(String(decoding: field, as: UTF8.self))
        return (start, fields)
    }
}

extension Substring {
    func trimmingSuffix(_ suffix: Character) -> Substring { last == suffix ? dropLast() : self }
}

extension String {
    func trimmingWhitespace() -> String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
