import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinSystem
#if canImport(Glibc)
import Glibc
#endif

/// `kakin import KIND FILE [--server URL] [--dry-run] [--events]`: uploads the file to a running Kakin
/// (`POST /v1/admin/imports`), then follows the job: a progress bar on a terminal, a plain line every few seconds
/// otherwise. Exit 0 when every row was applied or already present, 1 with rejects (or a job that failed or was
/// cancelled), 2 usage. An admin API key, when the server needs one, comes from `KAKIN_API_KEY`.
enum ImportCommand {
    static let usage = """
        usage: kakin import appStore|googlePlay|balances|revenuecat FILE [--server URL] [--dry-run] [--events]
          FILE          CSV with a header row (`,` or `;`), or JSON lines; columns per kind in docs/operations.md
          --server URL  the running Kakin (default http://127.0.0.1:8080); an admin key from KAKIN_API_KEY if it needs one
          --dry-run     check every row and say what would change; nothing is written
          --events      tell webhooks and the feed about imported changes (off: no event per imported customer)
        exit 0 every row applied or already present, 1 rows rejected (listed at …/rejects) or the import failed, 2 usage
        """

    /// How often the job is read while it runs.
    static let pollMs: UInt64 = 500
    /// Without a terminal, a progress line at most this often.
    static let plainLineEveryMs: Int64 = 5_000

    static func run(arguments: [String]) async -> Int32 {
        let args: ParsedArguments
        let kind: String
        let file: String
        do {
            args = try ParsedArguments(arguments, valued: ["server"], switches: ["dry-run", "events"])
            if args.wantsHelp {
                Console.out(usage)
                return 0
            }
            guard args.positionals.count == 2 else { throw ParsedArguments.UsageError(description: "give a kind and a file") }
            kind = args.positionals[0]
            file = args.positionals[1]
            guard ImportKind(rawValue: kind) != nil else {
                throw ParsedArguments.UsageError(description: "the kind must be appStore, googlePlay, balances or revenuecat")
            }
        } catch {
            Console.err("kakin import: \(error)\n" + usage)
            return 2
        }
        guard let body = FileManager.default.contents(atPath: file) else {
            Console.err("kakin import: cannot read \(file)")
            return 2
        }
        let server = (args.last("server") ?? "http://127.0.0.1:8080").trimmingSuffix("/")
        let client = Client(server: server, apiKey: ProcessInfo.processInfo.environment["KAKIN_API_KEY"])
        var query = "kind=\(kind)"
        if args.has("dry-run") { query += "&dryRun=true" }
        if args.has("events") { query += "&events=true" }
        do {
            let started = try await client.call("POST", "/v1/admin/imports?" + query, body: [UInt8](body))
            guard started.status == 202, let id = started.json?["importId"]?.stringValue else {
                Console.err("kakin import: \(Client.describe(started))")
                return started.status == 400 ? 2 : 1
            }
            let status = try await follow(id, client: client, terminal: isatty(STDOUT_FILENO) == 1)
            return try await summarize(status, id: id, client: client, dryRun: args.has("dry-run"))
        } catch {
            Console.err("kakin import: \(server) could not be reached: \(error)")
            return 1
        }
    }

    /// Reads the job until it ends, drawing its progress.
    static func follow(_ id: String, client: Client, terminal: Bool) async throws -> JSONValue {
        var lastPlainMs: Int64 = 0
        while true {
            let answer = try await client.call("GET", "/v1/admin/imports/\(id)")
            guard answer.status == 200, let status = answer.json else { throw ImportCommandError(description: Client.describe(answer)) }
            let ended = !["queued", "running"].contains(status["state"]?.stringValue ?? "")
            if terminal {
                FileDescriptorOutput.writeAll(STDOUT_FILENO, Array(("\r" + ImportProgress.bar(status) + "\u{1B}[K" + (ended ? "\n" : "")).utf8))
            } else {
                let now = SystemClock().nowMs()
                if ended || now - lastPlainMs >= plainLineEveryMs {
                    Console.out(ImportProgress.line(status))
                    lastPlainMs = now
                }
            }
            if ended { return status }
            try await Task.sleep(nanoseconds: pollMs * 1_000_000)
        }
    }

    static func summarize(_ status: JSONValue, id: String, client: Client, dryRun: Bool) async throws -> Int32 {
        let n = { (key: String) in status[key]?.int64Value ?? 0 }
        let state = status["state"]?.stringValue ?? "?"
        Console.out("import \(id) \(state): \(n("rows")) rows, \(n("applied")) \(dryRun ? "would be applied" : "applied"), "
                    + "\(n("alreadyPresent")) already present, \(n("rejected")) rejected")
        if let error = status["error"]?.stringValue { Console.err("kakin import: \(error)") }
        if n("rejected") > 0 {
            let page = try await client.call("GET", "/v1/admin/imports/\(id)/rejects?limit=\(rejectsShownMax)")
            for reject in page.json?["rejects"]?.arrayValue ?? [] {
                let error = reject["error"]
                Console.err("line \(reject["line"]?.int64Value ?? 0): \(error?["id"]?.stringValue ?? "") \(error?["code"]?.stringValue ?? ""): "
                            + (error?["message"]?.stringValue ?? ""))
            }
            Console.err("every reject: GET \(client.server)/v1/admin/imports/\(id)/rejects (the desk: \(client.server)/admin/imports/\(id))")
        }
        return state == "done" && n("rejected") == 0 ? 0 : 1
    }

    struct ImportCommandError: Error, CustomStringConvertible {
        var description: String
    }

    /// The few HTTP calls the command makes.
    struct Client: Sendable {
        let server: String
        let apiKey: String?
        static let session = URLSession(configuration: .ephemeral)

        struct Answer {
            var status: Int
            var body: Data
            var json: JSONValue? { try? JSONParser.parse([UInt8](body)) }
        }

        func call(_ method: String, _ path: String, body: [UInt8]? = nil) async throws -> Answer {
            guard let url = URL(string: server + path) else { throw ImportCommandError(description: "--server \(server) is not a URL") }
            var request = URLRequest(url: url, timeoutInterval: 120)
            request.httpMethod = method
            if let body {
                request.httpBody = Data(body)
                request.setValue("text/csv", forHTTPHeaderField: "Content-Type")
            }
            if let apiKey { request.setValue("Bearer " + apiKey, forHTTPHeaderField: "Authorization") }
            let (data, response) = try await Self.session.data(for: request)
            return Answer(status: (response as? HTTPURLResponse)?.statusCode ?? 0, body: data)
        }

        /// An error answer as one line: HTTP status, `KKN-…` and the message.
        static func describe(_ a: Answer) -> String {
            guard let e = a.json?["error"] else { return "HTTP \(a.status)" }
            return "HTTP \(a.status) \(e["id"]?.stringValue ?? "") \(e["code"]?.stringValue ?? ""): \(e["message"]?.stringValue ?? "")"
        }
    }
}

/// How an import's progress is drawn: a bar that redraws in place on a terminal, a plain line otherwise.
enum ImportProgress {
    static let barWidth = 30

    /// `[##########--------------------]  3,400/10,000 rows  34%  812 rows/s  ETA 9s  rejected 2`
    static func bar(_ s: JSONValue) -> String {
        let rows = max(0, s["rows"]?.int64Value ?? 0), done = min(rows, max(0, s["done"]?.int64Value ?? 0))
        let filled: Int = rows == 0 ? 0 : Int(done * Int64(barWidth) / rows)
        let percent: Int64 = rows == 0 ? 0 : done * 100 / rows
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled)
        let rejected = grouped(s["rejected"]?.int64Value ?? 0)
        return "[\(bar)]  \(grouped(done))/\(grouped(rows)) rows  \(percent)%  \(rate(s)) rows/s  ETA \(eta(s))  rejected \(rejected)"
    }

    /// `import imp_… running: 3400/10000 rows, 812 rows/s, ETA 9s, 2 rejected`
    static func line(_ s: JSONValue) -> String {
        let id = s["importId"]?.stringValue ?? "?", state = s["state"]?.stringValue ?? "?"
        let done = s["done"]?.int64Value ?? 0, rows = s["rows"]?.int64Value ?? 0, rejected = s["rejected"]?.int64Value ?? 0
        return "import \(id) \(state): \(done)/\(rows) rows, \(rate(s)) rows/s, ETA \(eta(s)), \(rejected) rejected"
    }

    static func rate(_ s: JSONValue) -> String {
        let r = s["ratePerSecond"]?.doubleValue ?? 0
        return r >= 100 ? String(Int(r)) : String((r * 10).rounded() / 10)
    }

    static func eta(_ s: JSONValue) -> String {
        guard let seconds = s["etaSeconds"]?.int64Value else { return "--" }
        return seconds >= 3600 ? "\(seconds / 3600)h\(seconds % 3600 / 60)m" : seconds >= 60 ? "\(seconds / 60)m\(seconds % 60)s" : "\(seconds)s"
    }

    static func grouped(_ n: Int64) -> String {
        let digits = String(n.magnitude)
        var out = ""
        for (i, c) in digits.enumerated() {
            if i > 0, (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return (n < 0 ? "-" : "") + out
    }
}

extension String {
    func trimmingSuffix(_ suffix: String) -> String { hasSuffix(suffix) ? String(dropLast(suffix.count)) : self }
}
