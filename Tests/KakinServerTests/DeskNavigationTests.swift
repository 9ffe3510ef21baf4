import AppStoreSimulator
import Foundation
@testable import KakinAdmin
import KakinCore
@testable import KakinServer
import Testing

/// The support desk shows every page it has, and what Kakin can't place yet.
@Suite struct DeskNavigationTests {
    /// Every page route of the desk (a GET `/admin/…` without path parameters that answers a page, not a file) is linked
    /// from the bar on top of every page, and opens. The sign-in form is for those not signed in; the search is the box.
    @Test func everyPageOfTheDeskIsLinkedFromItsNavigation() async throws {
        try await SimulatedKakin.with { sk in
            var table = RouteTable(app: sk.app)
            sk.app.registerRoutes(&table)
            let pages = table.declared.filter { route in
                route.access == .desk && route.method == "GET" && !route.pattern.contains("{")
                    && !(route.pattern.split(separator: "/").last ?? "").contains(".") && route.pattern != "/admin/sign-in"
            }.map(\.pattern)
            #expect(pages.contains("/admin/external-purchase-reports") && pages.contains("/admin/consent-rescissions"), "\(pages)")
            let home = await AdminClient(sk.app).get("/admin/")
            #expect(home.status == 200)
            let header = try #require(home.text.components(separatedBy: "</header>").first)
            for page in pages {
                let linked = header.contains("href=\"\(page)\"") || header.contains("href=\"\(page)?") || header.contains("action=\"\(page)\"")
                #expect(linked, "\(page) is not linked from the desk's navigation")
            }
            for link in Layout.navigation {
                #expect(await AdminClient(sk.app).get(link.path).status == 200, "\(link.path)")
            }
        }
    }

    /// A RESCIND_CONSENT for an app transaction Kakin has not seen is listed on the desk; when the customer's first
    /// purchase arrives — here only through the app's own POST, every notification lost — it is placed at them: status,
    /// event, customer page, and the list is empty again.
    @Test func aRescissionKakinCantPlaceYetIsListedUntilTheAppSendsAPurchaseNamingItsAppTransaction() async throws {
        nonisolated(unsafe) var deliveries: NotificationSwitch!
        try await SimulatedKakin.with(deliveries: { inner in
            deliveries = NotificationSwitch(inner)
            return deliveries
        }) { sk in
            let token = try await sk.token("u1")
            try await sk.sim("POST", "/simulator/v1/accounts/\(token)/rescind-consent")
            let rescindedAt = Timestamp.rfc3339(sk.nowMs)
            #expect(try await sk.status("u1")["consentRescinded"] == nil)
            let listed = await AdminClient(sk.app).get("/admin/consent-rescissions")
            #expect(listed.status == 200)
            #expect(listed.text.contains("<td class=\"mono small\">") && !listed.text.contains("None: every RESCIND_CONSENT"), "\(listed.text)")
            let waiting = try await sk.app.store.unplacedConsentRescissions(limit: 10)
            let appTransactionId = try #require(waiting.first?.appTransactionId)
            #expect(waiting.count == 1 && listed.text.contains(appTransactionId))

            // The purchase reaches Kakin only through the app.
            deliveries.set(reachable: false)
            try await sk.advance(days: 1)
            let bought = try await sk.buy("u1", "coins.100")
            let jws = try #require(bought["signedTransaction"]?.stringValue)
            #expect(await sk.kakin("POST", "/v1/customers/u1/transactions", ["signedTransaction": .string(jws)]).status == 201)

            #expect(try await sk.status("u1")["consentRescinded"]?["at"]?.stringValue == rescindedAt)
            let events = await sk.kakin("GET", "/v1/customers/u1/events").json["events"]?.arrayValue ?? []
            #expect(events.filter { $0["type"] == "consent.rescinded" }.count == 1)
            #expect(try await sk.app.store.unplacedConsentRescissions(limit: 10).isEmpty)
            #expect(await AdminClient(sk.app).get("/admin/consent-rescissions").text.contains("None: every RESCIND_CONSENT is placed"))
            #expect(await AdminClient(sk.app).get("/admin/customers/u1").text.contains("rescinded by a parent or guardian at \(rescindedAt)"))
        }
    }
}
