import KakinCore
import KakinCrypto
import KakinHTTPClient

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
    /// The endpoint answered (any status); `bodyExcerpt` is the start of its body (at most `HTTPWebhookSender.excerptBytesMax`).
    case answered(status: Int, bodyExcerpt: String)
    /// No answer: the deadline passed, the connection failed or was refused, the URL is unusable.
    case failed(reason: String)

    /// 2xx: the endpoint has the event.
    public var isDelivered: Bool {
        if case .answered(let status, _) = self { return (200...299).contains(status) }
        return false
    }
}

/// Sends webhook requests. Two implementations: `HTTPWebhookSender`, and the tests' own.
public protocol WebhookSender: Sendable {
    /// Sends `request` once (no redirects followed, no retries: the worker retries on its schedule). Never throws:
    /// every failure is a `WebhookResponse`.
    func send(_ request: WebhookRequest) async -> WebhookResponse

    /// The same, answering through `completion` (short, never blocking) on whatever thread the exchange ended on: the
    /// worker's way, so a delivery costs no task and no hop through the cooperative pool. By default a task awaits
    /// `send(_:)`.
    func send(_ request: WebhookRequest, completion: @escaping @Sendable (WebhookResponse) -> Void)
}

extension WebhookSender {
    public func send(_ request: WebhookRequest, completion: @escaping @Sendable (WebhookResponse) -> Void) {
        Task { completion(await send(request)) }
    }
}

/// The real sender: `KakinHTTPClient`'s HTTP/1.1 client (libcurl's multi interface on a thread of its own, connections
/// kept alive between deliveries; no cookies, no cache, no redirects followed: a 3xx is an answer like any other
/// non-2xx), a deadline on the whole exchange, and at most `excerptBytesMax` of an answer kept (the rest is read and
/// dropped until the deadline). It replaced URLSession, which cost ~700 µs of CPU per delivery here (issue 26).
public final class HTTPWebhookSender: WebhookSender {
    private let client: HTTPClient

    public init() {
        client = HTTPClient()
    }

    public func send(_ request: WebhookRequest) async -> WebhookResponse {
        Self.response(await client.send(Self.clientRequest(request)))
    }

    /// Answers on the client's thread (`HTTPClient.send(_:completion:)`).
    public func send(_ request: WebhookRequest, completion: @escaping @Sendable (WebhookResponse) -> Void) {
        client.send(Self.clientRequest(request)) { completion(Self.response($0)) }
    }

    private static func clientRequest(_ request: WebhookRequest) -> HTTPClient.Request {
        HTTPClient.Request(method: "POST", url: request.url, headers: request.headers, body: request.body, timeoutMs: request.timeoutMs,
                           answerBytesMax: excerptBytesMax)
    }

    private static func response(_ answer: HTTPClient.Response) -> WebhookResponse {
        switch answer {
        case .answered(let status, let body): .answered(status: status, bodyExcerpt: String(decoding: body, as: UTF8.self))
        case .failed(let reason): .failed(reason: reason)
        }
    }
}
