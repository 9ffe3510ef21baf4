internal import CCurl
import Foundation
import Synchronization

/// A lean HTTP/1.1 client for many small requests to a few hosts: libcurl's multi interface on one thread of its own
/// (`http-client`, never Swift's cooperative pool), connections kept alive between requests and reused by any later
/// request to the same host. Redirects are never followed (a 3xx is an answer like any other), no cookies, no
/// cache, no `Expect: 100-continue` wait; `http` and `https` only (https checked against the system's CA store).
///
/// Bounded: the requests queued or in flight (`requestsMax`, beyond which `send` answers `.failed` at once), the
/// connections kept (`connectionsKeptMax`), the answer's body kept per request (`Request.answerBytesMax`; the rest is
/// read and dropped until the deadline), and each exchange's time (`Request.timeoutMs`, on the whole exchange).
public final class HTTPClient: Sendable {
    public struct Options: Sendable {
        /// Requests queued or in flight at once; beyond it `send` fails at once.
        public var requestsMax = 4_096
        /// Idle connections kept for reuse (all hosts together).
        public var connectionsKeptMax = 64
        /// The longest the client's thread waits in one poll (libcurl shortens it to its own next timeout). Nothing
        /// needs it to wake: a queued request wakes it. It bounds what a lost wake-up could cost, so that an idle
        /// client checks its queue once in this much at least; 1...2^31-1.
        public var pollWaitMsMax: Int32 = 1_000
        public init() {}
    }

    /// One request: a method with an optional body, the exchange's deadline and how much of the answer to keep.
    public struct Request: Sendable, Hashable {
        public var method: String
        public var url: String
        public var headers: [String: String]
        public var body: [UInt8]
        /// The whole exchange's deadline (connecting, sending, waiting and reading); 1...2^31-1.
        public var timeoutMs: Int64
        /// Bytes of the answer's body kept.
        public var answerBytesMax: Int

        public init(method: String, url: String, headers: [String: String] = [:], body: [UInt8] = [], timeoutMs: Int64, answerBytesMax: Int) {
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.timeoutMs = timeoutMs
            self.answerBytesMax = answerBytesMax
        }
    }

    public enum Response: Sendable, Hashable {
        /// The server answered (any status); `body` is the start of its body (at most `answerBytesMax`).
        case answered(status: Int, body: [UInt8])
        /// No answer: the deadline passed, the connection failed or was refused, the URL is unusable, cancelled.
        case failed(reason: String)
    }

    private let engine: CurlEngine

    public init(options: Options = Options()) {
        precondition(options.requestsMax >= 1 && options.connectionsKeptMax >= 1, "a client sends and keeps something")
        precondition(options.pollWaitMsMax >= 1, "the client's thread waits a while at most")
        engine = CurlEngine(options: options)
        let engine = engine
        let thread = Thread { engine.run() }
        thread.name = "http-client"
        thread.start()
    }

    deinit { engine.close() }

    /// Sends `request` once and answers when the exchange ended (no retries). Cancelling the calling task ends the
    /// exchange with `.failed(reason: "cancelled")`.
    public func send(_ request: Request) async -> Response {
        let id = engine.nextId()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Response, Never>) in
                engine.submit(CurlExchange(id: id, request: request, completion: { continuation.resume(returning: $0) }))
                // Cancelled before it was queued: the handler's cancel found nothing to end.
                if Task.isCancelled { engine.cancel(id) }
            }
        } onCancel: {
            engine.cancel(id)
        }
    }

    /// Sends `request` once and calls `completion` with the answer on the client's thread when the exchange ended (or
    /// at once, on the caller's thread, when it cannot be queued), with no hop through Swift's cooperative pool: for a
    /// caller that starts its next request from there. `completion` must be short and must not block: every exchange
    /// of the client waits for it.
    public func send(_ request: Request, completion: @escaping @Sendable (Response) -> Void) {
        engine.submit(CurlExchange(id: engine.nextId(), request: request, completion: completion))
    }
}

/// One request on the client's thread: its easy handle, headers and what came back. Touched only by that thread once
/// submitted (the continuation is resumed exactly once, by `finish`).
final class CurlExchange: @unchecked Sendable {
    let id: Int
    let request: HTTPClient.Request
    private var completion: (@Sendable (HTTPClient.Response) -> Void)?
    var handle: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    var answer: [UInt8] = []

    init(id: Int, request: HTTPClient.Request, completion: @escaping @Sendable (HTTPClient.Response) -> Void) {
        self.id = id
        self.request = request
        self.completion = completion
    }

    func finish(_ response: HTTPClient.Response) {
        precondition(completion != nil, "an exchange ends once")
        let completion = completion
        self.completion = nil
        completion?(response)
    }
}

/// The multi handle and its thread's loop. Other threads only queue work (`submit`, `cancel`, `close`) under the lock
/// and wake the loop with `curl_multi_wakeup` when it waits (`polling`): work queued while it runs, or by its own
/// completions, is taken before it waits again, without a wake-up (a system call, and another on the thread's side).
final class CurlEngine: @unchecked Sendable {
    // @unchecked: `multi`, `running` and `idleHandles` are used only on the client's thread (and `multi`'s
    // wakeup, which libcurl makes safe from any thread); the rest is behind `state`'s lock.
    private struct Inbox {
        var submitted: [CurlExchange] = []
        var cancelled: [Int] = []
        var queuedOrRunning = 0
        var closed = false
        var lastId = 0
        /// The loop found the queues empty and waits in `curl_multi_poll` (or is about to): queued work must wake it,
        /// once. No wake-up is lost: the loop sets it in the same critical section that found the queues empty, so an
        /// item queued after that sees it set, unless the loop already cleared it (and takes the item in its next turn)
        /// or another item's `wakeIfPolling` did (whose `curl_multi_wakeup` follows: libcurl keeps a wake-up sent
        /// before the poll began in its wake-up socket, and the poll returns at once). A wake-up arriving after the
        /// poll returned costs one more turn, never a wait.
        var polling = false
    }

    private let options: HTTPClient.Options
    private let state = Mutex(Inbox())
    private let multi: UnsafeMutableRawPointer
    private var running: [Int: CurlExchange] = [:]
    private var idleHandles: [UnsafeMutableRawPointer] = []
    /// Easy handles kept for reuse (their allocations; connections live in the multi handle's cache).
    private static let idleHandlesMax = 64

    private static let globalInit: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    init(options: HTTPClient.Options) {
        precondition(Self.globalInit, "libcurl could not be initialised")
        self.options = options
        multi = curl_multi_init()
        _ = kakin_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, options.connectionsKeptMax)
    }

    func nextId() -> Int { state.withLock { $0.lastId += 1; return $0.lastId } }

    func submit(_ exchange: CurlExchange) {
        let refusal = state.withLock { s -> String? in
            if s.closed { return "the HTTP client is closed" }
            if s.queuedOrRunning >= options.requestsMax { return "too many requests in flight (\(options.requestsMax))" }
            s.queuedOrRunning += 1
            s.submitted.append(exchange)
            return nil
        }
        if let refusal { return exchange.finish(.failed(reason: refusal)) }
        wakeIfPolling()
    }

    func cancel(_ id: Int) {
        state.withLock { $0.cancelled.append(id) }
        wakeIfPolling()
    }

    func close() {
        state.withLock { $0.closed = true }
        wakeIfPolling()
    }

    /// Wakes the loop if it waits; the first of several queued items does, the others find it awake.
    private func wakeIfPolling() {
        let wake = state.withLock { s in
            defer { s.polling = false }
            return s.polling
        }
        if wake { curl_multi_wakeup(multi) }
    }

    /// The client thread's loop: start what was submitted, drive the transfers, finish what ended, wait for sockets
    /// (or a wakeup, or libcurl's next timeout). Returns once closed and every exchange ended.
    func run() {
        while true {
            let (submitted, cancelled, closed) = state.withLock { s in
                defer { s.submitted.removeAll(keepingCapacity: true); s.cancelled.removeAll(keepingCapacity: true) }
                return (s.submitted, s.cancelled, s.closed)
            }
            for exchange in submitted { start(exchange) }
            for id in cancelled { if let exchange = running[id] { end(exchange, .failed(reason: "cancelled")) } }
            if closed {
                for exchange in Array(running.values) { end(exchange, .failed(reason: "the HTTP client is closed")) }
                break
            }
            var stillRunning: Int32 = 0
            curl_multi_perform(multi, &stillRunning)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle else { continue }
                let code = message.pointee.data.result
                var pointer: UnsafeMutableRawPointer?
                _ = kakin_curl_easy_getinfo_pointer(handle, CURLINFO_PRIVATE, &pointer)
                guard let pointer, let exchange = running[Int(bitPattern: pointer)] else { continue }
                if code == CURLE_OK {
                    var status = 0
                    _ = kakin_curl_easy_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
                    end(exchange, .answered(status: status, body: exchange.answer))
                } else {
                    end(exchange, .failed(reason: Self.reason(code, timeoutMs: exchange.request.timeoutMs)))
                }
            }
            // Waits only with nothing queued: what came in while the loop ran (its completions' next requests among
            // it) is taken at once, and a later `submit` sees `polling` and wakes it. The wait is bounded all the same
            // (`pollWaitMsMax`), so even a wake-up libcurl failed to deliver would cost a second, not an exchange.
            let wait = state.withLock { s in
                s.polling = s.submitted.isEmpty && s.cancelled.isEmpty && !s.closed
                return s.polling
            }
            if wait {
                curl_multi_poll(multi, nil, 0, options.pollWaitMsMax, nil)
                state.withLock { $0.polling = false }
            }
        }
        for handle in idleHandles { curl_easy_cleanup(handle) }
        idleHandles.removeAll()
        curl_multi_cleanup(multi)
    }

    private func start(_ exchange: CurlExchange) {
        let request = exchange.request
        guard let handle = idleHandles.popLast() ?? curl_easy_init() else { return finishUnstarted(exchange, "out of memory") }
        exchange.handle = handle
        running[exchange.id] = exchange
        var ok = kakin_curl_easy_setopt_pointer(handle, CURLOPT_PRIVATE, UnsafeRawPointer(bitPattern: exchange.id)) == CURLE_OK
        ok = ok && request.url.withCString { kakin_curl_easy_setopt_pointer(handle, CURLOPT_URL, $0) } == CURLE_OK
        ok = ok && "http,https".withCString { kakin_curl_easy_setopt_pointer(handle, CURLOPT_PROTOCOLS_STR, $0) } == CURLE_OK
        ok = ok && kakin_curl_easy_setopt_long(handle, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1)) == CURLE_OK
        ok = ok && kakin_curl_easy_setopt_long(handle, CURLOPT_NOSIGNAL, 1) == CURLE_OK
        ok = ok && kakin_curl_easy_setopt_long(handle, CURLOPT_TIMEOUT_MS, Int(min(max(1, request.timeoutMs), Int64(Int32.max)))) == CURLE_OK
        if request.method == "POST" || !request.body.isEmpty {
            ok = ok && kakin_curl_easy_setopt_long(handle, CURLOPT_POSTFIELDSIZE, request.body.count) == CURLE_OK
            ok = ok && (request.body.isEmpty
                ? "".withCString { kakin_curl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, $0) }
                : request.body.withUnsafeBytes { kakin_curl_easy_setopt_pointer(handle, CURLOPT_COPYPOSTFIELDS, $0.baseAddress) }) == CURLE_OK
        }
        if request.method != "GET" && request.method != "POST" {
            ok = ok && request.method.withCString { kakin_curl_easy_setopt_pointer(handle, CURLOPT_CUSTOMREQUEST, $0) } == CURLE_OK
        }
        // No `Expect: 100-continue` wait before a body over 1 KiB (a full round trip, or a second, for nothing).
        var list: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Expect:")
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
            guard !name.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 58 }), !value.utf8.contains(where: { $0 == 13 || $0 == 10 }) else {
                ok = false
                break
            }
            list = curl_slist_append(list, "\(name): \(value)")
        }
        exchange.headerList = list
        ok = ok && list != nil && kakin_curl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, list) == CURLE_OK
        ok = ok && kakin_curl_easy_setopt_write_function(handle, { data, size, count, context in
            let bytes = size * count
            guard let data, let context else { return bytes }
            let exchange = Unmanaged<CurlExchange>.fromOpaque(context).takeUnretainedValue()
            let room = exchange.request.answerBytesMax - exchange.answer.count
            if room > 0 {
                exchange.answer.append(contentsOf: UnsafeRawBufferPointer(start: data, count: min(room, bytes)))
            }
            return bytes
        }) == CURLE_OK
        ok = ok && kakin_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(exchange).toOpaque()) == CURLE_OK
        guard ok, curl_multi_add_handle(multi, handle) == CURLM_OK else {
            return end(exchange, .failed(reason: "invalid request"), added: false)
        }
    }

    private func finishUnstarted(_ exchange: CurlExchange, _ reason: String) {
        state.withLock { $0.queuedOrRunning -= 1 }
        exchange.finish(.failed(reason: reason))
    }

    /// Takes the exchange off the multi handle, keeps its easy handle for the next request, and answers.
    private func end(_ exchange: CurlExchange, _ response: HTTPClient.Response, added: Bool = true) {
        running[exchange.id] = nil
        if let handle = exchange.handle {
            if added { curl_multi_remove_handle(multi, handle) }
            curl_easy_reset(handle)
            if idleHandles.count < Self.idleHandlesMax { idleHandles.append(handle) } else { curl_easy_cleanup(handle) }
            exchange.handle = nil
        }
        curl_slist_free_all(exchange.headerList)
        exchange.headerList = nil
        state.withLock { $0.queuedOrRunning -= 1 }
        exchange.finish(response)
    }

    /// A short reason, never the URL or a header.
    static func reason(_ code: CURLcode, timeoutMs: Int64) -> String {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: return "timed out after \(timeoutMs) ms"
        case CURLE_COULDNT_CONNECT: return "cannot connect to host"
        case CURLE_COULDNT_RESOLVE_HOST: return "cannot find host"
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT: return "invalid URL"
        case CURLE_GOT_NOTHING, CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE: return "connection lost"
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE:
            return "TLS failure"
        case CURLE_WEIRD_SERVER_REPLY: return "bad server response"
        default: return "network error (curl \(code.rawValue))"
        }
    }
}
