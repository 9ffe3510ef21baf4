import Foundation
import KakinAdmin
import KakinCore
import KakinService
import KakinSQLite
import KakinStorage
import KakinSystem

/// `kakin report unused-balance --as-of YYYY-MM-DD [--format json|csv] [--config F] [--database URL]`: the
/// unused paid-coin balance at the end of that day (each app's `reportingTimeZone`, default Asia/Tokyo).
/// JSON prints the totals (the contract's shape); CSV prints one line per customer for the auditor,
/// streamed as computed. Without `--config`: the local-mode database and the demo app.
enum ReportCommand {
    static let usage = """
        usage: kakin report unused-balance --as-of YYYY-MM-DD [--format json|csv] [--config kakin.json] [--database URL]
               kakin report rebuild [--config kakin.json] [--database URL]
          Unused paid coins at the end of that day in each app's reporting time zone, valued at what customers paid
          (first in, first out per customer; free coins never count). json: totals per app, currency and source
          (appStore, or the provider of coins sold outside the App Store); csv: one line per customer
          (bundleId,currency,customerId,unusedPaidCoins,value,source). Exit 0 on success.
        """

    static func run(arguments: [String]) async -> Int32 {
        await run(arguments: arguments, output: STDOUT_FILENO, errorOutput: STDERR_FILENO)
    }

    static func run(arguments: [String], output: Int32, errorOutput: Int32) async -> Int32 {
        func fail(_ message: String, _ status: Int32) -> Int32 {
            FileDescriptorOutput.writeAll(errorOutput, Array("kakin report: \(message)\n".utf8))
            return status
        }
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["as-of", "format", "config", "database"])
        } catch {
            return fail("\(error)", 2)
        }
        if args.wantsHelp {
            FileDescriptorOutput.writeAll(output, Array((usage + "\n").utf8))
            return 0
        }
        if args.positionals == ["rebuild"] { return await ReportRebuildCommand.run(args, output: output, errorOutput: errorOutput) }
        guard args.positionals == ["unused-balance"], let asOf = args.last("as-of") else { return fail("\n" + usage, 2) }
        guard Timestamp.parseDate(asOf) != nil else { return fail("--as-of must be a date YYYY-MM-DD", 2) }
        let format = args.last("format") ?? "json"
        guard format == "json" || format == "csv" else { return fail("--format must be json or csv", 2) }
        let config: Configuration
        do {
            config = try OperatorDatabase.configuration(args)
        } catch {
            return fail("invalid configuration: \(error)", 2)
        }
        do {
            let (app, database) = try await KakinRuntime.makeApp(KakinRuntime.Options(configuration: config, logger: Logger(minimum: .error)))
            var failure: (any Error)?
            do {
                if format == "csv" {
                    FileDescriptorOutput.writeAll(output, Array((UnusedBalanceLine.csvHeader + "\n").utf8))
                    _ = try await app.desk.unusedBalance(asOf: asOf) { line in FileDescriptorOutput.writeAll(output, Array((line.csv + "\n").utf8)) }
                } else {
                    let report = try await app.desk.unusedBalance(asOf: asOf)
                    FileDescriptorOutput.writeAll(output, Array((report.json.prettyString() + "\n").utf8))
                }
            } catch {
                failure = error
            }
            await database.close()
            if let failure { throw failure }
            return 0
        } catch let error as KakinError {
            return fail(error.message + (error.detail.map { " (\($0))" } ?? ""), error.kind == .invalidConfiguration ? 2 : 1)
        } catch {
            return fail("\(error)", 1)
        }
    }
}

/// `kakin backup --to FILE [--config F] [--database URL]`: a consistent copy of the SQLite database, taken with
/// SQLite's online backup API while Kakin keeps serving. PostgreSQL: use `pg_dump` (see docs/operations.md).
enum BackupCommand {
    static let usage = """
        usage: kakin backup --to FILE [--config kakin.json] [--database sqlite:PATH]
          Copies the SQLite database while Kakin runs (one consistent snapshot, checked, then renamed to FILE).
          For PostgreSQL use pg_dump. Without --config: the local-mode database (kakin.db). Exit 0 on success.
        """

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["to", "config", "database"])
        } catch {
            Console.err("kakin backup: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        guard args.positionals.isEmpty, let destination = args.last("to"), !destination.isEmpty else {
            Console.err(usage)
            return 2
        }
        let location: Configuration.Database
        do {
            location = try OperatorDatabase.configuration(args).database
        } catch {
            Console.err("kakin backup: invalid configuration: \(error)")
            return 2
        }
        guard case .sqlite(let path) = location else {
            Console.err("kakin backup: the database is PostgreSQL: back it up with pg_dump (see docs/operations.md)")
            return 2
        }
        do {
            let summary = try await SQLiteDatabase.backup(path: path, to: destination)
            Console.out(#"{"database": \#(JSONValue.string(path).jsonString), "backup": \#(JSONValue.string(destination).jsonString), "pages": \#(summary.pages), "bytes": \#(summary.bytes)}"#)
            return 0
        } catch {
            Console.err("kakin backup: \(KakinError(.backupFailed).message) (\(error))")
            return 1
        }
    }
}

/// The database (and apps) an operator command works on: `--config`, then `--database`; without either, the
/// local-mode database and demo app.
enum OperatorDatabase {
    static func configuration(_ args: ParsedArguments) throws -> Configuration {
        var config = try args.last("config").map { try Configuration.load(path: $0) } ?? LocalMode.configuration()
        if let db = args.last("database") { config.database = try Configuration.Database.parse(db, relativeTo: nil) }
        return config
    }
}
