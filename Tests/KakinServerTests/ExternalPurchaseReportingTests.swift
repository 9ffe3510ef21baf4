import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinExternal
import KakinService
import Testing
@testable import KakinServer

/// Apple's external purchase tokens end to end against the simulator (local mode): tokens the simulator issues as
/// StoreKit would, recorded by the app's calls, purchases reported under them, the External Purchase Server API's
/// validation, and its UNREPORTED notification.
@Suite struct ExternalPurchaseReportingTests {
    static func reporting(_ c: inout Configuration) {
        c.apps[0].external.reporting = ExternalPurchaseReportingConfiguration(
            enabled: true, tax: ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000))
    }

    @Test func everyTokenIsReportedOnceAFailedLineItemIsCorrectedAndUnreportedIsAnswered() async throws {
        try await using(try await SimulatedKakin.start(configure: Self.reporting), stop: { await $0.stop() }) { k in
            let reporter = k.app.services.externalPurchases.reporter
            // The test runs the reporter's passes itself, so each step's outcome is known.
            await reporter.stop()
            let account = try await k.token("u1")
            func issue(_ body: JSONValue) async throws -> (token: String, id: String) {
                let t = try await k.sim("POST", "/simulator/v1/external-purchase-tokens", body)
                return (t["token"]?.stringValue ?? "", t["externalPurchaseId"]?.stringValue ?? "")
            }
            func reports(_ state: String) async throws -> [JSONValue] {
                try await reporter.reports(state: state, limit: 100)["reports"]?.arrayValue ?? []
            }
            // Token A leads to a purchase; token B (asked before another potential purchase) to none; token C the app never
            // hands to Kakin.
            let a = try await issue(["api": "customLink", "tokenType": "IN_APP", "appAccountToken": .string(account)])
            let b = try await issue(["api": "customLink", "tokenType": "IN_APP", "appAccountToken": .string(account)])
            let c = try await issue(["api": "externalPurchase", "appAccountToken": .string(account)])
            for t in [a, b] {
                let recorded = await k.kakin("POST", "/v1/customers/u1/external-purchase-tokens", ["token": .string(t.token)])
                #expect(recorded.status == 201)
                #expect(recorded.json["externalPurchaseId"] == .string(t.id) && recorded.json["tokenType"] == "IN_APP")
                #expect(recorded.json["reportStatus"] == "pending")
            }
            // The team's web shop sold 100 coins under token A; its server's clock runs two minutes ahead of Apple's.
            let bought = await k.kakin("POST", "/v1/customers/u1/external-purchases", [
                "provider": "web", "externalId": "ord_7", "productId": "coins.100", "price": 120, "currency": "JPY",
                "purchasedAt": .string(Timestamp.rfc3339(k.nowMs + 120_000)), "externalPurchaseToken": .string(a.token),
            ], headers: [("Idempotency-Key", "ord_7")])
            #expect(bought.status == 201)
            #expect(bought.json["purchase"]?["externalPurchaseId"] == .string(a.id))
            #expect(bought.json["customer"]?["wallet"] == ["paid": 100, "free": 0, "total": 100])

            // Reported at once; Apple refuses the line item dated in its future.
            await reporter.runPass()
            let failed = try await reports("failed")
            #expect(failed.count == 1)
            #expect(failed.first?["errors"]?.arrayValue?.first?["errorCode"] == 6)
            let requestIdentifier = failed.first?["requestIdentifier"]
            // The support desk shows Apple's errors.
            let deskPage = await k.app.handle(HTTPRequest(method: "GET", path: "/admin/external-purchase-reports", rawPath: "/admin/external-purchase-reports",
                                                          queryItems: [("state", "failed")], headers: HTTPHeaders(), body: [], requestId: "d",
                                                          remoteAddress: nil))
            let html = String(decoding: deskPage.body, as: UTF8.self)
            #expect(deskPage.status == 200)
            #expect(html.contains("6 creationDate") && html.contains(requestIdentifier?.stringValue ?? "?"))
            #expect(try await reports("sent").isEmpty)

            // A few minutes later Kakin corrects the line (dated when resubmitted) and resubmits it with the same requestIdentifier.
            try await k.sim("POST", "/simulator/v1/clock", ["advanceSeconds": 300])
            await reporter.runPass()
            #expect(try await reports("failed").isEmpty)
            let sent = try await reports("sent")
            #expect(sent.map { $0["requestIdentifier"] } == [requestIdentifier])
            #expect(sent.first?["status"] == "LINE_ITEM")
            let held = try await k.sim("GET", "/simulator/v1/external-purchase-tokens/\(a.id)")
            #expect(held["reportedStatuses"] == ["LINE_ITEM"])

            // Token B expires without a purchase: reported NO_LINE_ITEM, before Apple's deadline.
            try await k.sim("POST", "/simulator/v1/clock", ["advanceSeconds": 3_700])
            await reporter.runPass()
            #expect(try await k.sim("GET", "/simulator/v1/external-purchase-tokens/\(b.id)")["reportedStatuses"] == ["NO_LINE_ITEM"])

            // Ten days on, token C goes unreported: the simulator sends UNREPORTED, Kakin answers with a report at once.
            try await k.advance(days: 10)
            await reporter.runPass()
            let tokenC = try await k.sim("GET", "/simulator/v1/external-purchase-tokens/\(c.id)")
            #expect(tokenC["unreportedNotified"] == true)
            #expect(tokenC["reportedStatuses"] == ["UNRECOGNIZED_TOKEN"])
            let metrics = String(decoding: await k.app.handle(.init(method: "GET", path: "/metrics", rawPath: "/metrics", queryItems: [],
                                                                    headers: .init(), body: [], requestId: "m", remoteAddress: nil)).body, as: UTF8.self)
            #expect(metrics.contains("kakin_external_purchase_tokens_unreported_total 1"))

            // Everything once: more passes report nothing more, and A and B were never UNREPORTED.
            await reporter.runPass()
            await reporter.runPass()
            #expect(try await reports("sent").count == 3)
            for t in [a, b] {
                let view = try await k.sim("GET", "/simulator/v1/external-purchase-tokens/\(t.id)")
                #expect(view["unreportedNotified"] == false)
                #expect(view["reportedStatuses"]?.arrayValue?.count == 1)
            }
            // The customer's backend was told of its two reports, beside the coins.
            let types = await k.kakin("GET", "/v1/customers/u1/events").json["events"]?.arrayValue?.compactMap { $0["type"]?.stringValue } ?? []
            #expect(types.filter { $0 == "external_purchase.reported" }.count == 2)
            #expect(types.contains("coins.credited"))
            let recorded = await k.kakin("POST", "/v1/customers/u1/external-purchase-tokens", ["token": .string(a.token)])
            #expect(recorded.json["reportStatus"] == "sent")
        }
    }
}
