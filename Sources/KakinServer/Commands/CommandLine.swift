import AppStoreSimulator
import Foundation
import KakinCore
import KakinService

/// A tiny flag parser: `--name value` pairs, repeatable flags, positionals. Unknown flags and bad values
/// are a one-line error and exit status 2 (the contract).
struct ParsedArguments {
    var values: [String: [String]] = [:]
    var positionals: [String] = []
    var wantsHelp = false

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// `valued` flags take a value; `switches` don't.
    init(_ arguments: [String], valued: Set<String>, switches: Set<String> = []) throws(UsageError) {
        var i = 0
        while i < arguments.count {
            let a = arguments[i]
            if a == "--help" || a == "-h" {
                wantsHelp = true
            } else if a == "-" || !a.hasPrefix("-") {
                positionals.append(a)
            } else if a.hasPrefix("--") {
                var name = String(a.dropFirst(2))
                var inline: String?
                if let eq = name.firstIndex(of: "=") {
                    inline = String(name[name.index(after: eq)...])
                    name = String(name[..<eq])
                }
                if switches.contains(name) {
                    values[name, default: []].append("true")
                } else if valued.contains(name) {
                    if let inline {
                        values[name, default: []].append(inline)
                    } else {
                        guard i + 1 < arguments.count else { throw UsageError(description: "flag --\(name) needs a value") }
                        i += 1
                        values[name, default: []].append(arguments[i])
                    }
                } else {
                    throw UsageError(description: "unknown flag --\(name)")
                }
            } else {
                throw UsageError(description: "unknown flag \(a)")
            }
            i += 1
        }
    }

    func last(_ name: String) -> String? { values[name]?.last }
    func all(_ name: String) -> [String] { values[name] ?? [] }
    func has(_ name: String) -> Bool { values[name] != nil }

    func int(_ name: String, range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let s = last(name) else { return nil }
        guard let n = Int(s), range.contains(n) else {
            throw UsageError(description: "--\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }
}

enum Console {
    static func out(_ s: String) {
        FileHandle.standardOutput.write(Data((s + "\n").utf8))
    }

    static func err(_ s: String) {
        FileHandle.standardError.write(Data((s + "\n").utf8))
    }
}

/// `kakin …`: the command-line entry point.
public enum KakinCommand {
    static let usage = """
        kakin — a self-hostable in-app-purchase backend for App Store apps

        usage:
          kakin serve [--config kakin.json] [--host H] [--port N] [--database URL]
                                    run the server; with no --config: local mode (demo catalog, simulator, loopback)
          kakin simulator serve --port N --notify URL [--catalog FILE] [--bundle-id ID]
                                    run the App Store simulator on its own
          kakin verify [--root CERT.der]… [--bundle-id ID] [--environment E] JWS|-
                                    verify signed App Store data and print it as JSON
          kakin simulate --seed N [--customers N] [--days N] [--faults none|all|LIST] [--database URL] [--replay --until STEP]
                                    the whole system on one clock and one seed, faults injected, invariants checked
          kakin ledger check [--config kakin.json] [--database URL]
                                    prove every balance equals the sum of its ledger entries
          kakin migrate-db --from sqlite:PATH --to postgresql://… [--config kakin.json]
                                    copy a SQLite deployment into an empty PostgreSQL database
          kakin notifications recover --config kakin.json
                                    apply what Notification History has that Kakin missed
          kakin report unused-balance --as-of YYYY-MM-DD [--format json|csv] [--config kakin.json] [--database URL]
                                    unused paid-coin balance at the end of that day (Payment Services Act report)
          kakin backup --to FILE [--config kakin.json] [--database sqlite:PATH]
                                    copy the SQLite database while Kakin serves (PostgreSQL: pg_dump)
          kakin events listen --port N --secret S [--fail-rate 0..1]
                                    a webhook receiver that checks Kakin-Signature and prints one event a line
          kakin events replay --webhook ID (--since TIME | --event ID…) [--config kakin.json] [--database URL]
                                    send an endpoint's events again (back to pending with a fresh retry budget)
          kakin import appStore|googlePlay|balances|revenuecat FILE [--server URL] [--dry-run] [--events]
                                    move an existing app's customers, purchases or coin balances into a running Kakin
          kakin errors [--markdown] print the error catalogue
          kakin export --to DIR [--since TIME] [--format csv|jsonl]
                                    transactions, ledger, events and customers for a warehouse (docs/export.md)
          kakin report rebuild      recompute the business numbers from the facts and compare (docs/metrics.md)
          kakin app --server URL --customer ID --state DIR <launch|buy PRODUCT [--offer ID] [--fail-at payment|send|finish]|unfinished|restore|status|wallet> [--json]
                                    a command-line app on KakinKit and the simulator: replay the app-side flows
          kakin <command> --help    usage of one command
        """

    public static func run(_ arguments: [String]) async -> Int32 {
        guard let command = arguments.first else {
            Console.err(usage)
            return 2
        }
        let rest = Array(arguments.dropFirst())
        switch command {
        case "--help", "-h", "help":
            Console.out(usage)
            return 0
        case "serve":
            return await ServeCommand.run(arguments: rest)
        case "ledger":
            return await LedgerCommand.run(arguments: rest)
        case "migrate-db":
            return await MigrateDBCommand.run(arguments: rest)
        case "notifications":
            return await NotificationsCommand.run(arguments: rest)
        case "errors":
            return ErrorsCommand.run(arguments: rest)
        case "report":
            return await ReportCommand.run(arguments: rest)
        case "backup":
            return await BackupCommand.run(arguments: rest)
        case "export":
            return await ExportCommand.run(arguments: rest)
        case "events":
            return await EventsCommand.run(arguments: rest)
        case "import":
            return await ImportCommand.run(arguments: rest)
        case "simulator":
            return await SimulatorCommand.run(arguments: rest)
        default:
            Console.err("kakin: unknown command \(command) (see kakin --help)")
            return 2
        }
    }
}

enum ErrorsCommand {
    static func run(arguments: [String]) -> Int32 {
        do {
            let args = try ParsedArguments(arguments, valued: [], switches: ["markdown"])
            if args.wantsHelp {
                Console.out("usage: kakin errors [--markdown]   print the error catalogue (docs/errors.md is this output)")
                return 0
            }
            guard args.positionals.isEmpty else { throw ParsedArguments.UsageError(description: "unexpected argument \(args.positionals[0])") }
            if args.has("markdown") {
                FileHandle.standardOutput.write(Data(ErrorKind.markdownCatalogue().utf8))
            } else {
                for k in ErrorKind.allCases { Console.out("\(k.id)\t\(k.code)\t\(k.defaultMessage)") }
            }
            return 0
        } catch {
            Console.err("kakin errors: \(error)")
            return 2
        }
    }
}
