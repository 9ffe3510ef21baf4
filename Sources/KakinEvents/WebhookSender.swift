import Foundation
import KakinCore
import KakinCrypto
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One POST of one event to one endpoint.
public struct WebhookRequest: Sendable, Hashable {
    public var url: String
    public var body: [UInt8]
    /// `Content-Type`, `Kakin-Event-Id`, `Kakin-Signature`, `User-Agent`.
    public var headers: [String: String]
    /// The whole exchange's deadline: no answer by then is a failed attempt.
    public var timeoutMs: Int64

    /// The contract's delivery of `payload` (event `eventId`) to `endpoint`, signed at `nowSeconds` with each of the
    /// endpoint's secrets.
    public init(endpoint: WebhookEndpoint, eventId: String, payload: String, nowSeconds: Int64, timeoutMs: Int64) {
        let body = Array(payload.utf8)
        self.url = endpoint.url
        self.body = body
        self.headers = [
            "Content-Type": "application/json",
            "Kakin-Event-Id": eventId,
            "Kakin-Signature": TimestampedSignature.header(body: body, timestamp: nowSeconds, secrets: endpoint.secrets),
            "User-Agent": "Kakin-Webhooks/1",
        ]
        self.timeoutMs = timeoutMs
    }
}

/// What came of one POST.
public enum WebhookResponse: Sendable, Hashable {
    /// The endpoint answered (any status); `bodyExcerpt` is the start of its body (at most `URLSessionWebhookSender.excerptBytesMax`).
    case answered(status: Int, bodyExcerpt: String)
    /// No answer: the deadline passed, the connection failed or was refused, the URL is unusable.
    case failed(reason: String)

    /// 2xx: the endpoint has the event.
    public var isDelivered: Bool {
        if case .answered(let status, _) = self { return (200...299).contains(status) }
        return false
    }
}

/// Sends webhook requests. Two implementations: `URLSessionWebhookSender`, and the tests' own.
public protocol WebhookSender: Sendable {
    /// Sends `request` once (no redirects followed, no retries: the worker retries on its schedule). Never throws:
    /// every failure is a `WebhookResponse`.
    func send(_ request: WebhookRequest) async -> WebhookResponse
}

/// The real sender: one ephemeral URLSession (no cookies, no cache, no redirects followed: a 3xx is an answer like
/// any other non-2xx), a deadline on the whole exchange (`URLRequest.timeoutInterval` only bounds the gaps between
/// packets), and at most `excerptBytesMax` of an answer kept (the rest is read and dropped until the deadline).
public final class URLSessionWebhookSender: WebhookSender {
    private let session: URLSession
    private let exchanges: WebhookExchanges

    public init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpCookieAcceptPolicy = .never
        configuration.httpShouldSetCookies = false
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let exchanges = WebhookExchanges()
        self.exchanges = exchanges
        session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    public func send(_ request: WebhookRequest) async -> WebhookResponse {
        guard let url = URL(string: request.url) else { return .failed(reason: "invalid URL") }
        let timeoutMs = min(max(1, request.timeoutMs), Int64(Int32.max))
        var urlRequest = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: Double(timeoutMs) / 1000)
        urlRequest.httpMethod = "POST"
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        urlRequest.httpBody = Data(request.body)
        let task = session.dataTask(with: urlRequest)
        let id = task.taskIdentifier
        let exchanges = self.exchanges
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<WebhookResponse, Never>) in
                exchanges.begin(id, continuation: continuation)
                exchanges.attach(id, deadline: Task {
                    guard (try? await Task.sleep(nanoseconds: UInt64(timeoutMs) * 1_000_000)) != nil else { return }
                    if exchanges.fail(id, reason: "timed out after \(timeoutMs) ms") { task.cancel() }
                })
                task.resume()
                if Task.isCancelled, exchanges.fail(id, reason: "cancelled") { task.cancel() }
            }
        } onCancel: {
            if exchanges.fail(id, reason: "cancelled") { task.cancel() }
        }
    }
}

/// Per-task state of the sender's exchanges, keyed by task identifier; each ends in `didCompleteWithError`, which
/// resumes its continuation exactly once.
final class WebhookExchanges: NSObject, URLSessionDataDelegate, Sendable {
    private struct Exchange {
        var continuation: CheckedContinuation<WebhookResponse, Never>
        var deadline: Task<Void, Never>? = nil
        var excerpt: [UInt8] = []
        /// Set by the deadline or a cancellation before cancelling the task: it wins over the `cancelled` error that follows.
        var failure: String? = nil
    }

    private let exchanges = Mutex<[Int: Exchange]>([:])

    func begin(_ id: Int, continuation: CheckedContinuation<WebhookResponse, Never>) {
        exchanges.withLock { $0[id] = Exchange(continuation: continuation) }
    }

    func attach(_ id: Int, deadline: Task<Void, Never>) {
        let attached = exchanges.withLock { all -> Bool in
            guard all[id] != nil else { return false }
            all[id]?.deadline = deadline
            return true
        }
        if !attached { deadline.cancel() }
    }

    /// Records why the exchange is abandoned. False when it already ended or already failed.
    func fail(_ id: Int, reason: String) -> Bool {
        exchanges.withLock { all in
            guard all[id] != nil, all[id]?.failure == nil else { return false }
            all[id]?.failure = reason
            return true
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        exchanges.withLock { all in
            guard var exchange = all[dataTask.taskIdentifier] else { return }
            let room = URLSessionWebhookSender.excerptBytesMax - exchange.excerpt.count
            if room > 0 {
                all[dataTask.taskIdentifier] = nil
                exchange.excerpt.append(contentsOf: data.prefix(room))
                all[dataTask.taskIdentifier] = exchange
            }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let exchange = exchanges.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        exchange.deadline?.cancel()
        let response: WebhookResponse
        if let failure = exchange.failure {
            response = .failed(reason: failure)
        } else if let error {
            response = .failed(reason: Self.reason(error))
        } else if let http = task.response as? HTTPURLResponse {
            response = .answered(status: http.statusCode, bodyExcerpt: String(decoding: exchange.excerpt, as: UTF8.self))
        } else {
            response = .failed(reason: "no HTTP response")
        }
        exchange.continuation.resume(returning: response)
    }

    /// A short reason, never the URL's query or a header.
    static func reason(_ error: any Error) -> String {
        guard let urlError = error as? URLError else { return "network error" }
        switch urlError.code {
        case .timedOut: return "timed out"
        case .cannotConnectToHost: return "cannot connect to host"
        case .cannotFindHost, .dnsLookupFailed: return "cannot find host"
        case .networkConnectionLost: return "connection lost"
        case .notConnectedToInternet: return "not connected"
        case .secureConnectionFailed, .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateHasUnknownRoot,
            .serverCertificateNotYetValid:
            return "TLS failure"
        case .badServerResponse: return "bad server response"
        default: return "URLError \(urlError.code.rawValue)"
        }
    }
}
