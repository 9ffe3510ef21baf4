import Foundation
import KakinCore
import KakinService
@testable import KakinServer
import Testing

@Suite struct PostgresConfiguration {
    static let app = #"{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]}"#

    func parse(_ extra: String, environment: [String: String] = [:]) throws(ConfigurationError) -> Configuration {
        let json = try! JSONParser.parse(#"{"apps": [\#(Self.app)], \#(extra)}"#)
        return try Configuration.parse(json, baseDirectory: "/tmp", environment: environment)
    }

    @Test func postgresqlDatabaseTakesItsPasswordFromTheNamedVariableAndItsPoolFromPostgres() throws {
        let c = try parse(#""database": "postgresql://kakin@db:5432/kakin?sslmode=require", "databasePasswordEnv": "KAKIN_DB_PASSWORD", "postgres": {"writerConnections": 3, "readerConnections": 8, "statementTimeoutMs": 2000}"#,
                          environment: ["KAKIN_DB_PASSWORD": "s3cret"])
        #expect(c.database == .postgresql(url: "postgresql://kakin@db:5432/kakin?sslmode=require"))
        #expect(c.databasePassword == "s3cret")
        #expect(c.postgres.writerConnections == 3 && c.postgres.readerConnections == 8 && c.postgres.statementTimeoutMs == 2000)
    }

    @Test func badPostgresSettingsNameTheirKey() {
        #expect { try parse(#""database": "postgresql://kakin@db/kakin", "databasePasswordEnv": "MISSING""#) } throws: {
            "\($0)".contains("databasePasswordEnv")
        }
        #expect { try parse(#""database": "sqlite:k.db", "databasePasswordEnv": "KAKIN_DB_PASSWORD""#, environment: ["KAKIN_DB_PASSWORD": "x"]) } throws: {
            "\($0)".contains("databasePasswordEnv")
        }
        #expect { try parse(#""database": "postgresql://kakin@db/kakin", "postgres": {"writerConnections": 0}"#) } throws: {
            "\($0)".contains("postgres.writerConnections")
        }
        #expect { try parse(#""database": "postgresql://kakin@db/kakin", "postgres": {"poolSize": 4}"#) } throws: {
            "\($0)".contains("poolSize")
        }
    }

    @Test func theDatabaseIsLoggedWithoutItsPassword() throws {
        let c = try parse(#""database": "postgresql://kakin:hunter2@db:5432/kakin""#)
        #expect("\(c.database)" == "postgresql://kakin:***@db:5432/kakin")
        #expect(!"\(c.database)".contains("hunter2"))
    }
}
