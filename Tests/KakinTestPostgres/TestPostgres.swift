import Foundation
import KakinPostgreSQL
import KakinStorage
import Testing

/// The throwaway PostgreSQL cluster `scripts/test` starts (`scripts/postgres`), for the PostgreSQL cases
/// of the tests: each test gets a schema of its own, dropped afterwards, so tests run in parallel on
/// one database. Without `KAKIN_TEST_POSTGRES_URL` those cases are skipped — unless `KAKIN_TEST_POSTGRES=required`
/// (set by `scripts/test`, like the browser's `KAKIN_BROWSER_TEST=required`): then each of them runs and fails.
public enum TestPostgres {
    static let environment = ProcessInfo.processInfo.environment
    public static let url: String? = environment["KAKIN_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    /// `KAKIN_TEST_POSTGRES=required`: a missing cluster is an error in every PostgreSQL case, never a skip.
    public static let isRequired = environment["KAKIN_TEST_POSTGRES"] == "required"
    /// Whether the PostgreSQL cases run: with a cluster, or without one when it is required (they fail then).
    public static var casesRun: Bool { url != nil || isRequired }
    /// The cluster `scripts/postgres` started (it made `kakin_test_cases`, where each case using it is counted for the
    /// test command's summary); nil for a database given from elsewhere.
    static let clusterDirectory: String? = environment["KAKIN_TEST_POSTGRES_DIR"].flatMap { $0.isEmpty ? nil : $0 }

    /// A fresh schema: its URL (every connection's `search_path` is that schema, and its connections are
    /// named after it, so a test can find and end them) and its name.
    public struct Schema: Sendable {
        public let name: String
        public let url: String
    }

    /// Runs `body` with a new, empty schema; drops it afterwards.
    public static func withSchema<R>(_ body: (Schema) async throws -> R) async throws -> R {
        guard let url else { throw TestPostgresUnavailable() }
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let test = Test.current?.id.description ?? "?"
        try await admin(url) { db in
            try db.execute("CREATE SCHEMA \(name)", [])
            if clusterDirectory != nil { try db.execute("INSERT INTO public.kakin_test_cases (test, schema_name) VALUES (?, ?)", [.text(test), .text(name)]) }
        }
        let schema = Schema(name: name, url: url + (url.contains("?") ? "&" : "?") + "options=-csearch_path%3D\(name)&application_name=\(name)")
        do {
            let result = try await body(schema)
            try await admin(url) { try $0.execute("DROP SCHEMA \(name) CASCADE", []) }
            return result
        } catch {
            try? await admin(url) { try $0.execute("DROP SCHEMA \(name) CASCADE", []) }
            throw error
        }
    }

    /// Ends every server session of `schema` (as a server restart or failover would).
    public static func terminateSessions(of schema: Schema) async throws {
        guard let url else { throw TestPostgresUnavailable() }
        try await admin(url) { db in
            _ = try db.query("SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE application_name = ?", [.text(schema.name)])
        }
    }

    /// One statement on the cluster's database, outside any test schema.
    static func admin(_ url: String, _ body: @escaping @Sendable (any SQLConnection) throws -> Void) async throws {
        let database = try PostgresDatabase(url: url, options: .init(writerConnections: 1, readerConnections: 1))
        do {
            try await database.write(body)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }
}

public struct TestPostgresUnavailable: Error, CustomStringConvertible {
    public var description: String {
        "PostgreSQL case without a cluster: KAKIN_TEST_POSTGRES=required but KAKIN_TEST_POSTGRES_URL is not set (scripts/test starts one with scripts/postgres)"
    }
}

extension Trait where Self == ConditionTrait {
    /// A test or suite that needs the PostgreSQL cluster: skipped without one, failing without one when it is required.
    public static var postgreSQL: Self {
        .enabled(if: TestPostgres.casesRun, "PostgreSQL: KAKIN_TEST_POSTGRES_URL is not set (KAKIN_TEST_POSTGRES=required makes this a failure)")
    }
}
