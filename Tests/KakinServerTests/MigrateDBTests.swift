import Foundation
import KakinCore
import KakinService
import KakinPostgreSQL
import KakinServer
import KakinStorage
import KakinSystem
import KakinTestPostgres
import Testing

@Suite(.postgreSQL) struct MigrateDBTests {
    /// A SQLite deployment with purchases, spends, grants and a notification moves to PostgreSQL whole: the
    /// same balances and ledgers, both ledger checks pass, and the ledger continues in order afterwards.
    @Test func migrateDBCopiesASQLiteDeploymentIntoPostgreSQL() async throws {
        let k = try await TestKakin.start()
        let sqlitePath = k.directory.appendingPathComponent("kakin.db").path
        let token = try await k.token("u1")
        for _ in 0..<3 {
            let tx = try k.appStore.transaction(appAccountToken: token, purchaseMs: k.clock.nowMs())
            #expect(try await k.postTransaction("u1", jws: tx.jws).status == 201)
        }
        #expect(try await k.spend("u1", key: "s1", amount: 120).status == 201)
        _ = try await k.request("POST", "/v1/customers/u2/wallet/grants", json: ["amount": 30, "reason": "welcome"], headers: ["Idempotency-Key": "g1"])
        let tx = try k.appStore.transaction(appAccountToken: token, purchaseMs: k.clock.nowMs())
        try await k.deliver([try k.appStore.notification("ONE_TIME_CHARGE", transaction: tx.jws, signedMs: k.clock.nowMs())])
        let before = try await k.request("GET", "/v1/customers/u1/wallet/ledger").json
        await k.runtime.shutdown(gracePeriodSeconds: 5)
        defer { try? FileManager.default.removeItem(at: k.directory) }

        try await TestPostgres.withSchema { schema in
            let (status, report) = try await KakinProcesses.run(["migrate-db", "--from", "sqlite:\(sqlitePath)", "--to", schema.url], in: k.directory)
            #expect(status == 0)
            #expect(report["ok"] == true)
            #expect(report["ledgerCheck"]?["to"]?["entries"] == report["ledgerCheck"]?["from"]?["entries"])
            #expect(report["tables"]?["ledger_entries"]?.intValue == 6)
            #expect(report["tables"]?["notifications"]?.intValue == 1)

            let database = try PostgresDatabase(url: schema.url)
            let store = KakinStore(database: database, ids: RandomIDGenerator(), clock: SystemClock())
            do {
                try await store.migrate()
                let after = try await store.ledger(customerId: "u1", limit: 50, cursor: nil)
                #expect(after.entries.map(\.json) == before["entries"]?.arrayValue)
                // New entries continue after the copied ones (the identity moved past them).
                _ = try await store.transaction { r in
                    try r.moveCoinsCreatingCustomer(LedgerMovement(entryId: "le_after", customerId: "u1", atMs: r.nowMs, kind: .grant, paid: 0, free: 5,
                                                                   reference: "after", effectKey: nil))
                }
                let newest = try await store.ledger(customerId: "u1", limit: 1, cursor: nil).entries.first
                #expect(newest?.reference == "after" && newest?.balanceAfter.total == 400 - 120 + 5)
                #expect(try await store.checkLedger().ok)
                // A second copy into the same (no longer empty) database is refused.
                let again = try await KakinProcesses.run(["migrate-db", "--from", "sqlite:\(sqlitePath)", "--to", schema.url], in: k.directory)
                #expect(again.status == 1)
            } catch {
                await database.close()
                throw error
            }
            await database.close()
        }
    }
}
