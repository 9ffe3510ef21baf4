import Foundation
import KakinService
import Testing

/// The path/store table: every way a fact enters has one row saying what it adds to the one apply's write
/// (`IngestRegistry`), and `docs/architecture.md` shows the same rows. A path added without its row, or a row removed
/// from either, fails here.
@Suite struct IngestRegistryTests {
    /// The rows of the documented table (between its markers): store, path, extras, events.
    static func documentedRows() throws -> [String] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../docs/architecture.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        guard let start = text.range(of: "<!-- path-store-table -->"), let end = text.range(of: "<!-- /path-store-table -->") else {
            Issue.record("docs/architecture.md has no path/store table")
            return []
        }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line -> String? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4, cells[0].hasPrefix("`") else { return nil }
            let plain = cells.map { $0.replacingOccurrences(of: "`", with: "") }
            let extras = cells[2] == "—" ? "" : plain[2]
            return "\(plain[0]) \(plain[1]): \(extras) (events \(plain[3]))"
        }
    }

    static func registeredRows() -> [String] {
        IngestRegistry.rows.map {
            "\($0.store) \($0.path.rawValue): \($0.extras.map(\.rawValue).joined(separator: ", ")) (events \($0.events.rawValue))"
        }
    }

    @Test func everyPathHasItsRowInThePathTable() {
        for path in IngestPath.allCases {
            #expect(IngestRegistry.rows.filter { $0.store == "appStore" && $0.path == path }.count == 1,
                    "path \(path.rawValue) has no row (or several) in IngestRegistry.rows")
        }
        for (store, paths) in [("googlePlay", [IngestPath.app, .notification])] {
            for path in paths {
                #expect(IngestRegistry.rows.filter { $0.store == store && $0.path == path }.count == 1, "\(store) \(path.rawValue) has no row")
            }
        }
    }

    @Test func theDocumentedTableIsTheRegisteredOne() throws {
        #expect(try Self.documentedRows() == Self.registeredRows())
    }
}
