import Foundation
import HTTPServer
import KakinCore
import KakinEvents
import KakinEventsListener
import KakinStorage
import KakinSystem

/// `kakin events listen …` (a receiver that checks signatures and prints events) and `kakin events replay …`
/// (deliveries back to pending, against the database).
enum EventsCommand {
    static let usage = """
        usage: kakin events listen --port N --secret S [--secret S2] [--fail-rate 0..1] [--seed N] [--host H]
                 Receives Kakin's webhooks on any path: checks Kakin-Signature (400 when it does not verify), prints each
                 event once as one line of JSON on standard output (redeliveries of an event it printed are answered 200
                 and not printed again), and fails the given share of requests with 500 (seeded, default 1), to watch
                 Kakin retry. S is the endpoint's secret (16 to 1024 bytes; two while rotating). Stops on SIGINT/SIGTERM.
               kakin events replay --webhook ID (--since TIME | --event ID…) [--config kakin.json] [--database URL]
                 Puts the endpoint's deliveries of those events (the ones created at or after TIME, RFC 3339, or the
                 named ones, at most 1000) back to pending with a fresh retry budget, creating missing ones for events
                 its types admit; a running Kakin sends them. Prints {"queued": N}.
        """

    static func run(arguments: [String]) async -> Int32 {
        switch arguments.first {
        case "listen": return await listen(Array(arguments.dropFirst()))
        case "replay": return await replay(Array(arguments.dropFirst()))
        case "--help", "-h":
            Console.out(usage)
            return 0
        default:
            Console.err(usage)
            return 2
        }
    }

    static func listen(_ arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        let port: Int
        var secrets: [[UInt8]] = []
        var failRate = 0.0
        var seed: UInt64 = 1
        do {
            args = try ParsedArguments(arguments, valued: ["port", "secret", "fail-rate", "seed", "host"])
            if args.wantsHelp {
                Console.out(usage)
                return 0
            }
            guard args.positionals.isEmpty else { throw ParsedArguments.UsageError(description: "unexpected argument \(args.positionals[0])") }
            guard let p = try args.int("port", range: 0...65535) else { throw ParsedArguments.UsageError(description: "--port is required") }
            port = p
            guard args.has("secret") else { throw ParsedArguments.UsageError(description: "--secret is required (the endpoint's signing secret)") }
            for value in args.all("secret") {
                switch WebhookEndpoint.parseSecrets(value) {
                case .success(let s): secrets += s
                case .failure(let problem): throw ParsedArguments.UsageError(description: "--secret \(problem.message)")
                }
            }
            if let rate = args.last("fail-rate") {
                guard let r = Double(rate), (0...1).contains(r) else { throw ParsedArguments.UsageError(description: "--fail-rate must be a number from 0 to 1") }
                failRate = r
            }
            if let s = args.last("seed") {
                guard let n = UInt64(s) else { throw ParsedArguments.UsageError(description: "--seed must be a whole number") }
                seed = n
            }
        } catch {
            Console.err("kakin events listen: \(error)")
            return 2
        }
        let listener = WebhookListener(secrets: secrets, failRate: failRate, seed: seed, output: { line in Console.out(line) })
        var configuration = HTTPServerConfiguration(host: args.last("host") ?? "127.0.0.1", port: port)
        configuration.bodyBytesMax = WebhookListener.bodyBytesMax
        let server = HTTPServer(configuration: configuration, handler: { await listener.handle($0) },
                                rejectionResponder: { rejection, _ in .json(Array(#"{"error":"\#(rejection)"}"#.utf8), status: rejection.suggestedStatus) })
        do {
            try server.start()
        } catch {
            Console.err("kakin events listen: \(error)")
            return 1
        }
        Console.err("kakin events listen: http://\(configuration.host):\(server.port)/ — checking Kakin-Signature, one event a line below"
                    + (failRate > 0 ? ", failing \(Int(failRate * 100)) % of requests (seed \(seed))" : ""))
        _ = await Signals.waitForTermination()
        await server.shutdown(gracePeriodSeconds: 2)
        let c = listener.counts
        Console.err("kakin events listen: \(c.printed) events printed, \(c.duplicates) redeliveries, \(c.failed) failed on purpose, \(c.rejected) refused")
        return 0
    }

    static func replay(_ arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        let request: ReplayRequest
        do {
            args = try ParsedArguments(arguments, valued: ["webhook", "since", "event", "config", "database"])
            if args.wantsHelp {
                Console.out(usage)
                return 0
            }
            guard args.positionals.isEmpty else { throw ParsedArguments.UsageError(description: "unexpected argument \(args.positionals[0])") }
            guard args.has("webhook") else { throw ParsedArguments.UsageError(description: "--webhook is required") }
            switch (args.last("since"), args.all("event")) {
            case (let since?, let ids) where ids.isEmpty:
                guard let ms = Timestamp.parseRFC3339(since) else { throw ParsedArguments.UsageError(description: "--since must be an RFC 3339 time such as 2026-11-30T15:00:00Z") }
                request = .since(ms: ms)
            case (nil, let ids) where (1...KakinStore.replayEventIdsMax).contains(ids.count):
                request = .eventIds(ids)
            default:
                throw ParsedArguments.UsageError(description: "give --since TIME or --event ID (1 to \(KakinStore.replayEventIdsMax) of them), not both")
            }
        } catch {
            Console.err("kakin events replay: \(error)\n" + usage)
            return 2
        }
        let config: Configuration
        do {
            config = try OperatorDatabase.configuration(args)
        } catch {
            Console.err("kakin events replay: invalid configuration: \(error)")
            return 2
        }
        let id = args.last("webhook") ?? ""
        guard let endpoint = config.events?.endpoint(id) else {
            Console.err("kakin events replay: the configuration has no webhook \(id) in events.webhooks")
            return 2
        }
        do {
            let database = try KakinRuntime.openDatabase(config)
            let store = KakinStore(database: database, ids: RandomIDGenerator(), clock: SystemClock())
            let queued: Int
            do {
                try await store.migrate()
                queued = try await EventReplay.run(store: store, endpoint: endpoint, request, nowMs: SystemClock().nowMs())
            } catch {
                await database.close()
                throw error
            }
            await database.close()
            Console.out(#"{"queued": \#(queued)}"#)
            return 0
        } catch let error as KakinError {
            Console.err("kakin events replay: \(error.message)" + (error.detail.map { " (\($0))" } ?? ""))
            return 1
        } catch {
            Console.err("kakin events replay: \(error)")
            return 1
        }
    }
}
