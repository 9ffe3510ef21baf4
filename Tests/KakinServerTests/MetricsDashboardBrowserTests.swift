import Foundation
import KakinCore
import KakinMetrics
@testable import KakinServer
import Testing

/// The desk's numbers page in a real browser (headless Chromium, as `AdminInABrowser`): three simulated months of
/// subscribers and coins, the page over the quarter by week, then filtered to one product. The page's figures are the
/// API's; its charts are inline SVG drawn on the server (no script; the CSP holds).
/// Screenshots: `.build/test-artifacts/admin-metrics/`.
@Suite(.enabled(if: WebDriver.isInstalled || ProcessInfo.processInfo.environment["KAKIN_BROWSER_TEST"] == "required"))
struct MetricsDashboardInABrowser {
    static var screenshots: URL {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return root.appendingPathComponent(".build/test-artifacts/admin-metrics")
    }

    static func grouped(_ n: Int64) -> String {
        var out = ""
        for (i, c) in String(n).reversed().enumerated() {
            if i > 0, i % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return String(out.reversed())
    }

    @Test(.timeLimit(.minutes(5)))
    func theNumbersPageChartsTheQuarterAndFiltersByProduct() async throws {
        try await SimulatedKakin.with(gracePeriodDays: 16) { k in
            // Customers arrive over the quarter: trials, direct subscribers, cancellations, coins.
            for week in 0..<12 {
                for i in 0..<(2 + week % 3) {
                    let c = "w\(week)c\(i)"
                    let product = ["premium.monthly", "premium.plus.monthly", "premium.yearly", "coins.500"][(week + i) % 4]
                    let r = try await k.buy(c, product)
                    if i == 1, let ot = r["originalTransactionId"]?.stringValue, product != "coins.500" {
                        try await k.action(ot, "disableAutoRenew")
                    }
                }
                try await k.advance(days: 7)
                try await k.app.services.businessMetrics.catchUp()
            }
            let overview = try await k.app.services.businessMetrics.overview(from: "2026-01-01", to: "2026-03-25", filter: MetricsFilter())
            #expect(overview.activeSubscriptions > 0 && overview.newSubscriptions > 0)

            let page = await k.app.handle(HTTPRequestFactory.get("/admin/metrics", [("from", "2026-01-01"), ("to", "2026-03-25"), ("interval", "week")]))
            #expect(page.status == 200)
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(!html.contains("<script"), "no script at all")
            #expect(!html.contains("style=\""), "no inline style (the CSP allows only the stylesheet)")
            #expect(page.headers["Content-Security-Policy"]?.hasPrefix("default-src 'none'") == true)
            #expect(html.contains("<svg class=\"chart\""))
            #expect(html.contains("<div class=\"big\">\(Self.grouped(overview.activeSubscriptions))</div>"), "the API's active subscriptions")
            #expect(html.contains("<div class=\"big\">\(Self.grouped(overview.newSubscriptions))</div>"), "the API's new subscriptions")

            let dir = Self.screenshots
            try? FileManager.default.removeItem(at: dir)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let base = "http://127.0.0.1:\(k.runtime.port)"
            let browser = try await WebDriver.start(width: 1280, height: 2200)
            do {
                try await browser.open(base + "/admin/metrics?from=2026-01-01&to=2026-03-25&interval=week")
                try await browser.waitFor("the numbers page") { _, source in source.contains("<h1>Numbers</h1>") }
                try await browser.screenshot(to: dir.appendingPathComponent("1-numbers-quarter-by-week.png").path)
                try await browser.open(base + "/admin/metrics?from=2026-01-01&to=2026-03-25&interval=day&bundleId=dev.kakin.demo&productId=premium.plus.monthly")
                try await browser.waitFor("the numbers of one product") { _, source in source.contains("<h1>Numbers</h1>") && source.contains("premium.plus.monthly") }
                try await browser.screenshot(to: dir.appendingPathComponent("2-numbers-one-product-by-day.png").path)
                try await browser.resize(width: 390, height: 2600)
                try await browser.open(base + "/admin/metrics?from=2026-01-01&to=2026-03-25&interval=month")
                try await browser.waitFor("the numbers page on a phone") { _, source in source.contains("<h1>Numbers</h1>") }
                try await browser.screenshot(to: dir.appendingPathComponent("3-numbers-on-a-phone.png").path)
            } catch {
                await browser.quit()
                throw error
            }
            await browser.quit()
            for name in ["1-numbers-quarter-by-week", "2-numbers-one-product-by-day", "3-numbers-on-a-phone"] {
                let size = (try? FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("\(name).png").path)[.size] as? Int) ?? 0
                #expect(size > 5_000, "\(name).png")
            }
        }
    }
}
