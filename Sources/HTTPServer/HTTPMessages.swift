/// A fully received HTTP request, handed to an ``HTTPHandler``.
public struct HTTPRequest: Sendable {
    /// The method as sent, e.g. "GET".
    public var method: String
    /// The percent-decoded path without the query.
    public var path: String
    /// The path exactly as received, without the query; the router splits this so that an
    /// encoded "/" (`%2F`) stays inside its segment.
    public var rawPath: String
    /// Decoded query parameters; when a name repeats, the last value wins (see ``queryItems``).
    public var query: [String: String]
    /// Decoded query parameters in order, repeats kept. A name without "=" has the value "".
    public var queryItems: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Assigned by the server, unique within the process; echoed as `X-Request-Id`.
    public var requestId: String
    /// The peer's IP address ("127.0.0.1", "::1"), when known.
    public var remoteAddress: String?

    /// Builds a request; `path`, `query` and `queryItems` are given as already decoded.
    /// Useful to call handlers and routers in-process, without a socket.
    public init(
        method: String,
        path: String,
        rawPath: String? = nil,
        queryItems: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [],
        requestId: String = "req_local",
        remoteAddress: String? = nil
    ) {
        self.method = method
        self.path = path
        self.rawPath = rawPath ?? path
        self.queryItems = queryItems
        var query: [String: String] = [:]
        for item in queryItems { query[item.name] = item.value }
        self.query = query
        self.headers = headers
        self.body = body
        self.requestId = requestId
        self.remoteAddress = remoteAddress
    }
}

/// What a handler answers. The server adds `Content-Length` and, unless already set,
/// `X-Request-Id`; a `Content-Length` or `Transfer-Encoding` set here is ignored.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A `text/plain; charset=utf-8` response.
    public static func text(_ text: String, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Array(text.utf8))
    }

    /// An `application/json; charset=utf-8` response from already encoded bytes.
    public static func json(_ bytes: [UInt8], status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json; charset=utf-8"], body: bytes)
    }
}

/// Answers one request. Runs as a Swift task, never on a libmicrohttpd thread.
public typealias HTTPHandler = @Sendable (HTTPRequest) async -> HTTPResponse

/// What the server itself rejects before or around the handler; the embedding app turns each
/// into its own error body through an ``HTTPRejectionResponder``.
public enum HTTPServerRejection: Sendable, Equatable {
    /// The body is, or declared itself, larger than ``HTTPServerConfiguration/bodyBytesMax``.
    case bodyTooLarge(limitBytes: Int)
    /// The handler did not answer within ``HTTPServerConfiguration/requestTimeoutSeconds``.
    case requestTimeout
    /// The server is shutting down.
    case serviceUnavailable
    /// The request could not be understood, e.g. malformed percent-encoding in the path or query.
    case badRequest
    /// ``HTTPServerConfiguration/handlersMax`` handlers are running; retry shortly.
    case overloaded
    /// The request line and headers exceed ``HTTPServerConfiguration/headerBytesMax``.
    case headersTooLarge(limitBytes: Int)
    /// The request target exceeds ``HTTPServerConfiguration/targetBytesMax``.
    case uriTooLong(limitBytes: Int)

    /// The status code these usually map to: 413, 504, 503, 400, 503, 431, 414.
    public var suggestedStatus: Int {
        switch self {
        case .bodyTooLarge: 413
        case .requestTimeout: 504
        case .serviceUnavailable, .overloaded: 503
        case .badRequest: 400
        case .headersTooLarge: 431
        case .uriTooLong: 414
        }
    }
}

/// Builds the response for a rejection. Called synchronously on a server thread: keep it cheap
/// and non-blocking.
public typealias HTTPRejectionResponder = @Sendable (HTTPServerRejection, _ requestId: String) -> HTTPResponse
