import KakinCore
import KakinService
import KakinStorage
import KakinSystem

/// `kakin migrate-db --from sqlite:PATH --to postgresql://…`: moves a SQLite deployment to PostgreSQL.
enum MigrateDBCommand {
    static let usage = """
        usage: kakin migrate-db --from sqlite:PATH --to postgresql://user@host:port/db [--config kakin.json]
          Copies every table of a SQLite database into an empty PostgreSQL database, after migrating both to
          this build's schema, then runs the ledger check on both and compares them. Stop kakin serve on the
          SQLite file first. The PostgreSQL password comes from the config's databasePasswordEnv, or from
          libpq's PGPASSWORD / ~/.pgpass. Prints a JSON report; exit 0 when both ledgers pass and agree.
        """

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        do {
            args = try ParsedArguments(arguments, valued: ["from", "to", "config"])
            guard args.positionals.isEmpty else { throw ParsedArguments.UsageError(description: "unexpected argument \(args.positionals[0])") }
        } catch {
            Console.err("kakin migrate-db: \(error)")
            return 2
        }
        if args.wantsHelp {
            Console.out(usage)
            return 0
        }
        var source = Configuration(), target = Configuration()
        do {
            guard let from = args.last("from"), let to = args.last("to") else {
                Console.err(usage)
                return 2
            }
            if let path = args.last("config") { target = try Configuration.load(path: path) }
            source.database = try Configuration.Database.parse(from, relativeTo: nil)
            target.database = try Configuration.Database.parse(to, relativeTo: nil)
            guard case .sqlite = source.database, case .postgresql = target.database else {
                Console.err("kakin migrate-db: copies from sqlite:PATH to postgresql://…")
                return 2
            }
        } catch {
            Console.err("kakin migrate-db: invalid configuration: \(error)")
            return 2
        }
        do {
            let from = try KakinRuntime.openDatabase(source)
            let to: any SQLDatabase
            do {
                to = try KakinRuntime.openDatabase(target)
            } catch {
                await from.close()
                throw error
            }
            let status: Int32
            do {
                status = try await copy(from: from, to: to, source, target)
            } catch {
                await from.close()
                await to.close()
                throw error
            }
            await from.close()
            await to.close()
            return status
        } catch let error as KakinError {
            Console.err("kakin migrate-db: \(error.message)" + (error.detail.map { " (\($0))" } ?? ""))
            return 1
        } catch {
            Console.err("kakin migrate-db: \(error)")
            return 1
        }
    }

    /// Migrates both, copies, checks both ledgers; prints the report and returns the exit status.
    static func copy(from: any SQLDatabase, to: any SQLDatabase, _ source: Configuration, _ target: Configuration) async throws -> Int32 {
        let fromStore = KakinStore(database: from, ids: RandomIDGenerator(), clock: SystemClock())
        let toStore = KakinStore(database: to, ids: RandomIDGenerator(), clock: SystemClock())
        try await fromStore.migrate()
        try await toStore.migrate()
        let report = try await SQLTableCopy().copy(from: from, to: to) { table, rows in
            Console.err("kakin migrate-db: \(table): \(rows) rows")
        }
        let before = try await fromStore.checkLedger(), after = try await toStore.checkLedger()
        let agree = before.customers == after.customers && before.entries == after.entries
        let ok = before.ok && after.ok && agree
        let json: JSONValue = [
            "ok": .bool(ok), "from": .string(source.database.description), "to": .string(target.database.description),
            "tables": .object(Dictionary(uniqueKeysWithValues: report.rowsByTable.map { ($0.table, JSONValue.int(Int64($0.rows))) })),
            "ledgerCheck": ["from": before.json, "to": after.json],
        ]
        Console.out(json.prettyString())
        return ok ? 0 : 1
    }
}
