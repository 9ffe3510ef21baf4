import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinStorage
import Testing
@testable import KakinServer
@testable import KakinService

/// Moving in (`POST /v1/admin/imports`, the job behind `kakin import`): an existing app's App Store customers, its old coin
/// balances and a RevenueCat export, each row applied once through the same use cases as everything else.
@Suite struct ImportTests {
    static func upload(_ base: String, _ query: String, _ file: String) async throws -> TestKakin.Response {
        var req = URLRequest(url: URL(string: base + "/v1/admin/imports?" + query)!)
        req.httpMethod = "POST"
        req.httpBody = Data(file.utf8)
        req.setValue("text/csv", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await TestKakin.session.data(for: req)
        return TestKakin.Response(status: (response as! HTTPURLResponse).statusCode, headers: [:], body: [UInt8](data))
    }

    static func get(_ base: String, _ path: String) async throws -> JSONValue {
        let (data, _) = try await TestKakin.session.data(from: URL(string: base + path)!)
        return try JSONParser.parse([UInt8](data))
    }

    /// Uploads and waits (polling) until the job ended; answers its final status.
    static func importAndWait(_ base: String, _ query: String, _ file: String) async throws -> JSONValue {
        let started = try await upload(base, query, file)
        #expect(started.status == 202, "\(String(decoding: started.body, as: UTF8.self))")
        let id = try #require(started.json["importId"]?.stringValue)
        for _ in 0..<6_000 {
            let status = try await get(base, "/v1/admin/imports/\(id)")
            if !["queued", "running"].contains(status["state"]?.stringValue ?? "") { return status }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw ProcessFailure(description: "import \(id) did not end")
    }

    static func counts(_ s: JSONValue) -> [Int64] {
        ["rows", "done", "applied", "alreadyPresent", "rejected"].map { s[$0]?.int64Value ?? -1 }
    }

    // MARK: App Store

    /// What a customer's Kakin shows, without what differs between two servers by design (the customer's random token,
    /// the event count) — the status, the wallet and the ledger.
    static func view(_ base: String, _ customer: String) async throws -> JSONValue {
        var status = try await get(base, "/v1/customers/\(customer)")
        if case .object(var o) = status {
            o["appAccountToken"] = nil
            o["version"] = nil
            status = .object(o)
        }
        var entries: [JSONValue] = []
        for entry in try await get(base, "/v1/customers/\(customer)/wallet/ledger?limit=200")["entries"]?.arrayValue ?? [] {
            guard case .object(var o) = entry else { continue }
            o["id"] = nil
            entries.append(.object(o))
        }
        return ["status": status, "ledger": .array(entries)]
    }

    /// The same purchases made in two simulated App Stores (same seed, same calls): one Kakin is told as they happen, the
    /// other is not (`"notify": false`) and imports its customers; afterwards every customer's status, wallet and ledger,
    /// and the business overview, are the same on both.
    @Test func anImportedAppStoreCustomerBaseEqualsOneKakinWasToldAbout() async throws {
        try await SimulatedKakin.with { told in
            try await SimulatedKakin.with { untold in
                let customers = (0..<60).map { "c\($0)" }
                var rows = ["customerId,transactionId"]
                for (i, c) in customers.enumerated() {
                    for k in [told, untold] {
                        var bought: [String] = []
                        var products = ["coins.500", i % 3 == 0 ? "premium.yearly" : "premium.monthly"]
                        if i % 2 == 0 { products.append("coins.100") }
                        if i % 5 == 0 { products.append("noads") }
                        if i % 7 == 0 { products.append("season.pass") }
                        for p in products {
                            var body: [String: JSONValue] = ["productId": .string(p), "appAccountToken": .string(try await k.token(c))]
                            if k === untold { body["notify"] = false }
                            let answer = try await k.sim("POST", "/simulator/v1/purchases", .object(body))
                            if k === untold { #expect(answer["notifications"]?.arrayValue?.isEmpty == true) }
                            bought.append(answer["transactionId"]?.stringValue ?? "")
                        }
                        if k === untold { rows.append("\(c),\(bought[i % bought.count])") }
                    }
                }
                let toldBase = "http://127.0.0.1:\(told.runtime.port)", untoldBase = "http://127.0.0.1:\(untold.runtime.port)"
                #expect(try await Self.get(untoldBase, "/v1/customers/c1")["status"] == "new")
                let status = try await Self.importAndWait(untoldBase, "kind=appStore", rows.joined(separator: "\n"))
                #expect(status["state"] == "done")
                #expect(Self.counts(status) == [60, 60, 60, 0, 0])
                for c in customers {
                    let a = try await Self.view(toldBase, c), b = try await Self.view(untoldBase, c)
                    #expect(a == b, "\(c)")
                }
                // Numbers: the told one's rollups follow its events; the import recomputed its customers' shares.
                try await told.app.services.businessMetrics.catchUp()
                try await untold.app.services.businessMetrics.catchUp()
                let overview = "/v1/admin/metrics/overview?from=2025-12-01&to=2026-01-31"
                let toldNumbers = try await Self.get(toldBase, overview), importedNumbers = try await Self.get(untoldBase, overview)
                #expect(toldNumbers == importedNumbers)
                #expect(toldNumbers["coins"]?["sold"]?.int64Value == Int64(33_000), "60 × 500 + 30 × 100 coins sold")
                // No events were told for the imported changes (none asked for): the feed holds only the customers' creation.
                let feed = try await Self.get(untoldBase, "/v1/events?limit=500")["events"]?.arrayValue ?? []
                #expect(feed.allSatisfy { $0["type"] == "customer.created" })
                // The same file again changes nothing.
                let again = try await Self.importAndWait(untoldBase, "kind=appStore", rows.joined(separator: "\n"))
                #expect(Self.counts(again) == [60, 60, 0, 60, 0])
                #expect(try await Self.view(untoldBase, "c0") == Self.view(toldBase, "c0"))
                #expect(try await untold.app.services.wallets.checkLedger().ok)
            }
        }
    }

    /// RevenueCat's export (its documented columns, `;`-separated): App Store rows resolved through the App Store, a
    /// renewal of a chain already imported needs no second call, and rows Kakin cannot take are rejects with their line.
    @Test func aRevenueCatExportImportsAndItsBadRowsAreRejectsWithTheirLines() async throws {
        try await SimulatedKakin.with { k in
            let base = "http://127.0.0.1:\(k.runtime.port)"
            let monthly = try await k.sim("POST", "/simulator/v1/purchases",
                                          ["productId": "premium.monthly", "appAccountToken": .string(try await k.token("rc1")), "notify": false])
            let coins = try await k.sim("POST", "/simulator/v1/purchases",
                                        ["productId": "coins.500", "appAccountToken": .string(try await k.token("rc2")), "notify": false])
            let header = ["rc_original_app_user_id", "rc_last_seen_app_user_id_alias", "country", "product_identifier", "start_time", "end_time",
                          "store", "is_auto_renewable", "is_trial_period", "is_sandbox", "price_in_usd", "store_transaction_id",
                          "original_store_transaction_id", "renewal_number", "purchased_currency", "price_in_purchased_currency"]
            func row(_ original: String, _ alias: String, _ product: String, _ store: String, _ tx: String) -> String {
                [original, alias, "JP", product, "2026-01-01 00:00:00", "", store, "false", "false", "true", "4.0", tx, tx, "1", "JPY", "600"]
                    .joined(separator: ";")
            }
            let monthlyId = monthly["transactionId"]?.stringValue ?? "", coinsId = coins["transactionId"]?.stringValue ?? ""
            let file = ([header.joined(separator: ";"),
                         row("$RCAnonymousID:0a1b", "rc1", "premium.monthly", "app_store", monthlyId),
                         row("rc2", "", "coins.500", "app_store", coinsId),
                         row("rc2", "", "coins.500", "app_store", coinsId),
                         row("rc3", "", "premium", "play_store", "GPA.3312-1111-2222-33333"),
                         row("rc4", "", "web.monthly", "stripe", "sub_1NqR"),
                         row("$RCAnonymousID:77", "", "coins.100", "app_store", "2000000000009999"),
                         row("rc5", "", "coins.100", "app_store", "2999999999999999")]).joined(separator: "\n") + "\n"
            let status = try await Self.importAndWait(base, "kind=revenuecat", file)
            #expect(status["state"] == "done")
            #expect(Self.counts(status) == [7, 7, 2, 1, 4])
            let rejects = try await Self.get(base, "/v1/admin/imports/\(status["importId"]?.stringValue ?? "")/rejects")["rejects"]?.arrayValue ?? []
            #expect(rejects.map { $0["line"]?.int64Value ?? 0 } == [5, 6, 7, 8])
            #expect(rejects.map { $0["error"]?["id"]?.stringValue ?? "" } == ["KKN-9206", "KKN-9207", "KKN-1007", "KKN-3006"])
            #expect(rejects.first?["row"]?["store"] == "play_store")
            #expect(try await Self.get(base, "/v1/customers/rc1")["status"] == "active")
            #expect(try await Self.get(base, "/v1/customers/rc2/wallet")["total"] == 550)
        }
    }

    // MARK: Balances

    static func balancesFile(_ count: Int, seed: Int = 1) -> (text: String, paid: Int64, free: Int64) {
        var lines = ["customerId,paid,free,reference,asOf"]
        var paid: Int64 = 0, free: Int64 = 0
        for i in 0..<count {
            let p = Int64((i * 7919 + seed) % 5_000), f = Int64(i % 50)
            paid += p
            free += f
            lines.append("old-\(i % (count / 2 + 1)),\(p),\(f),wallet-\(seed)-\(i),2026-09-30")
        }
        return (lines.joined(separator: "\n") + "\n", paid, free)
    }

    /// 10,000 balances: one `import` ledger entry each, the unused-balance report's totals equal the file's, the business
    /// numbers count them; the same file again changes nothing; a reference reused with other amounts is a reject.
    @Test func balancesMoveInOnceAndTheUnusedBalanceReportContinues() async throws {
        try await TestKakin.with { k in
            let (file, paid, free) = Self.balancesFile(10_000)
            let status = try await Self.importAndWait(k.baseURL, "kind=balances", file)
            #expect(Self.counts(status) == [10_000, 10_000, 10_000, 0, 0])
            let report = try await Self.get(k.baseURL, "/v1/admin/reports/unused-balance?asOf=2026-09-30")
            let totals = report["totals"]?.arrayValue ?? []
            #expect(totals.reduce(0) { $0 + ($1["unusedPaidCoins"]?.int64Value ?? 0) } == paid)
            #expect(totals.allSatisfy { $0["source"] == "import" })
            #expect(try await Self.get(k.baseURL, "/v1/admin/reports/unused-balance?asOf=2026-09-29")["totals"]?.arrayValue?.isEmpty == true)
            let ledger = try await Self.get(k.baseURL, "/v1/customers/old-1/wallet/ledger")["entries"]?.arrayValue ?? []
            #expect(ledger.allSatisfy { $0["kind"] == "import" && $0["source"] == "import" && $0["at"] == "2026-09-30T14:59:59.999Z" })
            let numbers = try await Self.get(k.baseURL, "/v1/admin/metrics/overview?from=2026-09-01&to=2026-10-31")
            #expect(numbers["coins"]?["outstandingPaid"]?.int64Value == paid)
            #expect(try await k.runtime.app.services.store.checkLedger().entries == 10_000)
            var total = WalletBalance()
            for c in ["old-0", "old-1", "old-4999"] {
                let w = try await k.wallet(c)
                total.paid += w.paid
                total.free += w.free
            }
            #expect(total.paid > 0 && free > 0)

            let again = try await Self.importAndWait(k.baseURL, "kind=balances", file)
            #expect(Self.counts(again) == [10_000, 10_000, 0, 10_000, 0])
            let conflict = try await Self.importAndWait(k.baseURL, "kind=balances",
                                                        "customerId,paid,free,reference,asOf\nold-1,1,1,wallet-1-1,2026-09-30\n")
            #expect(Self.counts(conflict) == [1, 1, 0, 0, 1])
            #expect(try await k.ledgerCheckOK())
            #expect(try await k.runtime.app.services.store.checkLedger().entries == 10_000)
            #expect(try await Self.get(k.baseURL, "/v1/events?limit=10")["events"]?.arrayValue?.isEmpty == true)
        }
    }

    /// `--events`: the imported balances are told (`coins.credited` with `"source": "import"`); a dry run writes nothing.
    @Test func eventsOnlyWhenAskedAndADryRunWritesNothing() async throws {
        try await TestKakin.with { k in
            let file = "customerId,paid,free,reference,asOf\nu1,100,0,r1,2026-09-30T00:00:00Z\nu2,5,5,r2,2026-09-30\n"
            let dry = try await Self.importAndWait(k.baseURL, "kind=balances&dryRun=true", file)
            #expect(Self.counts(dry) == [2, 2, 2, 0, 0] && dry["dryRun"] == true)
            #expect(try await k.runtime.app.services.store.checkLedger().entries == 0)
            let told = try await Self.importAndWait(k.baseURL, "kind=balances&events=true", file)
            #expect(Self.counts(told) == [2, 2, 2, 0, 0])
            let events = try await Self.get(k.baseURL, "/v1/events?limit=10")["events"]?.arrayValue ?? []
            #expect(events.map { $0["type"]?.stringValue ?? "" } == ["customer.created", "coins.credited", "customer.created", "coins.credited"])
            #expect(events[1]["data"]?["source"] == "import" && events[1]["data"]?["customer"]?["wallet"]?["paid"] == 100)
            let dryAgain = try await Self.importAndWait(k.baseURL, "kind=balances&dryRun=true", file)
            #expect(Self.counts(dryAgain) == [2, 2, 0, 2, 0])
        }
    }

    /// A file that is empty or malformed is refused before any job starts, with the line; unknown kinds and jobs past
    /// the limit are refused too; an unknown import is 404; cancelling an ended one is 409.
    @Test func badFilesAreRefusedWithTheirLine() async throws {
        try await TestKakin.with { k in
            let malformed = try await Self.upload(k.baseURL, "kind=balances", "customerId,paid,free,reference,asOf\nu1,1,2,r1,2026-01-01\nu2,1\n")
            #expect(malformed.status == 400 && malformed.errorId == "KKN-9200")
            #expect(malformed.json["error"]?["message"]?.stringValue?.hasPrefix("Line 3:") == true)
            #expect(try await Self.upload(k.baseURL, "kind=balances", "").status == 400)
            #expect(try await Self.upload(k.baseURL, "kind=stripe", "a\n1\n").errorId == "KKN-1002")
            #expect(try await Self.upload(k.baseURL, "kind=balances&events=yes", "a\n1\n").errorId == "KKN-1002")
            #expect(try await Self.get(k.baseURL, "/v1/admin/imports/imp_nope")["error"]?["id"] == "KKN-9201")
            let ended = try await Self.importAndWait(k.baseURL, "kind=appStore", "customerId,transactionId\nu1,12\n")
            #expect(Self.counts(ended) == [1, 1, 0, 0, 1])  // no App Store Server API configured: a reject, not a stall
            let cancel = try await k.request("POST", "/v1/admin/imports/\(ended["importId"]?.stringValue ?? "")/cancel")
            #expect(cancel.status == 409 && cancel.errorId == "KKN-9208")
        }
    }

    /// A worker that died mid-import (its lease ran out) leaves its job to the next: it resumes at the first row not
    /// committed, and every row is applied exactly once.
    @Test func aJobWhoseWorkerDiedResumesAtTheFirstRowNotCommitted() async throws {
        try await TestKakin.with { k in
            let services = k.runtime.app.services
            await services.imports.worker.stop()
            let (file, paid, _) = Self.balancesFile(1_000, seed: 3)
            let started = try await Self.upload(k.baseURL, "kind=balances", file)
            let id = try #require(started.json["importId"]?.stringValue)
            // A worker of another process takes the job, commits its first batch, and dies (its lease is already over).
            let jobs = ImportJobStore(store: services.store)
            let now = services.retryClock.nowMs()
            let claimed = try #require(try await jobs.claim(owner: "dead-process", nowMs: now, leaseUntilMs: now))
            let first = try await jobs.pendingRows(id, limit: Imports.balancesPerWrite)
            try await services.imports.applyBalances(first, job: claimed)
            #expect(try await jobs.job(id)?.done == Int64(Imports.balancesPerWrite))
            // The dead worker's batch, applied again by a worker that missed its commit, changes nothing and counts nothing.
            try await services.imports.applyBalances(first, job: claimed)
            #expect(try await jobs.job(id)?.done == Int64(Imports.balancesPerWrite))
            await services.imports.processDue()
            let status = try await Self.get(k.baseURL, "/v1/admin/imports/\(id)")
            #expect(Self.counts(status) == [1_000, 1_000, 1_000, 0, 0] && status["state"] == "done")
            let report = try await Self.get(k.baseURL, "/v1/admin/reports/unused-balance?asOf=2026-09-30")
            #expect(report["totals"]?.arrayValue?.first?["unusedPaidCoins"]?.int64Value == paid)
            #expect(try await services.store.checkLedger().entries == 1_000)
            #expect(try await k.ledgerCheckOK())
        }
    }
}

/// What `kakin import` draws: a bar redrawn in place on a terminal, plain lines otherwise.
@Suite struct ImportProgressDrawing {
    @Test func theBarShowsRowsRateEtaAndRejects() {
        let status: JSONValue = ["importId": "imp_1", "state": "running", "rows": 10_000, "done": 3_400, "rejected": 2,
                                 "ratePerSecond": 812.4, "etaSeconds": 9]
        #expect(ImportProgress.bar(status) == "[##########--------------------]  3,400/10,000 rows  34%  812 rows/s  ETA 9s  rejected 2")
        #expect(ImportProgress.line(status) == "import imp_1 running: 3400/10000 rows, 812 rows/s, ETA 9s, 2 rejected")
        let starting: JSONValue = ["importId": "imp_1", "state": "queued", "rows": 200, "done": 0, "rejected": 0, "ratePerSecond": 0.0,
                                   "etaSeconds": .null]
        #expect(ImportProgress.bar(starting) == "[------------------------------]  0/200 rows  0%  0.0 rows/s  ETA --  rejected 0")
        #expect(ImportProgress.eta(["etaSeconds": 3_725]) == "1h2m" && ImportProgress.eta(["etaSeconds": 75]) == "1m15s")
    }
}
