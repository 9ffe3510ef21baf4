import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
@testable import KakinServer
import KakinService
import Testing

/// Support extends subscriptions through Kakin's admin API, which calls the App Store Server API (here the
/// simulator's): the expiry moves at the App Store and in Kakin, Apple's limits come back as Kakin's errors.
@Suite(.serialized) struct SubscriptionExtensions {
    static let day: Int64 = 86_400_000

    /// A paid monthly subscriber (the free week over, ten days into the first paid month).
    static func paidSubscriber(_ k: SimulatedKakin, _ customer: String) async throws -> String {
        let ot = try await k.buy(customer, "premium.monthly")["originalTransactionId"]!.stringValue!
        return ot
    }

    @Test func extendingASubscriptionMovesItsExpiryAtTheAppStoreAndInKakin() async throws {
        try await SimulatedKakin.with { k in
            let ot = try await Self.paidSubscriber(k, "u1")
            try await k.advance(days: 10)
            let before = try #require(try await k.subscription("u1")["expiresAt"]?.stringValue.flatMap(Timestamp.parseRFC3339))

            let extended = await k.kakin("POST", "/v1/admin/subscriptions/\(ot)/extend",
                                         ["days": 10, "reason": "serviceIssueOrOutage", "requestIdentifier": "outage-2026-01"])
            #expect(extended.status == 200)
            let expected = before + 10 * Self.day
            #expect(extended.json["success"] == true)
            #expect(extended.json["effectiveDateMs"] == .int(expected))
            #expect(extended.json["effectiveDate"] == .string(Timestamp.rfc3339(expected)))
            #expect(extended.json["customerId"] == "u1")
            #expect(extended.json["customer"]?["subscriptions"]?.arrayValue?.first?["expiresAt"] == .string(Timestamp.rfc3339(expected)))
            await k.app.services.notifications.drain()
            #expect(try await k.sim("GET", "/simulator/v1/subscriptions/\(ot)")["expiresDate"] == .string(Timestamp.rfc3339(expected)))
            let recorded = try await k.app.services.timeline.page(customerId: "u1", limit: 100, after: nil).items.filter { $0.kind == "subscription.extended" }
            #expect(recorded.map { $0.detail["by"] } == ["local"])
            let notes = try await k.sim("GET", "/simulator/v1/notifications?limit=50")["notifications"]?.arrayValue ?? []
            #expect(notes.last?["notificationType"] == "RENEWAL_EXTENDED")

            // The same request identifier answers the same and extends once.
            let again = await k.kakin("POST", "/v1/admin/subscriptions/\(ot)/extend",
                                      ["days": 10, "reason": "serviceIssueOrOutage", "requestIdentifier": "outage-2026-01"])
            #expect(again.json["effectiveDateMs"] == .int(expected))
            // Past the old expiry the customer is still subscribed; the renewal happens at the new one.
            try await k.advance(to: before + Self.day)
            #expect(try await k.subscription("u1")["state"] == "subscribed")
            #expect(try await k.subscription("u1")["expiresAt"] == .string(Timestamp.rfc3339(expected)))
            try await k.advance(to: expected + Self.day)
            #expect(try await k.subscription("u1")["expiresAt"] == .string(Timestamp.rfc3339(ISOPeriod(months: 1).added(to: expected))))

            // Apple allows two extensions in 365 days; the Idempotency-Key header names the request too.
            let second = await k.kakin("POST", "/v1/admin/subscriptions/\(ot)/extend", ["days": 1, "reason": 1],
                                       headers: [("Idempotency-Key", "goodwill-1")])
            #expect(second.status == 200)
            #expect(second.json["requestIdentifier"] == "goodwill-1")
            let third = await k.kakin("POST", "/v1/admin/subscriptions/\(ot)/extend", ["days": 1, "reason": "other"])
            #expect(third.status == 409)
            #expect(third.json["error"]?["code"] == "extension_limit_reached")
            #expect(third.json["error"]?["id"] == "KKN-5051")
        }
    }

    @Test func extensionsAppleRefusesOrThatBreakItsBoundsAreErrorsWithIDs() async throws {
        try await SimulatedKakin.with { k in
            let trial = try await Self.paidSubscriber(k, "u1")
            let inTrial = await k.kakin("POST", "/v1/admin/subscriptions/\(trial)/extend", ["days": 3, "reason": "customerSatisfaction"])
            #expect(inTrial.status == 409)
            #expect(inTrial.json["error"]?["code"] == "extension_not_allowed")
            #expect(inTrial.json["error"]?["id"] == "KKN-5050")
            for body: JSONValue in [["days": 0, "reason": "other"], ["days": 91, "reason": "other"], ["days": 5, "reason": "sorry"],
                                    ["days": 5, "reason": 4], ["days": "5", "reason": "other"], ["reason": "other"]] {
                let answer = await k.kakin("POST", "/v1/admin/subscriptions/\(trial)/extend", body)
                #expect(answer.status == 400, "\(body.jsonString)")
                #expect(answer.json["error"]?["id"] == "KKN-5052", "\(body.jsonString)")
            }
            let unknown = await k.kakin("POST", "/v1/admin/subscriptions/2000009999999999/extend", ["days": 5, "reason": "other"])
            #expect(unknown.status == 404)
            #expect(unknown.json["error"]?["code"] == "transaction_not_found")
        }
    }

    @Test func extendingEveryActiveSubscriberReportsWhatAppleDid() async throws {
        try await SimulatedKakin.with { k in
            _ = try await Self.paidSubscriber(k, "u1")
            _ = try await Self.paidSubscriber(k, "u2")
            try await k.advance(days: 10)
            _ = try await Self.paidSubscriber(k, "u3")   // in its free week: Apple skips it
            let before = try #require(try await k.subscription("u1")["expiresAt"]?.stringValue.flatMap(Timestamp.parseRFC3339))

            let started = await k.kakin("POST", "/v1/admin/apps/\(Catalog.demoBundleId)/extend-all",
                                        ["productId": "premium.monthly", "days": 3, "reason": "serviceIssueOrOutage",
                                         "storefrontCountryCodes": ["USA"], "requestIdentifier": "outage-all"])
            #expect(started.status == 202)
            #expect(started.json["requestIdentifier"] == "outage-all")
            await k.app.services.notifications.drain()
            let status = await k.kakin("GET", "/v1/admin/apps/\(Catalog.demoBundleId)/extend-all/premium.monthly/outage-all")
            #expect(status.status == 200)
            #expect(status.json["complete"] == true)
            #expect(status.json["succeededCount"] == 2)
            #expect(status.json["failedCount"] == 1)
            // Kakin learnt the new expiry from the RENEWAL_EXTENDED notifications.
            for customer in ["u1", "u2"] {
                #expect(try await k.subscription(customer)["expiresAt"] == .string(Timestamp.rfc3339(before + 3 * Self.day)))
            }

            #expect(await k.kakin("GET", "/v1/admin/apps/\(Catalog.demoBundleId)/extend-all/premium.monthly/nope").json["error"]?["id"] == "KKN-5053")
            let unknownApp = await k.kakin("POST", "/v1/admin/apps/com.example.other/extend-all", ["productId": "premium.monthly", "days": 3, "reason": 0])
            #expect(unknownApp.status == 404)
            #expect(unknownApp.json["error"]?["code"] == "unknown_app")
            let coins = await k.kakin("POST", "/v1/admin/apps/\(Catalog.demoBundleId)/extend-all", ["productId": "coins.100", "days": 3, "reason": 0])
            #expect(coins.json["error"]?["code"] == "unknown_product")
            let storefronts = await k.kakin("POST", "/v1/admin/apps/\(Catalog.demoBundleId)/extend-all",
                                            ["productId": "premium.monthly", "days": 3, "reason": 0, "storefrontCountryCodes": ["us"]])
            #expect(storefronts.status == 400)
        }
    }

    /// The customer page's form takes the same path as the JSON endpoint: CSRF-checked, Apple's bounds, the
    /// subscription must be this customer's, the form's key is Apple's request identifier (a double submit
    /// extends once), and the timeline says who extended.
    @Test func supportExtendsASubscriptionFromTheCustomerPageAndTheTimelineSaysWho() async throws {
        let adminKey = "extension-desk-admin-key-0123456789"
        let auth = Configuration.Auth(apiKeys: [.init(sha256: Hex.encode(SHA256Hash.digest(Array(adminKey.utf8))), scope: .admin)],
                                      customerTokenSecret: nil)
        try await SimulatedKakin.with(auth: auth) { k in
            let ot = try await Self.paidSubscriber(k, "u1")
            let othersOt = try await Self.paidSubscriber(k, "u2")
            try await k.advance(days: 10)
            func expiresAt() async -> JSONValue? {
                await k.kakin("GET", "/v1/customers/u1", headers: [("Authorization", "Bearer \(adminKey)")]).json["subscriptions"]?.arrayValue?.first?["expiresAt"]
            }
            let before = try #require(await expiresAt()?.stringValue.flatMap(Timestamp.parseRFC3339))
            let admin = AdminClient(k.app)
            let signIn = await admin.get("/admin/sign-in")
            #expect(await admin.post("/admin/sign-in", [("name", "Aiko"), ("key", adminKey)], from: signIn).status == 303)

            let page = await admin.get("/admin/customers/u1")
            let action = "/admin/customers/u1/subscriptions/\(ot)/extend"
            #expect(page.text.contains("action=\"\(action)\""))
            #expect(page.text.contains("<option value=\"serviceIssueOrOutage\">"))
            #expect(!page.text.contains("not available in this build"))
            let key = try #require(AdminClient.hiddenValue("key", in: page.text)) + "-" + ot
            #expect(page.text.contains("name=\"key\" value=\"\(key)\""))
            let fields = [("days", "7"), ("reason", "serviceIssueOrOutage"), ("key", key)]

            let forged = await admin.send("POST", action, form: fields + [("csrf", "not-the-token")])
            #expect(forged.status == 403)
            #expect(forged.text.contains("KKN-9002"))
            let tooLong = await admin.post(action, [("days", "91"), ("reason", "other"), ("key", key)], from: page)
            #expect(tooLong.status == 400)
            #expect(tooLong.text.contains("KKN-5052"))
            let notTheirs = await admin.post("/admin/customers/u1/subscriptions/\(othersOt)/extend", fields, from: page)
            #expect(notTheirs.status == 404)
            #expect(notTheirs.text.contains("KKN-9050"))
            #expect(await expiresAt() == .string(Timestamp.rfc3339(before)), "nothing moved yet")

            let extended = await admin.post(action, fields, from: page)
            #expect(extended.status == 303)
            #expect(extended.location == "/admin/customers/u1?done=extended#sub-\(ot)")
            // Sent twice (a double click, a resubmitted form): Apple extends once.
            #expect(await admin.post(action, fields, from: page).status == 303)
            let expected = before + 7 * Self.day
            #expect(await expiresAt() == .string(Timestamp.rfc3339(expected)))
            #expect(try await k.sim("GET", "/simulator/v1/subscriptions/\(ot)")["expiresDate"] == .string(Timestamp.rfc3339(expected)))

            let after = await admin.get("/admin/customers/u1?done=extended")
            #expect(after.text.contains("Subscription extended at the App Store"))
            let events = await admin.get("/v1/admin/customers/u1/events?limit=100").json["events"]?.arrayValue ?? []
            let recorded = events.filter { $0["kind"] == "subscription.extended" }
            #expect(recorded.count == 2)
            #expect(recorded.allSatisfy { $0["detail"]?["by"]?.stringValue?.hasPrefix("Aiko (key ") == true })
            #expect(recorded.first?["detail"]?["days"] == 7)
            #expect(recorded.first?["detail"]?["requestIdentifier"] == .string(key))
            #expect(after.text.contains("subscription.extended"))
        }
    }

    @Test func onlyAdminKeysMayExtend() async throws {
        try await Authentication.withAuthenticatedKakin { (k: TestKakin) async throws in
            let body: JSONValue = ["days": 3, "reason": "other"]
            let admin = ["Authorization": "Bearer \(Authentication.adminKey)"]
            let backend = ["Authorization": "Bearer \(Authentication.backendKey)"]
            #expect(try await k.request("POST", "/v1/admin/subscriptions/1/extend", json: body).status == 401)
            #expect(try await k.request("POST", "/v1/admin/subscriptions/1/extend", json: body, headers: backend).status == 403)
            #expect(try await k.request("POST", "/v1/admin/apps/x/extend-all", json: body, headers: backend).status == 403)
            #expect(try await k.request("GET", "/v1/admin/apps/x/extend-all/p/r", headers: backend).status == 403)
            // An admin gets through to the App Store Server API, which this server has not configured.
            #expect(try await k.request("POST", "/v1/admin/subscriptions/1/extend", json: body, headers: admin).errorCode
                == "app_store_api_not_configured")
        }
    }
}
