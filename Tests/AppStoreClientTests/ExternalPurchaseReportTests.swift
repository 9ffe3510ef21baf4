import AppStoreClient
import KakinCore
import KakinExternal
import Testing

/// Send and Retrieve External Purchase Report: Apple's paths and shapes, the token's environment picks the host,
/// retries like every call, line-item errors as typed errors — scripted, then end to end against the simulator.
@Suite struct ExternalPurchaseReportClientTests {
    static let rid = "c4dcf1a5-afac-4e2c-83d7-280f9f2cb832"
    let tax = ExternalPurchaseTaxPolicy(taxCountry: "JPN", taxRateBasisPoints: 1000)

    func report(_ epid: String, rid: String = Self.rid) throws -> ExternalPurchaseReport {
        let coins = ExternalPurchaseRecord(provider: "web", externalId: "o1", productId: "coins.100", kind: .oneTime(quantity: 1), price: 1200,
                                           currency: CurrencyCode("JPY")!, purchasedAtMs: Fixtures.now - 3_600_000)
        return ExternalPurchaseReport(requestIdentifier: rid, externalPurchaseId: epid, status: .lineItem,
                                      lineItems: try ExternalPurchaseReportBuilder.lineItems(for: [coins], tax: tax))
    }

    @Test func aSandboxTokensReportGoesToTheSandboxURLAndRetriesOutages() async throws {
        let h = try Harness(ScriptedTransport([status(503), status(429), ok(["requestIdentifier": .string(Self.rid)])]))
        let sent = try await h.client.sendExternalPurchaseReport(try report("SANDBOX_0b8a8a35"))
        #expect(sent == Self.rid)
        #expect(h.transport.requests.count == 3)
        let request = h.transport.requests[2]
        #expect(request.method == "PUT" && request.path == "https://api.storekit-sandbox.apple.com/externalPurchase/v1/reports")
        #expect(request.bodyJSON?["status"] == "LINE_ITEM" && request.bodyJSON?["lineItems"]?.arrayValue?.count == 1)
        #expect(request.bearerToken != nil)
        let production = try Harness(ScriptedTransport([ok(["requestIdentifier": .string(Self.rid)])]))
        _ = try await production.client.sendExternalPurchaseReport(try report("0b8a8a35"))
        #expect(production.transport.requests[0].path == "https://api.storekit.apple.com/externalPurchase/v1/reports")
    }

    @Test func lineItemErrorsComeBackTypedAndAreNotRetried() async throws {
        let errors: JSONValue = ["errors": [
            ["errorCode": 12, "errorMessage": "The net amount value does not match the expected value.", "fieldName": "netAmountTaxExclusive",
             "lineItemId": "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"],
            ["errorCode": 7, "errorMessage": "The provided value is unknown for an enumeration.", "fieldName": "taxCountry"],
        ]]
        let h = try Harness(ScriptedTransport([status(400, errors)]))
        let sample = try report("SANDBOX_x")
        let error = try #require(await apiError { () async throws(AppStoreServerAPIError) in try await h.client.sendExternalPurchaseReport(sample) })
        #expect(error.isReportRejection && !error.isRetryable && error.attempts == 1)
        #expect(error.reportErrors.map(\.errorCode) == [12, 7])
        #expect(error.reportErrors[0].objectName == "IncorrectNetAmountError" && error.reportErrors[0].lineItemId == "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")
        #expect(error.reportErrors[1].fieldName == "taxCountry" && error.reportErrors[1].lineItemId == nil)
        #expect(h.transport.requests.count == 1)
    }

    @Test func retrieveReadsTheReportOrNilForApplesNotFoundError() async throws {
        let sample = try report("SANDBOX_x")
        let h = try Harness(ScriptedTransport([
            ok(["report": sample.json]),
            status(400, ["errorCode": 3, "errorMessage": "The referenced value was not found.", "fieldName": "requestIdentifier"]),
        ]))
        #expect(try await h.client.retrieveExternalPurchaseReport(requestIdentifier: Self.rid, environment: .sandbox) == sample)
        #expect(h.transport.requests[0].path == "https://api.storekit-sandbox.apple.com/externalPurchase/v1/reports/\(Self.rid)")
        #expect(try await h.client.retrieveExternalPurchaseReport(requestIdentifier: Self.rid, environment: .sandbox) == nil)
    }

    /// Over HTTP against the simulator: a token with a purchase and one without are reported once each, a failed
    /// line item is corrected and resent with the same requestIdentifier, and Retrieve confirms what Apple holds.
    @Test func endToEndAgainstTheSimulator() async throws {
        try await SimulatorEndToEndTests.withSimulator { s in
            let client = try s.client()
            let withPurchase = try #require(try await s.control("POST", "/external-purchase-tokens", ["api": "externalPurchase"])["externalPurchaseId"]?.stringValue)
            let without = try #require(try await s.control("POST", "/external-purchase-tokens", ["api": "customLink", "tokenType": "LINK_OUT"])["externalPurchaseId"]?.stringValue)
            try await s.control("POST", "/clock", ["advanceSeconds": 7200])
            let coins = ExternalPurchaseRecord(provider: "stripe", externalId: "pi_1", productId: "coins.100", kind: .oneTime(quantity: 1), price: 1200,
                                               currency: CurrencyCode("JPY")!, purchasedAtMs: SimulatorEndToEndTests.startMs + 60_000)
            let good = try #require(try ExternalPurchaseReportBuilder.nextReport(
                externalPurchaseId: withPurchase, purchases: [coins], accepted: .init(), tax: tax, noPurchaseReportDue: true,
                requestIdentifier: Self.rid))
            var job = ExternalPurchaseReportJob(report: good, createdAtMs: 0)
            // First attempt with a wrong tax country: refused, kept, corrected, resent with the same identifier.
            var broken = good
            broken.lineItems[0].taxCountry = "JP"
            let refusal = try #require(await apiError { () async throws(AppStoreServerAPIError) in try await client.sendExternalPurchaseReport(broken) })
            #expect(refusal.isReportRejection && refusal.reportErrors.map(\.fieldName) == ["taxCountry"])
            job.markRejected(refusal.reportErrors, atMs: 1)
            job.correct(with: good, atMs: 2)
            #expect(try await client.sendExternalPurchaseReport(job.report) == Self.rid)
            job.markSent(atMs: 3)
            // The token without a purchase: NO_LINE_ITEM, once.
            let none = try #require(try ExternalPurchaseReportBuilder.nextReport(
                externalPurchaseId: without, purchases: [], accepted: .init(), tax: tax, noPurchaseReportDue: true,
                requestIdentifier: "11111111-2222-4333-8444-555555555555"))
            _ = try await client.sendExternalPurchaseReport(none)
            let duplicate = try #require(await apiError { () async throws(AppStoreServerAPIError) in try await client.sendExternalPurchaseReport(none) })
            #expect(duplicate.httpStatus == 400 && duplicate.reportErrors.first?.errorCode == 1)
            // What Apple holds.
            #expect(try await client.retrieveExternalPurchaseReport(requestIdentifier: Self.rid, environment: .sandbox) == good)
            #expect(try await client.retrieveExternalPurchaseReport(requestIdentifier: "99999999-2222-4333-8444-555555555555", environment: .sandbox) == nil)
            let tokens = try await s.control("GET", "/external-purchase-tokens")
            #expect(tokens["tokens"]?.arrayValue?.map { $0["reportedStatuses"] } == [["LINE_ITEM"], ["NO_LINE_ITEM"]])
        }
    }
}
