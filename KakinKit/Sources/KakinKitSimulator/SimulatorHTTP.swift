import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KakinKit

/// A simulator's control API over HTTP (`root` + path, JSON in and out), as the simulated stores call it.
struct SimulatorHTTP: Sendable {
    let root: URL
    let session: URLSession
    /// "App Store", "Google Play": for the messages.
    let name: String

    func call(_ method: String, _ path: String, body: Data? = nil) async throws(KakinKitError) -> (Int, Data) {
        guard let url = URL(string: root.absoluteString.trimmingTrailingSlashes() + path) else {
            throw KakinKitError(.storeFailed, message: "The simulator URL is not valid.")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = 20
        if let body {
            request.httpBody = body
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        do {
            let (data, response) = try await session.data(for: request)
            return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
        } catch {
            throw KakinKitError(.storeFailed, message: "The \(name) simulator could not be reached.")
        }
    }

    /// The simulator refuses with Kakin's error body (`KKN-6001` unknown product, …): keep its ID.
    static func refusal(_ status: Int, _ data: Data, name: String) -> KakinKitError {
        struct ErrorBody: Decodable {
            struct Inner: Decodable {
                var code: String
                var id: String
                var message: String
            }
            var error: Inner
        }
        if let e = try? JSONDecoder().decode(ErrorBody.self, from: data) {
            return KakinKitError(id: e.error.id, code: e.error.code, message: e.error.message, httpStatus: status)
        }
        return KakinKitError(.storeFailed, message: "The \(name) simulator answered \(status).")
    }
}
