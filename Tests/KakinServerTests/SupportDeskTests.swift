import AppStoreSecurity
import Foundation
import HTTPServer
import KakinCore
import KakinCrypto
import KakinEvents
@testable import KakinServer
import KakinService
import KakinSQLite
import KakinStorage
import Testing

/// The support desk in local mode with the App Store simulator: a purchase is found by what a customer or
/// the app can tell support (order ID, transaction ID, an error ID with its request ID).
@Suite struct SupportDeskSearch {
    @Test func aSimulatorPurchaseIsFoundByOrderIdTransactionIdAndTheErrorIdOfAFailedAttempt() async throws {
        try await SimulatedKakin.with { k in
            let bought = try await k.buy("u1", "coins.500")
            let order = try #require(bought["orderId"]?.stringValue)
            let txId = try #require(bought["transactionId"]?.stringValue)
            let jws = try #require(bought["signedTransaction"]?.stringValue)
            let admin = AdminClient(k.app)

            // The app hands the transaction to Kakin (the notification may have credited it first: 409).
            let posted = await admin.send("POST", "/v1/customers/u1/transactions", headers: [("Content-Type", "application/json")])
            #expect(posted.status == 400)   // an empty body: a failed attempt of its own kind
            var req = HTTPRequest(method: "POST", path: "/v1/customers/u1/transactions", headers: ["Content-Type": "application/json"],
                                  body: JSONValue.object(["signedTransaction": .string(jws)]).serialized(), requestId: "req_ok1")
            #expect([201, 409].contains(await k.app.handle(req).status))
            // A failed attempt: the app sends it for the wrong customer; it shows "KKN-3004 (req_fail42)" to the user.
            req = HTTPRequest(method: "POST", path: "/v1/customers/u2/transactions",
                              headers: ["Content-Type": "application/json", "X-Purchase-Process-Id": "tap-7f3a"],
                              body: JSONValue.object(["signedTransaction": .string(jws)]).serialized(), requestId: "req_fail42")
            let failed = await k.app.handle(req)
            #expect(failed.status == 403)

            let byOrder = await admin.get("/admin/search?q=\(order)")
            #expect(byOrder.status == 200)
            #expect(byOrder.text.contains("Order \(order) · transaction \(txId)"))
            #expect(byOrder.text.contains("href=\"/admin/customers/u1#tx-\(txId)\""))

            let byTransaction = await admin.get("/admin/search?q=\(txId)")
            #expect(byTransaction.text.contains("Transaction \(txId)"))
            #expect(byTransaction.text.contains("href=\"/admin/customers/u1#tx-\(txId)\""))

            let byError = await admin.get("/admin/search?q=KKN-3004+req_fail42")
            #expect(byError.text.contains("KKN-3004 belongs_to_another_customer"))
            #expect(byError.text.contains("tap-7f3a"))
            #expect(byError.text.contains("u2 (no such customer: nothing was created)"))
            #expect(byError.text.contains("href=\"/admin/customers/u1#tx-\(txId)\""))
            #expect(await admin.get("/admin/search?q=tap-7f3a").text.contains("KKN-3004"))

            let customer = await admin.get("/admin/customers/u1")
            #expect(customer.text.contains("id=\"tx-\(txId)\""))
            #expect(customer.text.contains("ONE_TIME_CHARGE"))

            let orderJSON = await admin.get("/v1/admin/orders/\(order)").json
            #expect(orderJSON["customerId"] == "u1")
            #expect(orderJSON["transactions"]?.arrayValue?.first?["transaction"]?["transactionId"] == .string(txId))
            #expect(await admin.get("/v1/admin/orders/ZZZZZZZZZZ").json["error"]?["id"] == "KKN-9005")

            let errorJSON = await admin.get("/v1/admin/errors/req_fail42").json["error"]
            #expect(errorJSON?["id"] == "KKN-3004")
            #expect(errorJSON?["customerId"] == "u2")
            #expect(errorJSON?["purchaseProcessId"] == "tap-7f3a")
            #expect(errorJSON?["transactionId"] == .string(txId))
            #expect(await admin.get("/v1/admin/errors/req_nothing").json["error"]?["id"] == "KKN-9004")

            // App Store Server API calls are counted, and the order lookup was one.
            let metrics = await admin.get("/metrics").text
            #expect(metrics.contains("kakin_store_api_requests_total{store=\"appStore\",endpoint=\"GET /simulator/inApps/v1/lookup/{id}\",result=\"ok\"}"))
            #expect(metrics.contains("kakin_http_requests_total{method=\"POST\",route=\"/v1/customers/{customerId}/transactions\",status=\"403\"} 1"))
            #expect(metrics.contains("kakin_db_commit_batch_size_bucket{le=\"+Inf\"}"))
            #expect(metrics.contains("kakin_notification_inbox{state=\"received\"} 0"))
        }
    }

    @Test func restoreAndReApplyFromTheCustomerPageAreRecordedWithWhoDidThem() async throws {
        try await SimulatedKakin.with { k in
            let bought = try await k.buy("u1", "coins.100")
            let admin = AdminClient(k.app)
            let page = await admin.get("/admin/customers/u1")
            #expect(!page.text.contains("Sign out"))   // local mode: no sign-in
            let restored = await admin.post("/admin/customers/u1/restore", [], from: page)
            #expect(restored.status == 303)
            #expect(restored.location == "/admin/customers/u1?done=restored")
            let forged = await admin.send("POST", "/admin/customers/u1/restore", form: [("csrf", "not-the-token")])
            #expect(forged.status == 403)

            let notifications = await admin.get("/v1/admin/notifications?state=applied").json["notifications"]?.arrayValue ?? []
            let uuid = try #require(notifications.first { $0["transactionId"] == bought["transactionId"] }?["notificationUUID"]?.stringValue)
            let replayed = await admin.post("/admin/notifications/\(uuid)/replay", [("back", "/admin/customers/u1")], from: page)
            #expect(replayed.location == "/admin/customers/u1?done=replayed")
            let evil = await admin.post("/admin/notifications/\(uuid)/replay", [("back", "https://evil.example/")], from: page)
            #expect(evil.location?.hasPrefix("/admin/notifications?state=") == true)
            #expect(try await k.app.store.wallet("u1") == WalletBalance(paid: 100, free: 0))   // re-applying changes nothing

            let events = await admin.get("/v1/admin/customers/u1/events?limit=100").json["events"]?.arrayValue ?? []
            #expect(events.contains { $0["kind"] == "admin.restore" && $0["detail"]?["by"] == "local" })
            #expect(events.filter { $0["kind"] == "admin.notificationReplayed" && $0["detail"]?["by"] == "local" }.count == 2)
        }
    }

    @Test func theTimelinePagesThroughEventsThatShareOneInstant() async throws {
        try await SimulatedKakin.with { k in
            for _ in 0..<4 { try await k.buy("u1", "coins.100") }   // the simulated clock stands still: same millisecond
            let admin = AdminClient(k.app)
            var seen: [JSONValue] = []
            var cursor: String?
            repeat {
                let page = await admin.get("/v1/admin/customers/u1/events?limit=3" + (cursor.map { "&cursor=\($0)" } ?? "")).json
                seen += page["events"]?.arrayValue ?? []
                cursor = page["nextCursor"]?.stringValue
            } while cursor != nil
            let all = await admin.get("/v1/admin/customers/u1/events?limit=200").json["events"]?.arrayValue ?? []
            #expect(seen == all)
            #expect(all.count >= 16)   // 4 × (transaction, notification, ledger, purchase.applied, notification.applied)
            #expect(await admin.get("/v1/admin/customers/nobody/events").json["error"]?["id"] == "KKN-9007")
        }
    }
}

/// Signing in to `/admin/` with an admin key, the session cookie, CSRF on forms, CSP, escaping, actions.
@Suite struct SupportDeskSecurity {
    static let adminKey = "admin-key-for-tests-0123456789"
    static let backendKey = "backend-key-for-tests-0123456789"
    static var auth: Configuration.Auth {
        Configuration.Auth(apiKeys: [
            .init(sha256: Hex.encode(SHA256Hash.digest(Array(adminKey.utf8))), scope: .admin),
            .init(sha256: Hex.encode(SHA256Hash.digest(Array(backendKey.utf8))), scope: .backend),
        ], customerTokenSecret: nil)
    }

    func signedIn(_ admin: AdminClient, name: String = "Aiko") async -> AdminClient.Page {
        let form = await admin.get("/admin/sign-in")
        return await admin.post("/admin/sign-in", [("name", name), ("key", Self.adminKey)], from: form)
    }

    @Test func signingInExchangesAnAdminKeyForAStrictSessionCookie() async throws {
        let k = try await TestKakin.start(auth: Self.auth)
        try await using(k, stop: { await $0.stop() }) { k in
            let admin = AdminClient(k.runtime.app)
            let anonymous = await admin.get("/admin/")
            #expect(anonymous.status == 303)
            #expect(anonymous.location == "/admin/sign-in")

            let form = await admin.get("/admin/sign-in")
            #expect(form.status == 200)
            #expect(form.headers["Content-Security-Policy"]?.contains("default-src 'none'") == true)
            #expect(form.headers["Content-Security-Policy"]?.contains("script-src") == false)   // no script at all
            #expect(!form.text.contains("<script"))
            #expect(!form.text.contains("style="))

            let backend = await admin.post("/admin/sign-in", [("name", "Aiko"), ("key", Self.backendKey)], from: form)
            #expect(backend.status == 401)
            #expect(backend.text.contains("KKN-9001"))
            let forged = await admin.send("POST", "/admin/sign-in", form: [("name", "Aiko"), ("key", Self.adminKey), ("csrf", "guess")])
            #expect(forged.status == 403)

            let ok = await signedIn(admin)
            #expect(ok.status == 303)
            #expect(ok.location == "/admin/")
            let cookie = try #require(ok.cookies.first { $0.hasPrefix("kakin_admin=") })
            #expect(cookie.contains("; HttpOnly") && cookie.contains("; SameSite=Strict") && cookie.contains("; Max-Age=28800"))
            #expect(!cookie.contains("Secure"))   // loopback, no TLS proxy
            #expect((await admin.get("/admin/")).status == 200)

            // Behind a TLS proxy the cookie is Secure.
            let proxied = AdminClient(k.runtime.app)
            let proxiedForm = await proxied.get("/admin/sign-in")
            let behindTLS = await proxied.post("/admin/sign-in", [("name", "Ken"), ("key", Self.adminKey)], from: proxiedForm,
                                               headers: [("X-Forwarded-Proto", "https")])
            #expect(behindTLS.cookies.first { $0.hasPrefix("kakin_admin=") }?.contains("; Secure") == true)

            // The session expires; the cookie's token alone is not stored.
            let token = try #require(admin.cookies["kakin_admin"])
            let stored = try await k.runtime.app.store.database.read { db in try db.query("SELECT token_sha256 FROM admin_sessions", []).count }
            #expect(stored == 2)
            let raw = try await k.runtime.app.store.database.read { db in try db.query("SELECT 1 FROM admin_sessions WHERE token_sha256 = ?", [.text(token)]).count }
            #expect(raw == 0)
            k.clock.advance(ms: 8 * 3_600_000 + 1000)
            #expect((await admin.get("/admin/")).status == 303)
        }
    }

    @Test func formsNeedTheSessionsTokenAndEveryActionIsRecordedWithWhoDidIt() async throws {
        let k = try await TestKakin.start(auth: Self.auth)
        try await using(k, stop: { await $0.stop() }) { k in
            let tx = try k.appStore.transaction(productId: "coins.100", purchaseMs: k.clock.nowMs())
            #expect(try await k.request("POST", "/v1/customers/u1/transactions", json: ["signedTransaction": .string(tx.jws)],
                                        headers: ["Authorization": "Bearer \(Self.backendKey)"]).status == 201)
            let admin = AdminClient(k.runtime.app)
            _ = await signedIn(admin)
            let page = await admin.get("/admin/customers/u1")
            #expect(page.status == 200)
            let key = try #require(AdminClient.hiddenValue("key", in: page.text))
            let reason = "<script>alert(1)</script> sorry"

            let noToken = await admin.send("POST", "/admin/customers/u1/grant", form: [("amount", "50"), ("reason", reason), ("key", key)])
            #expect(noToken.status == 403)
            #expect(noToken.text.contains("KKN-9002"))
            let granted = await admin.post("/admin/customers/u1/grant", [("amount", "50"), ("reason", reason), ("key", key)], from: page)
            #expect(granted.status == 303)
            #expect(granted.location == "/admin/customers/u1?done=granted")
            // The same form sent twice (a double click, a reload) grants once.
            #expect(await admin.post("/admin/customers/u1/grant", [("amount", "50"), ("reason", reason), ("key", key)], from: page).status == 303)
            let wallet = try await k.request("GET", "/v1/customers/u1/wallet", headers: ["Authorization": "Bearer \(Self.backendKey)"]).json
            #expect(wallet["paid"] == 100 && wallet["free"] == 50)

            let after = await admin.get("/admin/customers/u1?done=granted")
            #expect(after.text.contains("&lt;script&gt;alert(1)&lt;/script&gt; sorry"))
            #expect(!after.text.contains("<script>"))
            #expect(after.text.contains("Free coins granted"))
            let events = await admin.get("/v1/admin/customers/u1/events").json["events"]?.arrayValue ?? []
            let grant = try #require(events.first { $0["kind"] == "admin.grant" })
            #expect(grant["detail"]?["by"]?.stringValue?.hasPrefix("Aiko (key ") == true)
            #expect(grant["detail"]?["amount"] == 50)

            // Reads: a bearer admin key or the session; a backend key is not enough.
            #expect(try await k.request("GET", "/v1/admin/customers/u1/events", headers: ["Authorization": "Bearer \(Self.adminKey)"]).status == 200)
            #expect(try await k.request("GET", "/v1/admin/customers/u1/events", headers: ["Authorization": "Bearer \(Self.backendKey)"]).status == 403)
            #expect(try await k.request("GET", "/v1/admin/customers/u1/events").status == 401)
            #expect(try await k.request("POST", "/v1/admin/notifications/x/replay").status == 401)

            // Signing out ends the session everywhere.
            let out = await admin.post("/admin/sign-out", [], from: after)
            #expect(out.status == 303)
            #expect(admin.cookies["kakin_admin"] == nil)
            #expect((await admin.get("/admin/")).status == 303)
        }
    }
}

/// `kakin backup` while the server keeps writing: the copy is consistent and complete.
@Suite struct Backup {
    @Test func aBackupTakenWhileServingHoldsEveryCommittedPurchase() async throws {
        try await TestKakin.with { k in
            for i in 0..<20 {
                let tx = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
                #expect(try await k.postTransaction("u\(i % 4)", jws: tx.jws).status == 201)
            }
            let spending = Task {
                for i in 0..<40 { _ = try? await k.spend("u\(i % 4)", key: "s\(i)", amount: 1) }
            }
            let target = k.directory.appendingPathComponent("backup.db").path
            let database = "sqlite:" + k.directory.appendingPathComponent("kakin.db").path
            #expect(await BackupCommand.run(arguments: ["--to", target, "--database", database]) == 0)
            await spending.value

            let copy = try SQLiteDatabase(path: target)
            let store = KakinStore(database: copy, ids: SequentialIDs(), clock: k.clock)
            let report = try await store.checkLedger()
            #expect(report.ok)
            #expect(report.customers == 4)
            let purchases = try await copy.read { db in try db.queryOne("SELECT COUNT(*) AS n FROM applied_transactions", [])?.int("n") }
            #expect(purchases == 20)
            await copy.close()
            #expect(await BackupCommand.run(arguments: ["--to", target, "--database", "postgresql://kakin@localhost/kakin"]) == 2)
            #expect(await BackupCommand.run(arguments: ["--to", target + "2", "--database", "sqlite:/nonexistent/kakin.db"]) == 1)
        }
    }
}

/// The Grafana dashboard charts series `/metrics` really has.
@Suite struct MetricsLayout {
    @Test func everySeriesTheDashboardChartsIsExposed() async throws {
        // A webhook configured (nothing listens there), so its series are exposed too.
        try await SimulatedKakin.with(configure: { config in
            config.events = EventsSettings(webhooks: [WebhookEndpoint(id: "backend", url: "http://127.0.0.1:9/hooks",
                                                                      secrets: [Array("whsec_metrics_0123456789".utf8)])])
        }) { k in
            try await k.buy("u1", "coins.100")
            _ = await AdminClient(k.app).get("/admin/search?q=1234567890")   // an App Store lookup
            _ = await AdminClient(k.app).get("/v1/customers/no!such!id")      // an error
            let metrics = await AdminClient(k.app).get("/metrics").text
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let dashboard = try String(contentsOf: root.appendingPathComponent("docs/grafana-dashboard.json"), encoding: .utf8)
            let names = Set(dashboard.matches(of: /kakin_[a-z_]+/).map { String($0.output) })
            #expect(names.count >= 15)
            for name in names.sorted() {
                #expect(metrics.contains("\n\(name){") || metrics.contains("\n\(name) "), "\(name) is charted but not exposed")
            }
        }
    }
}
