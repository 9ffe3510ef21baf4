import Foundation
import KakinCore
import KakinService
import KakinStorage
import KakinSystem

/// `kakin export --to DIR [--since TIME] [--until TIME] [--format csv|jsonl] [--config F] [--database URL]`: the
/// transactions, ledger entries, events and customers written in `[since, until)` (`docs/export.md`), one file per table
/// named by the run's `until`, and a manifest. Each file is written to a temporary name, flushed to disk and renamed:
/// whole or not at all. A second run with `--since` = the first run's `until` adds exactly what is newer.
enum ExportCommand {
    static let usage = """
        usage: kakin export --to DIR [--since TIME] [--until TIME] [--format csv|jsonl] [--config kakin.json] [--database URL]
          Writes DIR/transactions-STAMP, ledger-STAMP, events-STAMP and customers-STAMP (.csv or .jsonl; columns in
          docs/export.md) with the rows written from --since (RFC 3339; default: the beginning) up to --until (default:
          now minus 5 seconds on the clock the rows were stamped with — the simulator's for a local-mode database — so
          writes in flight have committed), then DIR/export-STAMP.json (the manifest, also printed).
          Run again with --since set to the manifest's "until" to add only what is newer. Exit 0 on success.
        """

    /// Writes in flight when the export starts have had this long to commit.
    static let settleMs: Int64 = 5_000

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["to", "since", "until", "format", "config", "database"])
        } catch {
            Console.err("kakin export: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        guard args.positionals.isEmpty, let directory = args.last("to"), !directory.isEmpty else {
            Console.err(usage)
            return 2
        }
        guard let format = Exporter.Format(rawValue: args.last("format") ?? "jsonl") else {
            Console.err("kakin export: --format must be csv or jsonl")
            return 2
        }
        var sinceMs: Int64 = 0
        if let s = args.last("since") {
            guard let ms = Timestamp.parseRFC3339(s) else { Console.err("kakin export: --since must be an RFC 3339 time"); return 2 }
            sinceMs = ms
        }
        var untilMs: Int64?
        if let s = args.last("until") {
            guard let ms = Timestamp.parseRFC3339(s) else { Console.err("kakin export: --until must be an RFC 3339 time"); return 2 }
            untilMs = ms
        }
        let config: Configuration
        do {
            config = try OperatorDatabase.configuration(args)
        } catch {
            Console.err("kakin export: invalid configuration: \(error)")
            return 2
        }
        do {
            let (app, database) = try await KakinRuntime.makeApp(KakinRuntime.Options(configuration: config, logger: Logger(minimum: .error)))
            let until: Int64
            do {
                if let untilMs {
                    until = untilMs
                } else {
                    until = Exporter.defaultUntilMs(stampClock: try await app.store.stampClock(), wallNowMs: SystemClock().nowMs())
                }
            } catch {
                await database.close()
                throw error
            }
            guard until > sinceMs else {
                await database.close()
                Console.err("kakin export: --until must be later than --since")
                return 2
            }
            let manifest: JSONValue
            do {
                manifest = try await Exporter.export(store: app.store, directory: directory, sinceMs: sinceMs, untilMs: until, format: format)
            } catch {
                await database.close()
                throw error
            }
            await database.close()
            Console.out(manifest.prettyString())
            return 0
        } catch let error as KakinError {
            Console.err("kakin export: \(error.message)" + (error.detail.map { " (\($0))" } ?? ""))
            return error.kind == .invalidConfiguration ? 2 : 1
        } catch {
            Console.err("kakin export: \(KakinError(.exportFailed).message) (\(error))")
            return 1
        }
    }
}

/// The export itself (the command's body; tests call it on a store).
enum Exporter {
    enum Format: String { case csv, jsonl }

    /// The window's end when `--until` is not given: `settleMs` of real time ago on the clock the rows were stamped
    /// with, so writes in flight have committed and every later write is stamped at or after it. The wall clock, or
    /// the simulated clock local mode recorded: standing still between moves (rate 0), it ends at the simulated now —
    /// every row stamped before the last clock move is in; rows written since then join the run after the next move.
    static func defaultUntilMs(stampClock: StampClock?, wallNowMs: Int64) -> Int64 {
        guard let stampClock else { return wallNowMs - ExportCommand.settleMs }
        return stampClock.nowMs(atWallMs: wallNowMs - ExportCommand.settleMs)
    }

    /// Writes the four files and the manifest; answers the manifest.
    static func export(store: KakinStore, directory: String, sinceMs: Int64, untilMs: Int64, format: Format) async throws -> JSONValue {
        precondition(untilMs > sinceMs, "an export window is not empty")
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw KakinError(.exportFailed, detail: "cannot create \(directory): \(error)")
        }
        let stamp = Timestamp.rfc3339(untilMs).replacingOccurrences(of: "-", with: "").replacingOccurrences(of: ":", with: "")
        var files: [String: JSONValue] = [:]
        for table in ExportTable.allCases {
            let name = "\(table.rawValue)-\(stamp).\(format.rawValue)"
            let rows = try await writeAtomically(directory: directory, name: name) { fd in
                var count = 0
                if format == .csv { try write(fd, table.columns.joined(separator: ",") + "\n") }
                var after: String?
                while true {
                    let page = try await store.exportPage(table, sinceMs: sinceMs, untilMs: untilMs, afterKey: after,
                                                          limit: KakinStore.exportPageRowsMax)
                    guard let last = page.last else { break }
                    var text = ""
                    for row in page { text += line(row, table: table, format: format) }
                    try write(fd, text)
                    count += page.count
                    after = last.key
                }
                return count
            }
            files[table.rawValue] = ["file": .string(name), "rows": .int(Int64(rows))]
        }
        let manifest: JSONValue = ["since": .string(Timestamp.rfc3339(sinceMs)), "until": .string(Timestamp.rfc3339(untilMs)),
                                   "format": .string(format.rawValue), "files": .object(files)]
        _ = try await writeAtomically(directory: directory, name: "export-\(stamp).json") { fd in
            try write(fd, manifest.prettyString() + "\n")
            return 0
        }
        return manifest
    }

    static func line(_ row: ExportRow, table: ExportTable, format: Format) -> String {
        switch format {
        case .jsonl:
            // Keys in column order (a stable line, easy to diff).
            return "{" + table.columns.map { c in JSONValue.string(c).jsonString + ":" + (row.values[c] ?? .null).jsonString }.joined(separator: ",") + "}\n"
        case .csv:
            return table.columns.map { csvField(row.values[$0] ?? .null) }.joined(separator: ",") + "\n"
        }
    }

    static func csvField(_ v: JSONValue) -> String {
        let text: String
        switch v {
        case .null: return ""
        case .string(let s): text = s
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return String(i)
        default: text = v.jsonString
        }
        guard text.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    static func write(_ fd: Int32, _ text: String) throws {
        guard FileDescriptorOutput.writeAll(fd, Array(text.utf8)) else { throw KakinError(.exportFailed, detail: "write failed: errno \(errno)") }
    }

    /// Writes `name` in `directory` through a temporary file: flushed, then renamed over (the directory flushed too),
    /// so the name holds a whole file or nothing; on failure the temporary file is removed.
    static func writeAtomically(directory: String, name: String, _ body: (Int32) async throws -> Int) async throws -> Int {
        let final = (directory as NSString).appendingPathComponent(name)
        let temporary = (directory as NSString).appendingPathComponent(".\(name).tmp-\(getpid())")
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw KakinError(.exportFailed, detail: "cannot create \(temporary): errno \(errno)") }
        do {
            let result = try await body(fd)
            guard fsync(fd) == 0 else { throw KakinError(.exportFailed, detail: "fsync failed: errno \(errno)") }
            close(fd)
            guard rename(temporary, final) == 0 else { throw KakinError(.exportFailed, detail: "rename failed: errno \(errno)") }
            let dir = open(directory, O_RDONLY)
            if dir >= 0 {
                _ = fsync(dir)
                close(dir)
            }
            return result
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
    }
}
