@testable import AppStoreSimulator
import AppStoreSecurity
import KakinCore
import KakinExternal
import Testing

@Suite struct ExternalPurchaseAPITests {
    let rid = "5b3c6f1e-2a4d-4e8f-9a1b-0c2d3e4f5a6b"

    @Test func theDeviceEndpointHandsOutTokensAndListsThem() async throws {
        let sim = try makeSimulator()
        let made = await call(sim, "POST", "/simulator/v1/external-purchase-tokens",
                              ["api": "customLink", "tokenType": "SERVICES", "appAccountToken": .string(tokenA)])
        #expect(made.status == 201)
        let token = try ExternalPurchaseToken(token: try #require(made.json["token"]?.stringValue))
        #expect(token.tokenType == .services && made.json["externalPurchaseId"] == .string(token.externalPurchaseId))
        #expect(made.json["tokenExpirationDate"] == .int(startMs + 3_600_000) && made.json["environment"] == "Sandbox")
        let list = await call(sim, "GET", "/simulator/v1/external-purchase-tokens")
        #expect(list.json["tokens"]?.arrayValue?.count == 1)
        let one = await call(sim, "GET", "/simulator/v1/external-purchase-tokens/\(token.externalPurchaseId)")
        #expect(one.status == 200 && one.json["reports"] == [] && one.json["unreportedNotificationDate"] == .int(startMs + 2 * 3_600_000))
        #expect(await call(sim, "GET", "/simulator/v1/external-purchase-tokens/SANDBOX_nope").json["error"]?["id"] == "KKN-6031")
        // Refused requests, with the contract's error body.
        #expect(await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "other"]).status == 400)
        #expect(await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "externalPurchase", "x": 1]).status == 400)
        #expect(await call(sim, "DELETE", "/simulator/v1/external-purchase-tokens").status == 405)
        let acquisitionAfterExpiry: Reply = await {
            _ = await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "customLink", "tokenType": "ACQUISITION"])
            _ = await sim.advance(seconds: 7200)
            return await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "customLink", "tokenType": "ACQUISITION"])
        }()
        #expect(acquisitionAfterExpiry.status == 404 && acquisitionAfterExpiry.json["error"]?["id"] == "KKN-6030")
    }

    @Test func sendAndRetrieveAtApplesPathsWithApplesErrors() async throws {
        let sim = try makeSimulator()
        let made = await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "externalPurchase"])
        let epid = try #require(made.json["externalPurchaseId"]?.stringValue)
        let bearer = try apiToken(sim)
        let noLineItem: JSONValue = ["requestIdentifier": .string(rid), "externalPurchaseId": .string(epid), "status": "NO_LINE_ITEM"]
        // The bearer token is checked as for the App Store Server API.
        #expect(await call(sim, "PUT", "/externalPurchase/v1/reports", noLineItem).status == 401)
        // An unknown token: 400 with Apple's SendReportErrorResponse.
        var unknown = noLineItem
        if case .object(var o) = unknown { o["externalPurchaseId"] = "SANDBOX_unknown"; unknown = .object(o) }
        let refused = await call(sim, "PUT", "/externalPurchase/v1/reports", unknown, bearer: bearer)
        #expect(refused.status == 400)
        #expect(refused.json["errors"] == [["errorCode": 3, "errorMessage": "The referenced value was not found.", "fieldName": "externalPurchaseId"]])
        // Accepted, under /simulator/ too; the same requestIdentifier again is a duplicate.
        let sent = await call(sim, "PUT", "/simulator/externalPurchase/v1/reports", noLineItem, bearer: bearer)
        #expect(sent.status == 200 && sent.json == ["requestIdentifier": .string(rid)])
        let again = await call(sim, "PUT", "/externalPurchase/v1/reports", noLineItem, bearer: bearer)
        #expect(again.status == 400 && again.json["errors"]?.arrayValue?.first?["errorCode"] == 1
                && again.json["errors"]?.arrayValue?.first?["fieldName"] == "requestIdentifier")
        // Retrieve: the report, or Apple's NotFoundError.
        let got = await call(sim, "GET", "/externalPurchase/v1/reports/\(rid)", bearer: bearer)
        #expect(got.status == 200 && got.json["report"] == noLineItem)
        let missing = await call(sim, "GET", "/externalPurchase/v1/reports/00000000-0000-4000-8000-000000000000", bearer: bearer)
        #expect(missing.status == 400 && missing.json["errorCode"] == 3 && missing.json["fieldName"] == "requestIdentifier")
        #expect(await call(sim, "POST", "/externalPurchase/v1/reports", noLineItem, bearer: bearer).status == 404)
        let view = await call(sim, "GET", "/simulator/v1/external-purchase-tokens/\(epid)")
        #expect(view.json["reportedStatuses"] == ["NO_LINE_ITEM"] && view.json["reports"] == [noLineItem])
    }

    @Test func anUnreportedTokenIsNotifiedAsAppleDoesAndVerifies() async throws {
        let sink = ScriptedSink()
        let sim = try makeSimulator(sink: sink)
        let made = await call(sim, "POST", "/simulator/v1/external-purchase-tokens", ["api": "externalPurchase"])
        let epid = try #require(made.json["externalPurchaseId"]?.stringValue)
        let moved = await call(sim, "POST", "/simulator/v1/clock", ["advanceSeconds": .int(10 * 86_400)])
        #expect(moved.json["notifications"]?.arrayValue?.count == 1)
        let jws = try #require(sink.received.last)
        // Kakin's verifier reads it like Apple's: the app from the token section, Sandbox from the SANDBOX prefix.
        let verified = try verifier(sim).verify(jws, as: .notification)
        #expect(verified.payload["notificationType"] == "EXTERNAL_PURCHASE_TOKEN" && verified.payload["subtype"] == "UNREPORTED")
        let token = try ExternalPurchaseToken(notificationSection: try #require(verified.payload["externalPurchaseToken"]))
        #expect(token.externalPurchaseId == epid && token.tokenCreationDateMs == startMs && token.environment == .sandbox)
    }
}
