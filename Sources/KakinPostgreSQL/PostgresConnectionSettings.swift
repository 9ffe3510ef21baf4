/// Where and how to connect: the `postgresql://` URL (libpq parses it, so every libpq URL parameter
/// works: `sslmode`, several hosts with `target_session_attrs=read-write` for failover, `options`, …),
/// a password kept apart from it, and the timeouts every session gets.
struct PostgresConnectionSettings: Sendable {
    let url: String
    /// From the environment variable the config names; nil = the URL's, or libpq's own sources
    /// (`PGPASSWORD`, `~/.pgpass`).
    let password: String?
    let connectTimeoutSeconds: Int
    let statementTimeoutMs: Int
    let lockTimeoutMs: Int
    let idleInTransactionTimeoutMs: Int

    /// libpq's keywords in order: defaults first (the URL may override them), then the URL, then what
    /// must win over it.
    var keywordValues: [(String, String)] {
        var pairs: [(String, String)] = [
            ("connect_timeout", String(connectTimeoutSeconds)),
            ("application_name", "kakin"),
            // A server that vanished (power loss, network partition) is noticed in about a minute
            // instead of hours of TCP retransmissions.
            ("keepalives", "1"), ("keepalives_idle", "30"), ("keepalives_interval", "10"), ("keepalives_count", "3"),
            ("dbname", url),
            ("client_encoding", "UTF8"),
        ]
        if let password { pairs.append(("password", password)) }
        return pairs
    }

    /// Run once per new session.
    var sessionSetup: String {
        "SET statement_timeout = \(statementTimeoutMs); SET lock_timeout = \(lockTimeoutMs); "
            + "SET idle_in_transaction_session_timeout = \(idleInTransactionTimeoutMs); SET client_min_messages = warning"
    }

    /// The URL with any password replaced by `***`, for logs and errors.
    var redactedURL: String { Self.redact(url) }

    /// The URL with its password (`user:PASSWORD@` or `?password=`) replaced by `***`.
    static func redact(_ url: String) -> String {
        var out = url
        if let scheme = out.range(of: "://") {
            let rest = out[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@"), let colon = rest[..<at].firstIndex(of: ":") {
                out = String(out[...colon]) + "***" + String(out[at...])
            }
        }
        guard let query = out.firstIndex(of: "?") else { return out }
        let parameters = out[out.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false).map { pair in
            pair.lowercased().hasPrefix("password=") ? "password=***" : String(pair)
        }
        return String(out[...query]) + parameters.joined(separator: "&")
    }
}
