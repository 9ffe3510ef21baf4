/// Limits and sizing of an ``HTTPServer``. Every value is bounded; ``HTTPServer/start()``
/// rejects values out of range.
public struct HTTPServerConfiguration: Sendable {
    /// An IPv4 or IPv6 literal to bind; "localhost" means 127.0.0.1.
    public var host = "127.0.0.1"
    /// 0 binds an ephemeral port; read the bound one from ``HTTPServer/port`` after start.
    public var port = 8080
    /// Larger bodies are refused with `bodyTooLarge`: at once when `Content-Length` says so
    /// (the body is never read), otherwise as soon as a chunked body crosses the limit.
    public var bodyBytesMax = 1 << 20
    /// A larger (or smaller) body limit for requests to one exact path, such as an upload endpoint; checked the same way.
    public var bodyBytesMaxByPath: [String: Int] = [:]
    /// Request line and headers beyond this are refused with `headersTooLarge` (431). libmicrohttpd
    /// gets more per-connection memory than this (``connectionMemoryBytes``), so only heads past
    /// that get its own bare 431/414 instead of the embedder's answer.
    public var headerBytesMax = 16 * 1024
    /// A request target (path and query) longer than this is refused with `uriTooLong` (414).
    public var targetBytesMax = 8 * 1024
    /// Open connections at once, idle keep-alive ones included.
    public var connectionsMax = 1024
    /// A connection silent this long (while reading or writing) is closed.
    public var idleTimeoutSeconds = 30
    /// Deadline for a handler; later, the client gets `requestTimeout` and the late result is dropped.
    public var requestTimeoutSeconds = 30
    /// A request's head and body must arrive within this of its connection being ready for it
    /// (accepted, or its previous answer sent); a client that trickles bytes (which resets the idle
    /// timeout) is disconnected then, without an answer. Also bounds a kept-alive connection's wait.
    public var receiveTimeoutSeconds = 30
    /// Handlers running at once. A complete request beyond it is refused with `overloaded` (503)
    /// without running its handler: load past capacity costs a refusal, not a task and a held body.
    public var handlersMax = 256
    /// libmicrohttpd I/O threads (epoll each). Handlers run on Swift's pool, not on these.
    public var threadCount = 4

    public init(host: String = "127.0.0.1", port: Int = 8080) {
        self.host = host
        self.port = port
    }

    /// What libmicrohttpd may use per connection (read buffer, parsed headers, the answer's headers):
    /// room past ``headerBytesMax`` so that oversized heads reach our own refusal.
    var connectionMemoryBytes: Int { max(2 * headerBytesMax, headerBytesMax + 32 * 1024) }

    /// The first problem with these values, if any.
    func validationProblem() -> String? {
        if !(0...65_535).contains(port) { return "port \(port) is outside 0...65535" }
        if !(1...(1 << 30)).contains(bodyBytesMax) { return "bodyBytesMax \(bodyBytesMax) is outside 1...\(1 << 30)" }
        if let (path, limit) = bodyBytesMaxByPath.first(where: { !(1...(1 << 30)).contains($0.value) }) {
            return "bodyBytesMaxByPath[\(path)] \(limit) is outside 1...\(1 << 30)"
        }
        if !(4 * 1024...(1 << 20)).contains(headerBytesMax) {
            return "headerBytesMax \(headerBytesMax) is outside 4096...\(1 << 20)"
        }
        if !(1...65_536).contains(connectionsMax) { return "connectionsMax \(connectionsMax) is outside 1...65536" }
        if !(1...86_400).contains(idleTimeoutSeconds) {
            return "idleTimeoutSeconds \(idleTimeoutSeconds) is outside 1...86400"
        }
        if !(1...86_400).contains(requestTimeoutSeconds) {
            return "requestTimeoutSeconds \(requestTimeoutSeconds) is outside 1...86400"
        }
        if !(1...256).contains(threadCount) { return "threadCount \(threadCount) is outside 1...256" }
        if !(256...headerBytesMax).contains(targetBytesMax) {
            return "targetBytesMax \(targetBytesMax) is outside 256...headerBytesMax (\(headerBytesMax))"
        }
        if !(1...86_400).contains(receiveTimeoutSeconds) {
            return "receiveTimeoutSeconds \(receiveTimeoutSeconds) is outside 1...86400"
        }
        if !(1...65_536).contains(handlersMax) { return "handlersMax \(handlersMax) is outside 1...65536" }
        return nil
    }
}
