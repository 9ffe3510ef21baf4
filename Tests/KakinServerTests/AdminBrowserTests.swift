import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import KakinEvents
@testable import KakinServer
import KakinService
import Testing

/// `/admin/` in a real browser: headless Chromium (Debian's `chromium` + `chromium-driver`, installed by
/// `scripts/setup-browser`) signs in, searches by an order ID, opens the customer page, grants free coins and
/// extends the customer's subscription.
/// Screenshots are kept in `.build/test-artifacts/admin-browser/` (overwritten by each run).
/// `./scripts/test` sets `KAKIN_BROWSER_TEST=required`, so a missing browser fails there instead of skipping.
@Suite(.enabled(if: WebDriver.isInstalled || ProcessInfo.processInfo.environment["KAKIN_BROWSER_TEST"] == "required"))
struct AdminInABrowser {
    static let adminKey = "browser-test-admin-key-0123456789"

    static var screenshots: URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/test-artifacts/admin-browser")
    }

    @Test(.timeLimit(.minutes(5)))
    func supportSignsInFindsAPurchaseByOrderIdGrantsCoinsAndExtendsTheSubscription() async throws {
        let auth = Configuration.Auth(apiKeys: [.init(sha256: Hex.encode(SHA256Hash.digest(Array(Self.adminKey.utf8))), scope: .admin)],
                                      customerTokenSecret: nil)
        // The team's backend refuses webhooks at first: the deliveries go dead (after 300 ms here), to be replayed from the desk.
        let receiver = try WebhookReceiver(secret: WebhookDesk.secret, faults: .init(answerAll: 503))
        defer { Task { await receiver.stop() } }
        try await SimulatedKakin.with(auth: auth, configure: { config in
            config.events = EventsSettings(webhooks: [WebhookEndpoint(id: "backend", url: receiver.url, secrets: [Array(WebhookDesk.secret.utf8)])])
        }, configureRuntime: { options in
            options.webhookOptions.timeoutMs = 5_000   // far above a local answer, even on a loaded test run
            options.webhookOptions.pollIntervalMs = 20
            options.webhookOptions.schedule = RetrySchedule(firstDelayMs: 10, delayMaxMs: 50, windowMs: 300)
        }) { k in
            // A customer with coins and a month-old subscription, and an app that once failed to hand over a purchase.
            let coins = try await k.buy("u1", "coins.500")
            let order = try #require(coins["orderId"]?.stringValue)
            let txId = try #require(coins["transactionId"]?.stringValue)
            try await k.buy("u1", "premium.monthly")
            try await k.advance(days: 35)

            let dir = Self.screenshots
            try? FileManager.default.removeItem(at: dir)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let base = "http://127.0.0.1:\(k.runtime.port)"
            let browser = try await WebDriver.start()
            do {
                try await browser.open(base + "/admin/")
                try await browser.waitFor("the sign-in form") { url, _ in url.hasSuffix("/admin/sign-in") }
                try await browser.screenshot(to: dir.appendingPathComponent("1-sign-in.png").path)
                try await browser.type("input[name=name]", "Aiko")
                try await browser.type("input[name=key]", Self.adminKey)
                try await browser.click("form.stack button")
                try await browser.waitFor("the desk's home page") { url, source in url.hasSuffix("/admin/") && source.contains("Find a purchase") }

                try await browser.type("form.search input[name=q]", order)
                try await browser.click("form.search button")
                let search = try await browser.waitFor("the order's search result") { _, source in source.contains("Order \(order)") }
                #expect(search.contains("Transaction") || search.contains("transaction \(txId)"))
                try await browser.screenshot(to: dir.appendingPathComponent("2-search-by-order-id.png").path)

                try await browser.click("ul.hits a[href^=\"/admin/customers/u1\"]")
                try await browser.waitFor("the customer page") { _, source in source.contains("<h1>Customer u1</h1>") }
                // The link scrolled to the purchase; the screenshot shows the page from its top, tall enough for all of it.
                try await browser.resize(width: 1280, height: 3400)
                try await browser.open(base + "/admin/customers/u1")
                try await browser.waitFor("the customer page") { _, source in source.contains("<h1>Customer u1</h1>") }
                try await browser.screenshot(to: dir.appendingPathComponent("3-customer.png").path)

                try await browser.resize(width: 1280, height: 1000)
                try await browser.type("#wallet input[name=amount]", "50")
                try await browser.type("#wallet input[name=reason]", "goodwill for KKN-3004")
                try await browser.click("#wallet button")
                let granted = try await browser.waitFor("the grant's confirmation") { _, source in source.contains("Free coins granted") }
                #expect(granted.contains("goodwill for KKN-3004"))
                try await browser.screenshot(to: dir.appendingPathComponent("4-after-grant.png").path)

                // Extend the subscription by a week (the form's first reason: customer satisfaction).
                try await browser.type("form.extend input[name=days]", "7")
                try await browser.click("form.extend button")
                let extended = try await browser.waitFor("the extension's confirmation") { _, source in
                    source.contains("Subscription extended at the App Store")
                }
                #expect(extended.contains("subscription.extended"))
                try await browser.screenshot(to: dir.appendingPathComponent("5-after-extension.png").path)

                try await browser.resize(width: 390, height: 1800)
                try await browser.open(base + "/admin/customers/u1")
                try await browser.waitFor("the customer page on a phone") { _, source in source.contains("<h1>Customer u1</h1>") }
                try await browser.screenshot(to: dir.appendingPathComponent("6-customer-on-a-phone.png").path)

                // The webhook's dead deliveries, each with its last answer; the endpoint is fixed, one is replayed.
                #expect(try await eventually { (try await k.app.store.webhookCounts(endpointIds: ["backend"]).first?.dead ?? 0) > 0 })
                try await Self.replayADeadWebhookDelivery(browser, base: base, dir: dir, receiver: receiver)
            } catch {
                await browser.quit()
                throw error
            }
            await browser.quit()

            #expect(try await k.app.store.wallet("u1").free == 50 + 50)   // the pack's bonus and the grant
            let events = try await k.app.services.timeline.page(customerId: "u1", limit: 100, after: nil).items
            #expect(events.contains { $0.kind == "admin.grant" && $0.detail["by"]?.stringValue?.hasPrefix("Aiko (key ") == true })
            #expect(events.contains { $0.kind == "subscription.extended" && $0.detail["by"]?.stringValue?.hasPrefix("Aiko (key ") == true
                && $0.detail["days"] == 7 && $0.detail["reasonCode"] == 1 })
            for name in ["1-sign-in", "2-search-by-order-id", "3-customer", "4-after-grant", "5-after-extension", "6-customer-on-a-phone",
                         "7-webhook-dead-deliveries", "8-webhook-after-replay"] {
                let size = (try? FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("\(name).png").path)[.size] as? Int) ?? 0
                #expect(size > 5_000, "\(name).png")
            }
        }
    }

    /// Steps 7 and 8: the endpoint's dead deliveries, one replayed with its button, then the delivered list.
    static func replayADeadWebhookDelivery(_ browser: WebDriver, base: String, dir: URL, receiver: WebhookReceiver) async throws {
        receiver.setFaults(.init())
        try await browser.resize(width: 1280, height: 1400)
        try await browser.open(base + "/admin/webhooks/backend?state=dead")
        let dead = try await browser.waitFor("the webhook's dead deliveries") { _, source in source.contains("HTTP 503") }
        #expect(dead.contains("Replay every dead delivery"))
        try await browser.screenshot(to: dir.appendingPathComponent("7-webhook-dead-deliveries.png").path)
        try await browser.click("table form button")
        let confirmed = try await browser.waitFor("the replay's confirmation") { _, source in source.contains("Delivery queued again") }
        #expect(confirmed.contains("Webhook backend"))
        let arrived = try await receiver.wait { $0.count == 1 }
        #expect(arrived)
        try await browser.open(base + "/admin/webhooks/backend?state=delivered")
        let delivered = try await browser.waitFor("the delivered list") { _, source in source.contains("badge good\">delivered") }
        #expect(delivered.contains("Replay"))
        try await browser.screenshot(to: dir.appendingPathComponent("8-webhook-after-replay.png").path)
    }
}
