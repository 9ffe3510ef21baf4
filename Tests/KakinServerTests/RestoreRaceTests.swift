import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService
import KakinTestPostgres
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A restore is one decision: u2 restores a history holding a chain u1 claims at the same moment (its POST). Whichever
/// write commits first owns the chain; the other is refused with nothing applied — in particular the restore never
/// takes the history's other, unclaimed purchase (a coin pack) on the way. On SQLite in one process, and on PostgreSQL
/// with the restore sent to a second `kakin serve` process on the same database.
@Suite(.serialized) struct RestoreRace {
    static let rounds = 4
    static let catalogJSON: JSONValue = [
        ["productId": "noads", "type": "nonConsumable"],
        ["productId": "coins.100", "type": "consumable", "coins": 100],
    ]

    @Test func aRestoreRacingAClaimOnSQLiteEndsWithOneOwnerAndNothingForTheOther() async throws {
        try await SimulatedKakin.with(catalog: try Catalog(contractJSON: Self.catalogJSON)) { k in
            try await Self.race(k) { customer, body in await k.kakin("POST", "/v1/customers/\(customer)/restore", body).status }
        }
    }

    @Test(.postgreSQL)
    func aRestoreRacingAClaimOnPostgreSQLFromAnotherProcessEndsWithOneOwnerAndNothingForTheOther() async throws {
        try await TestPostgres.withSchema { schema in
            try await SimulatedKakin.with(catalog: try Catalog(contractJSON: Self.catalogJSON), database: .postgresql(url: schema.url)) { k in
                let other = try await SecondProcess.start(beside: k, databaseURL: schema.url)
                do {
                    try await Self.race(k) { customer, body in try await other.post("/v1/customers/\(customer)/restore", body) }
                } catch {
                    await other.stop()
                    throw error
                }
                await other.stop()
            }
        }
    }

    /// Each round: a fresh chain (`noads`) and a coin pack bought on one App Store account whose token no customer owns
    /// (nobody owns them), then u1's POST of the chain and u2's restore of it at once.
    static func race(_ k: SimulatedKakin, restore: @escaping @Sendable (_ customerId: String, JSONValue) async throws -> Int) async throws {
        var winners: [String: Int] = [:]
        for round in 0..<rounds {
            let u1 = "u1-\(round)", u2 = "u2-\(round)"
            // An App Store account of its own (a token no customer owns): nothing links the purchases to anyone yet.
            let account = JSONValue.string(UUID().uuidString.lowercased())
            let chain = try await k.sim("POST", "/simulator/v1/purchases", ["productId": "noads", "appAccountToken": account])
            let coins = try await k.sim("POST", "/simulator/v1/purchases", ["productId": "coins.100", "appAccountToken": account])
            let chainId = try #require(chain["transactionId"]?.stringValue)
            _ = try #require(coins["transactionId"]?.stringValue)
            async let claim = k.kakin("POST", "/v1/customers/\(u1)/transactions", ["transactionId": .string(chainId)]).status
            let restored = try await restore(u2, ["transactionId": .string(chainId)])
            let claimed = await claim
            let statuses = [claimed, restored].sorted()
            // One write wins; the other is refused (403 belongs_to_another_customer).
            #expect(statuses == [200, 403] || statuses == [201, 403], "claim \(claimed), restore \(restored)")
            let winner = claimed == 201 ? u1 : u2, loser = claimed == 201 ? u2 : u1
            winners[winner.hasPrefix("u1") ? "claim" : "restore", default: 0] += 1
            let won = try await k.status(winner), lost = try await k.status(loser)
            #expect(won["nonConsumables"]?.arrayValue?.count == 1)
            #expect(lost["nonConsumables"]?.arrayValue?.isEmpty ?? true)
            // The coin pack: the restore's winner took it with the history; the claim's loser took nothing.
            #expect((lost["wallet"]?["total"]?.int64Value ?? 0) == 0)
            if winner == u2 { #expect(won["wallet"]?["total"]?.int64Value == 100) }
        }
        #expect(winners.values.reduce(0, +) == rounds)
    }
}

/// A second `kakin serve` on the same PostgreSQL database, trusting the simulator's CA and reading the App Store Server
/// API from the first one's in-process simulator: another process, as behind a load balancer.
struct SecondProcess {
    let child: ChildProcess
    let port: Int
    let directory: URL

    static func start(beside k: SimulatedKakin, databaseURL: String) async throws -> SecondProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-second-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(k.simulator.rootCertificateDER).write(to: directory.appendingPathComponent("ca.der"))
        let key = k.simulator.apiKey
        try Data(key.privateKeyPEM.utf8).write(to: directory.appendingPathComponent("key.p8"))
        let config: JSONValue = [
            "listen": ["host": "127.0.0.1", "port": 0],
            "database": .string(databaseURL),
            "trustedRoots": ["ca.der"],
            "apps": [["bundleId": .string(Catalog.demoBundleId), "appAppleId": .int(Catalog.demoAppAppleId), "environments": ["Sandbox"],
                      "products": RestoreRace.catalogJSON]],
            "appStoreServerAPI": ["issuerId": .string(key.issuerId), "keyId": .string(key.keyId), "privateKeyFile": "key.p8",
                                  "baseURL": .string("http://127.0.0.1:\(k.runtime.port)/simulator")],
        ]
        let file = directory.appendingPathComponent("kakin.json")
        try Data(config.serialized(pretty: true)).write(to: file)
        let log = directory.appendingPathComponent("serve.log")
        let child = try ChildProcess.spawn(try KakinProcesses.binary.path, ["serve", "--config", file.path], output: log.path + ".out",
                                           errors: log.path)
        let port = try await KakinProcesses.waitUntilListening(child: child, log: log)
        return SecondProcess(child: child, port: port, directory: directory)
    }

    func post(_ path: String, _ body: JSONValue) async throws -> Int {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)" + path)!)
        request.httpMethod = "POST"
        request.httpBody = Data(body.serialized())
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let (_, response) = try await TestKakin.session.data(for: request)
        return (response as! HTTPURLResponse).statusCode
    }

    func stop() async {
        child.signal(SIGTERM)
        _ = await child.exit()
        try? FileManager.default.removeItem(at: directory)
    }
}
