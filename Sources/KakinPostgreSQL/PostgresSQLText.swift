import KakinStorage

/// Kakin's portable SQL (`?` placeholders) in PostgreSQL's form (`$1`, `$2`, …), checked for what a
/// body may not run: transaction control and more than one statement.
struct PostgresSQLText: Sendable {
    /// The statement with `$n` placeholders.
    let text: String
    let placeholderCount: Int

    /// Statements that would commit or roll back a transaction the database manages (and that holds
    /// other callers' writes).
    static let transactionControl: Set<String> = ["BEGIN", "START", "COMMIT", "END", "ROLLBACK", "ABORT", "SAVEPOINT", "RELEASE"]

    /// Translates `sql`. `?` inside string literals, quoted identifiers, comments and dollar-quoted
    /// strings is left alone.
    /// - Throws: `SQLError` `.misuse` for transaction control, several statements, or an unterminated literal.
    init(_ sql: String) throws {
        let bytes = Array(sql.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count + 16)
        var count = 0
        var i = 0
        var statementEnded = false
        func misuse(_ message: String) -> SQLError { SQLError(kind: .misuse, message: message, sql: sql) }
        while i < bytes.count {
            let c = bytes[i]
            if statementEnded, !Self.isSpace(c) {
                // Only whitespace and comments may follow a `;`.
                if !(c == UInt8(ascii: "-") && i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "-"))
                    && !(c == UInt8(ascii: "/") && i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "*")) {
                    throw misuse("one statement per call; use a migration for scripts")
                }
            }
            switch c {
            case UInt8(ascii: "?"):
                count += 1
                out.append(UInt8(ascii: "$"))
                out.append(contentsOf: Array(String(count).utf8))
                i += 1
            case UInt8(ascii: "'"), UInt8(ascii: "\""):
                // 'it''s' and "a""b": a doubled quote stays inside.
                var j = i + 1
                while true {
                    guard j < bytes.count else { throw misuse("unterminated quoted text") }
                    if bytes[j] == c {
                        if j + 1 < bytes.count, bytes[j + 1] == c { j += 2; continue }
                        break
                    }
                    j += 1
                }
                out.append(contentsOf: bytes[i...j])
                i = j + 1
            case UInt8(ascii: "-") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "-"):
                var j = i
                while j < bytes.count, bytes[j] != UInt8(ascii: "\n") { j += 1 }
                out.append(contentsOf: bytes[i..<j])
                i = j
            case UInt8(ascii: "/") where i + 1 < bytes.count && bytes[i + 1] == UInt8(ascii: "*"):
                guard let end = Self.find([UInt8(ascii: "*"), UInt8(ascii: "/")], in: bytes, from: i + 2) else {
                    throw misuse("unterminated comment")
                }
                out.append(contentsOf: bytes[i..<(end + 2)])
                i = end + 2
            case UInt8(ascii: "$"):
                // $tag$ … $tag$ (a dollar-quoted string); $1 is a number, left as it is.
                var j = i + 1
                while j < bytes.count, Self.isTagCharacter(bytes[j]) { j += 1 }
                if j < bytes.count, bytes[j] == UInt8(ascii: "$"), j == i + 1 || !Self.isDigit(bytes[i + 1]) {
                    let tag = Array(bytes[i...j])
                    guard let end = Self.find(tag, in: bytes, from: j + 1) else { throw misuse("unterminated dollar-quoted text") }
                    out.append(contentsOf: bytes[i..<(end + tag.count)])
                    i = end + tag.count
                } else {
                    out.append(c)
                    i += 1
                }
            case UInt8(ascii: ";"):
                statementEnded = true
                i += 1
            default:
                out.append(c)
                i += 1
            }
        }
        if let keyword = Self.firstKeyword(out), Self.transactionControl.contains(keyword) || keyword == "PREPARE" && Self.mentionsTransaction(out) {
            throw misuse("transaction control (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, RELEASE) is managed by the database, not by bodies")
        }
        text = String(decoding: out, as: UTF8.self)
        placeholderCount = count
    }

    private static func isSpace(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D }
    private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
    private static func isTagCharacter(_ c: UInt8) -> Bool {
        isDigit(c) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c >= 0x80
    }

    private static func find(_ needle: [UInt8], in bytes: [UInt8], from start: Int) -> Int? {
        guard needle.count <= bytes.count, start <= bytes.count - needle.count else { return nil }
        for i in start...(bytes.count - needle.count) where bytes[i] == needle[0] && Array(bytes[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }

    /// The statement's first word, upper-cased, after whitespace and comments.
    private static func firstKeyword(_ bytes: [UInt8]) -> String? {
        var i = 0
        while i < bytes.count {
            if isSpace(bytes[i]) || bytes[i] == UInt8(ascii: "(") {
                i += 1
            } else if bytes[i] == UInt8(ascii: "-"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "-") {
                while i < bytes.count, bytes[i] != UInt8(ascii: "\n") { i += 1 }
            } else if bytes[i] == UInt8(ascii: "/"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "*") {
                i = (find([UInt8(ascii: "*"), UInt8(ascii: "/")], in: bytes, from: i + 2) ?? bytes.count) + 2
            } else {
                break
            }
        }
        var j = i
        while j < bytes.count, isTagCharacter(bytes[j]) { j += 1 }
        return j > i ? String(decoding: bytes[i..<j], as: UTF8.self).uppercased() : nil
    }

    private static func mentionsTransaction(_ bytes: [UInt8]) -> Bool {
        String(decoding: bytes, as: UTF8.self).uppercased().contains("TRANSACTION")
    }
}
