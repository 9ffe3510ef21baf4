import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinCore
import Testing

/// Local mode serves the simulator's App Store Server API at Apple's paths as well as under `/simulator/`,
/// as `kakin simulator serve` does, so a client's base URL can be the same in both modes.
@Suite struct LocalModeServerAPI {
    func call(_ base: String, _ method: String, _ path: String, bearer: String? = nil,
              _ body: JSONValue? = nil) async throws -> (status: Int, body: [UInt8]) {
        var request = URLRequest(url: URL(string: base + path)!)
        request.httpMethod = method
        if let bearer { request.setValue("Bearer \(bearer)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = Data(body.serialized())
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await TestKakin.session.data(for: request)
        return ((response as! HTTPURLResponse).statusCode, [UInt8](data))
    }

    @Test func serverAPIAnswersAtTheRootAndUnderSimulator() async throws {
        try await SimulatedKakin.with { k in
            let base = "http://127.0.0.1:\(k.runtime.port)"
            let bought = try await call(base, "POST", "/simulator/v1/purchases", ["productId": "coins.500"])
            #expect(bought.status == 201)
            let transactionId = try #require(try JSONParser.parse(bought.body)["transactionId"]?.stringValue)
            let token = try #require(try JSONParser.parse(try await call(base, "GET", "/simulator/v1/api-token").body)["token"]?.stringValue)

            let atRoot = try await call(base, "GET", "/inApps/v1/transactions/\(transactionId)", bearer: token)
            let underSimulator = try await call(base, "GET", "/simulator/inApps/v1/transactions/\(transactionId)", bearer: token)
            #expect(atRoot.status == 200)
            #expect(underSimulator.status == 200)
            #expect(try JSONParser.parse(atRoot.body)["signedTransactionInfo"] != nil)
            #expect(try JSONParser.parse(atRoot.body)["signedTransactionInfo"] == JSONParser.parse(underSimulator.body)["signedTransactionInfo"])

            // Apple's rules hold at the root too: no token, no answer (Apple's 401), and Kakin's own routes are untouched.
            #expect(try await call(base, "GET", "/inApps/v1/transactions/\(transactionId)").status == 401)
            #expect(try await call(base, "GET", "/v1/customers/u1").status == 200)
        }
    }
}
