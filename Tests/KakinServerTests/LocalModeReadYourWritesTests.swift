import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import KakinService
import Testing

/// Local mode as a user's CI drives it over HTTP: a simulator call answers only after Kakin has applied
/// the notifications it caused, so the status read right after it is never stale.
@Suite struct LocalModeReadYourWrites {
    struct HTTP {
        let base: String

        func call(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> (status: Int, json: JSONValue) {
            var request = URLRequest(url: URL(string: base + path)!)
            request.httpMethod = method
            if let body {
                request.httpBody = Data(body.serialized())
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            }
            let (data, response) = try await TestKakin.session.data(for: request)
            return ((response as! HTTPURLResponse).statusCode, (try? JSONParser.parse([UInt8](data))) ?? .null)
        }
    }

    @Test func statusReadRightAfterEachClockMoveIsNeverStale() async throws {
        try await SimulatedKakin.with { k in
            let http = HTTP(base: "http://127.0.0.1:\(k.runtime.port)")
            let customer = try await http.call("GET", "/v1/customers/u1")
            let token = try #require(customer.json["appAccountToken"]?.stringValue)
            let bought = try await http.call("POST", "/simulator/v1/purchases",
                                             ["productId": "premium.monthly", "appAccountToken": .string(token)])
            #expect(bought.status == 201)
            // The purchase's SUBSCRIBED notification is applied before the purchase call answers.
            let afterPurchase = try await http.call("GET", "/v1/customers/u1")
            #expect(afterPurchase.json["status"] == "active")

            var stale: [String] = []
            for step in 1...100 {
                let moved = try await http.call("POST", "/simulator/v1/clock", ["advanceSeconds": .int(31 * 86_400)])
                #expect(moved.status == 200)
                let nowMs = try #require(moved.json["nowMs"]?.int64Value)
                let status = try await http.call("GET", "/v1/customers/u1")
                let sub = status.json["subscriptions"]?.arrayValue?.first ?? .null
                let expiresMs = sub["expiresAt"]?.stringValue.flatMap(Timestamp.parseRFC3339) ?? 0
                if status.json["status"] != "active" || sub["state"] != "subscribed" || expiresMs <= nowMs {
                    stale.append("step \(step): \(status.json["status"] ?? .null) \(sub["state"] ?? .null) expiresAt \(sub["expiresAt"] ?? .null) at \(Timestamp.rfc3339(nowMs))")
                }
            }
            #expect(stale.count == 0, "\(stale.count) stale answers, first: \(stale.prefix(3))")
        }
    }
}
