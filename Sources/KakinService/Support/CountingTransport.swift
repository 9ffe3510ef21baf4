import Foundation
import StoreAPITransport

/// Counts every HTTP attempt of a store's server API client by store, endpoint (the path with its IDs replaced by `{id}`,
/// a `:verb` kept) and result, for `/metrics` (`kakin_store_api_requests_total`); then passes it to the real transport
/// unchanged.
struct CountingTransport: HTTPTransport {
    let inner: any HTTPTransport
    let metrics: Metrics
    /// `appStore` or `googlePlay`.
    let store: String
    /// Path words of the store's API; any other segment is an ID, a package name or a token.
    let words: Set<String>

    static let appStoreWords: Set<String> = [
        "inApps", "v1", "v2", "transactions", "history", "subscriptions", "lookup", "refund", "notifications", "test",
        "extend", "mass", "consumption", "appTransactions", "messaging", "simulator",
    ]
    static let googlePlayWords: Set<String> = [
        "androidpublisher", "v3", "applications", "purchases", "subscriptionsv2", "subscriptions", "tokens", "products", "productsv2",
        "voidedpurchases", "orders", "token", "play-simulator",
    ]

    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        let endpoint = endpoint(of: request)
        do {
            let response = try await inner.send(request, responseBytesMax: responseBytesMax)
            metrics.countStoreCall(store: store, endpoint: endpoint, result: (200..<300).contains(response.status) ? "ok" : "http_\(response.status)")
            return response
        } catch {
            let result: String
            switch error {
            case .timedOut: result = "timeout"
            case .connectionFailed: result = "connection_failed"
            case .responseTooLarge: result = "too_large"
            case .cancelled: result = "cancelled"
            }
            metrics.countStoreCall(store: store, endpoint: endpoint, result: result)
            throw error
        }
    }

    func endpoint(of request: HTTPClientRequest) -> String {
        var path = Substring(request.url)
        if let scheme = path.range(of: "://") { path = path[scheme.upperBound...] }
        if let slash = path.firstIndex(of: "/") { path = path[slash...] } else { path = "/" }
        if let q = path.firstIndex(of: "?") { path = path[..<q] }
        let segments = path.split(separator: "/").map { segment -> String in
            // Google's custom methods: `{token}:acknowledge`.
            let parts = segment.split(separator: ":", maxSplits: 1).map(String.init)
            let name = words.contains(parts[0]) ? parts[0] : "{id}"
            return parts.count > 1 ? name + ":" + parts[1] : name
        }
        return request.method + " /" + segments.joined(separator: "/")
    }
}
