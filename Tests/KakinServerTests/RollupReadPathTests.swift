import KakinCore
import KakinMetrics
@testable import KakinService
import KakinStorage
import KakinTestPostgres
@testable import KakinServer
import Testing

/// The rollup reads each stored transaction from its decoded fields (`status_json`, consumables included since issue
/// 26) instead of decoding its JWS again: for varied App Store histories (consumables bought by the pack, refunded in
/// full and in part, a non-consumable, a family-shared copy, a pass, subscriptions through a free trial, an upgrade,
/// billing grace, a refund, auto-renew turned off) every customer's share, the experiments' revenue facts and every
/// decoded field are the same read either way, and a rebuild from the signed copies alone finds nothing to correct.
@Suite struct RollupReadPath {
    @Test func theNumbersFromTheStoredFieldsAreTheNumbersDecodedFromTheSignedCopies() async throws {
        try await Self.run(database: nil)
    }

    @Test(.postgreSQL) func theSameOnPostgreSQL() async throws {
        try await TestPostgres.withSchema { schema in try await Self.run(database: .postgresql(url: schema.url)) }
    }

    /// What the rollup and the experiments make of each customer's stored facts as they are read now.
    struct Read: Equatable {
        var shares: [String: Contribution]
        var revenue: [String: [RevenueFact]]
        /// Each stored transaction and renewal info, as its decoded fields (`StoredStatusFields`' compact JSON).
        var fields: [String: [String]]
    }

    static func read(_ k: SimulatedKakin, _ customers: [String]) async throws -> Read {
        let numbers = k.app.services.businessMetrics, settings = numbers.settings
        return try await k.app.services.store.snapshot { r -> Read in
            var read = Read(shares: [:], revenue: [:], fields: [:])
            for (customer, share) in try BusinessMetrics.shares(of: customers, r, settings: settings) { read.shares[customer] = share }
            for stored in try r.metricFacts(customerIds: customers, ledgerSpanMs: CivilDay.quarterHourMs) {
                read.revenue[stored.customerId] = RevenueFact.appStore(BusinessMetrics.facts(stored), settings: settings)
                read.fields[stored.customerId] = (stored.transactions.map(StoredStatusFields.json(of:))
                                                  + stored.renewalInfos.map(StoredStatusFields.json(of:))).sorted()
            }
            return read
        }
    }

    static func run(database: Configuration.Database?) async throws {
        try await SimulatedKakin.with(gracePeriodDays: 16, database: database) { k in
            let numbers = k.app.services.businessMetrics
            func ot(_ r: JSONValue) -> String { r["originalTransactionId"]!.stringValue! }
            func refund(_ transactionId: String, _ body: JSONValue? = nil) async throws {
                try await k.sim("POST", "/simulator/v1/transactions/\(transactionId)/refund", body)
            }

            // Consumables: one, a pack of three, one refunded in full, one in part; a non-consumable; a pass.
            try await k.buy("A", "coins.500")
            try await k.sim("POST", "/simulator/v1/purchases", ["productId": "coins.100", "quantity": 3,
                                                                "appAccountToken": .string(try await k.token("A"))])
            try await refund(try await k.buy("A", "coins.1200")["transactionId"]!.stringValue!)
            try await refund(try await k.buy("A", "coins.500")["transactionId"]!.stringValue!, ["revocationPercentage": 40_000])
            try await k.buy("A", "noads")
            try await k.buy("B", "season.pass")
            try await k.buy("B", "noads", familyShared: true)
            // Subscriptions: a free week that converts and is upgraded; one whose renewal fails into grace and recovers;
            // one refunded; one turned off.
            let c = ot(try await k.buy("C", "premium.monthly"))
            let d = ot(try await k.buy("D", "premium.plus.monthly"))
            let e = ot(try await k.buy("E", "premium.plus.monthly"))
            let f = ot(try await k.buy("F", "premium.monthly"))
            try await k.action(d, "failBilling")
            try await k.action(f, "disableAutoRenew")
            try await k.advance(days: 8)
            try await k.action(c, "changeProduct", ["productId": "premium.plus.monthly"])
            try await k.action(e, "refund")
            try await k.advance(days: 26)
            try await k.action(d, "recoverBilling")
            try await k.advance(days: 31)
            try await k.buy("A", "coins.100")
            try await numbers.catchUp()

            let customers = ["A", "B", "C", "D", "E", "F"]
            let unread = try await k.app.store.database.write { db in
                try db.queryOne("SELECT COUNT(*) AS n FROM transactions WHERE status_json IS NULL", [])?.int("n")
            }
            #expect(unread == 0, "every transaction, consumables too, keeps its decoded fields")
            let fromFields = try await Self.read(k, customers)
            #expect(fromFields.fields.values.map(\.count).reduce(0, +) >= 20)
            #expect(fromFields.shares.values.allSatisfy { !$0.isEmpty })

            // The rows as stored before the fields were kept: the rollup decodes each JWS again.
            try await k.app.store.database.write { db in
                _ = try db.execute("UPDATE transactions SET status_json = NULL", [])
                _ = try db.execute("UPDATE renewal_infos SET status_json = NULL", [])
            }
            let fromSignedCopies = try await Self.read(k, customers)
            for customer in customers {
                #expect(fromFields.fields[customer] == fromSignedCopies.fields[customer], "\(customer)'s decoded fields")
                #expect(fromFields.shares[customer] == fromSignedCopies.shares[customer], "\(customer)'s share")
                #expect(fromFields.revenue[customer] == fromSignedCopies.revenue[customer], "\(customer)'s revenue facts")
            }
            let rebuilt = try await numbers.rebuild()
            #expect(rebuilt.customers >= customers.count && rebuilt.differing == 0, "\(rebuilt.sample)")
        }
    }
}
