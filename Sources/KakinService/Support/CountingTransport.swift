import AppStoreClient
import Foundation
import StoreAPITransport

/// Counts every App Store Server API HTTP attempt by endpoint (the path with its IDs replaced by `{id}`) and
/// result, for `/metrics`; then passes it to the real transport unchanged.
struct CountingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let metrics: Metrics

    /// Path words of Apple's API; any other segment is an ID or token.
    static let words: Set<String> = [
        "inApps", "v1", "v2", "transactions", "history", "subscriptions", "lookup", "refund", "notifications", "test",
        "extend", "mass", "consumption", "appTransactions", "messaging", "simulator",
    ]

    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        let endpoint = Self.endpoint(of: request)
        do {
            let response = try await inner.send(request, responseBytesMax: responseBytesMax)
            metrics.countAppStoreCall(endpoint: endpoint, result: (200..<300).contains(response.status) ? "ok" : "http_\(response.status)")
            return response
        } catch {
            let result: String
            switch error {
            case .timedOut: result = "timeout"
            case .connectionFailed: result = "connection_failed"
            case .responseTooLarge: result = "too_large"
            case .cancelled: result = "cancelled"
            }
            metrics.countAppStoreCall(endpoint: endpoint, result: result)
            throw error
        }
    }

    static func endpoint(of request: HTTPClientRequest) -> String {
        var path = Substring(request.url)
        if let scheme = path.range(of: "://") { path = path[scheme.upperBound...] }
        if let slash = path.firstIndex(of: "/") { path = path[slash...] } else { path = "/" }
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        let segments = path.split(separator: "/").map { words.contains(String($0)) ? String($0) : "{id}" }
        return request.method + " /" + segments.joined(separator: "/")
    }
}
