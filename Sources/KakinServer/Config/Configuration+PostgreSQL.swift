import KakinCore
import KakinService
import KakinPostgreSQL

/// The config keys for PostgreSQL (additions to the contract's keys):
/// - `databasePasswordEnv`: the environment variable holding the database password, so it never sits in
///   the file or the URL (and never in a log: URLs are logged with the password replaced by `***`);
/// - `postgres`: the connection pool and timeouts, each key optional (defaults in `PostgresDatabase.Options`).
extension Configuration {
    static let postgresKeys: Set<String> = [
        "writerConnections", "readerConnections", "batchSizeMax", "connectTimeoutSeconds", "statementTimeoutMs", "lockTimeoutMs",
        "serializationRetriesMax",
    ]

    static func parsePostgreSQL(_ o: StrictObject, into c: inout Configuration, environment: [String: String]) throws(ConfigurationError) {
        if let name = try o.string("databasePasswordEnv") {
            guard case .postgresql = c.database else {
                throw ConfigurationError("databasePasswordEnv", "only applies to a postgresql:// database")
            }
            guard let value = environment[name], !value.isEmpty else {
                throw ConfigurationError("databasePasswordEnv", "environment variable \(name) is not set")
            }
            c.databasePassword = value
        }
        guard let p = try o.object("postgres") else { return }
        try p.check(allowedKeys: postgresKeys)
        var options = c.postgres
        func set(_ key: String, _ range: ClosedRange<Int64>, _ apply: (Int) -> Void) throws(ConfigurationError) {
            if let n = try p.int(key, range: range) { apply(Int(n)) }
        }
        try set("writerConnections", 1...64) { options.writerConnections = $0 }
        try set("readerConnections", 1...64) { options.readerConnections = $0 }
        try set("batchSizeMax", 1...10_000) { options.batchSizeMax = $0 }
        try set("connectTimeoutSeconds", 1...600) { options.connectTimeoutSeconds = $0 }
        try set("statementTimeoutMs", 1...3_600_000) { options.statementTimeoutMs = $0 }
        try set("lockTimeoutMs", 1...3_600_000) { options.lockTimeoutMs = $0 }
        try set("serializationRetriesMax", 0...1_000) { options.serializationRetriesMax = $0 }
        c.postgres = options
    }
}

extension Configuration.Database: CustomStringConvertible {
    /// For logs: a PostgreSQL URL's password is replaced by `***`.
    public var description: String {
        switch self {
        case .sqlite(let path): "sqlite:\(path)"
        case .postgresql(let url): PostgresDatabase.redacted(url)
        }
    }
}
