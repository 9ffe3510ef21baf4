internal import CMicroHTTPD
import Dispatch
import Glibc
import Synchronization

/// One request, from its headers until libmicrohttpd reports it completed. Travels in MHD's
/// `*con_cls` (retained there, released in the completion callback) and in the handler task.
final class PendingRequest: @unchecked Sendable {
    enum Phase {
        case receivingBody
        case awaitingResponse
    }

    let serial: UInt64
    let requestId: String
    let connection: OpaquePointer
    /// The TCP connection this request came on (nil only if MHD did not report it started).
    let connectionState: ConnectionState?

    // Touched only from MHD callbacks of this connection, which MHD serialises.
    var phase = Phase.receivingBody
    var request: HTTPRequest?
    var bodyBytesReceived = 0
    var bodyTooLarge = false
    /// This request's body limit: the server's, or its path's (``HTTPServerConfiguration/bodyBytesMaxByPath``).
    var bodyBytesMax = 0
    /// Suspended and not yet seen again by MHD; counted in `ServerRuntime.suspendedCount`.
    var isSuspended = false

    /// Whether someone (handler, watchdog, shutdown) has answered the suspended request. Only the
    /// one who flips it may store `response` and resume the connection.
    private let answered = Atomic<Bool>(false)

    /// Written by the one who won `claimAnswer()`, just before `MHD_resume_connection`; read by
    /// the resumed callback. MHD's own locking around resume orders the write before the read.
    var response: HTTPResponse?

    init(serial: UInt64, connection: OpaquePointer, connectionState: ConnectionState?) {
        self.serial = serial
        self.requestId = RequestIdentifiers.identifier(forSerial: serial)
        self.connection = connection
        self.connectionState = connectionState
    }

    /// True exactly once: for the first caller, who must then answer and resume.
    func claimAnswer() -> Bool {
        !answered.exchange(true, ordering: .acquiringAndReleasing)
    }

    var isAnswered: Bool {
        answered.load(ordering: .acquiring)
    }
}

/// One TCP connection, from libmicrohttpd's "started" notification to its "closed" one. Travels in
/// MHD's `*socket_context` (retained there) and in `ServerRuntime.connections` for the watchdog.
final class ConnectionState: Sendable {
    let serial: UInt64
    let descriptor: Int32
    /// Uptime in ns by which the request now arriving must be complete (head and body); 0 while none
    /// is being received (its handler runs or its answer is being written).
    let receiveDeadlineNs: Atomic<UInt64>

    init(serial: UInt64, descriptor: Int32, receiveDeadlineNs: UInt64) {
        self.serial = serial
        self.descriptor = descriptor
        self.receiveDeadlineNs = Atomic(receiveDeadlineNs)
    }
}

/// Requests whose handler is running, for the watchdog and shutdown to find. Who answers is
/// decided by `PendingRequest.claimAnswer()`, not by this registry, so the lock is held only for
/// an insert or a removal and never around a syscall or user code.
struct PendingRegistry {
    struct Entry {
        let request: PendingRequest
        let deadlineNs: UInt64
        /// Cancelled when the request is answered without it, so the handler can stop early.
        let handlerTask: Task<Void, Never>
    }

    var entries: [UInt64: Entry] = [:]
    /// False once shutdown has answered the pending requests: no handler may start after that.
    var acceptsHandlers = true
}

/// The part of a running server that libmicrohttpd calls into. One per `start()`; its address is
/// the `void *` context of the daemon's callbacks, so it must outlive the daemon.
final class ServerRuntime: Sendable {
    /// How often the watchdog looks for handlers past their deadline; a timeout answer can be
    /// this late. One scan covers at most `connectionsMax` entries.
    static let watchdogTickMs = 100

    private let handler: HTTPHandler
    private let rejectionResponder: HTTPRejectionResponder
    private let bodyBytesMax: Int
    private let bodyBytesMaxByPath: [String: Int]
    /// Past the body limit we still read (and drop) this much of a body (chunked, or declared that long) so the client
    /// can be told 413; a client that keeps sending is disconnected.
    private let bodyDiscardBytesMax: Int
    private let requestTimeoutNs: UInt64
    private let receiveTimeoutNs: UInt64
    private let headerBytesMax: Int
    private let targetBytesMax: Int
    private let handlersMax: Int

    /// Handler tasks not yet finished (a timed-out handler counts until it returns).
    private let runningHandlers = Atomic<Int>(0)
    /// Open connections by serial. The lock is also held while the watchdog shuts a socket down, and
    /// MHD reports a connection closed before it closes its socket: so a descriptor found here is
    /// still that connection's.
    private let connections = Mutex<[UInt64: ConnectionState]>([:])
    private let connectionSerial = Atomic<UInt64>(0)

    /// Requests between their first callback and MHD's completion callback.
    let inFlight = Atomic<Int>(0)
    /// Connections suspended and not yet seen again by MHD after resume. Shutdown waits for zero:
    /// stopping the daemon with a suspended connection is undefined behaviour in MHD.
    private let suspendedCount = Atomic<Int>(0)
    /// False once shutdown has begun: requests whose headers arrive later get `serviceUnavailable`.
    private let acceptsRequests = Atomic<Bool>(true)
    /// Mirrors `PendingRegistry.acceptsHandlers`, so a refused request is usually caught before
    /// its handler task is even created.
    private let acceptsHandlers = Atomic<Bool>(true)
    private let registry: Mutex<PendingRegistry>
    /// Serial, so it gets its own thread: runs the watchdog and the blocking `MHD_stop_daemon`,
    /// neither of which may occupy Swift's small cooperative pool.
    private let controlQueue = DispatchQueue(label: "kakin.http.control")
    private let watchdog = Mutex<WatchdogTimer?>(nil)

    init(configuration: HTTPServerConfiguration, handler: @escaping HTTPHandler,
         rejectionResponder: @escaping HTTPRejectionResponder) {
        self.handler = handler
        self.rejectionResponder = rejectionResponder
        bodyBytesMax = configuration.bodyBytesMax
        bodyBytesMaxByPath = configuration.bodyBytesMaxByPath
        bodyDiscardBytesMax = max(configuration.bodyBytesMax, 1 << 20)
        requestTimeoutNs = UInt64(configuration.requestTimeoutSeconds) * 1_000_000_000
        receiveTimeoutNs = UInt64(configuration.receiveTimeoutSeconds) * 1_000_000_000
        headerBytesMax = configuration.headerBytesMax
        targetBytesMax = configuration.targetBytesMax
        handlersMax = configuration.handlersMax
        var registry = PendingRegistry()
        registry.entries.reserveCapacity(configuration.connectionsMax)
        self.registry = Mutex(registry)
    }

    // MARK: - libmicrohttpd callbacks

    /// `MHD_AccessHandlerCallback`: called with the headers, once per body chunk, once when the
    /// body is complete, and once more after the connection is resumed.
    func handleAccess(
        connection: OpaquePointer,
        url: UnsafePointer<CChar>,
        method: UnsafePointer<CChar>,
        uploadData: UnsafePointer<CChar>?,
        uploadDataSize: UnsafeMutablePointer<Int>,
        context: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let opaque = context.pointee else {
            let connectionState = kakin_mhd_socket_context(connection).map {
                Unmanaged<ConnectionState>.fromOpaque($0).takeUnretainedValue()
            }
            let pending = PendingRequest(serial: RequestIdentifiers.nextSerial(), connection: connection,
                                         connectionState: connectionState)
            context.pointee = Unmanaged.passRetained(pending).toOpaque()
            inFlight.add(1, ordering: .relaxed)
            if let rejection = readHead(of: pending, url: url, method: method) {
                // Answering before the body is read makes MHD skip the body and close the connection.
                pending.connectionState?.receiveDeadlineNs.store(0, ordering: .relaxed)
                return queue(rejectionResponder(rejection, pending.requestId), for: pending)
            }
            return .YES
        }
        let pending = Unmanaged<PendingRequest>.fromOpaque(opaque).takeUnretainedValue()
        switch pending.phase {
        case .receivingBody:
            let chunkBytes = uploadDataSize.pointee
            if chunkBytes > 0 {
                uploadDataSize.pointee = 0
                return receiveBodyChunk(uploadData, count: chunkBytes, into: pending)
            }
            return dispatchToHandler(pending)
        case .awaitingResponse:
            markResumed(pending)
            guard let response = pending.response.take() else { return .NO }
            return queue(response, for: pending)
        }
    }

    /// `MHD_RequestCompletedCallback`: the response was sent, or the connection failed.
    func requestCompleted(context: UnsafeMutablePointer<UnsafeMutableRawPointer?>) {
        guard let opaque = context.pointee else { return }
        context.pointee = nil
        let pending = Unmanaged<PendingRequest>.fromOpaque(opaque).takeRetainedValue()
        // A client that left while suspended is noticed on resume: MHD then closes the
        // connection without calling the access handler again.
        markResumed(pending)
        // A kept-alive connection has this long again for its next request.
        pending.connectionState?.receiveDeadlineNs.store(DispatchTime.now().uptimeNanoseconds + receiveTimeoutNs, ordering: .relaxed)
        inFlight.subtract(1, ordering: .relaxed)
    }

    /// `MHD_NotifyConnectionCallback`: a connection opened or closed.
    func connectionChanged(connection: OpaquePointer, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>,
                           started: Bool) {
        if started {
            let state = ConnectionState(
                serial: connectionSerial.add(1, ordering: .relaxed).newValue, descriptor: kakin_mhd_connection_fd(connection),
                receiveDeadlineNs: DispatchTime.now().uptimeNanoseconds + receiveTimeoutNs)
            socketContext.pointee = Unmanaged.passRetained(state).toOpaque()
            connections.withLock { $0[state.serial] = state }
            return
        }
        guard let opaque = socketContext.pointee else { return }
        socketContext.pointee = nil
        let state = Unmanaged<ConnectionState>.fromOpaque(opaque).takeRetainedValue()
        connections.withLock { _ = $0.removeValue(forKey: state.serial) }
    }

    private func markResumed(_ pending: PendingRequest) {
        guard pending.isSuspended else { return }
        pending.isSuspended = false
        suspendedCount.subtract(1, ordering: .relaxed)
    }

    // MARK: - Request flow

    /// The path of a request target (without its query, which libmicrohttpd has split off): the origin form
    /// (`/a/b`) as is; the absolute form a client must be able to send (`http://host/a/b`, RFC 9112 §3.2.2)
    /// without its scheme and authority; nil for anything else (`a/b`, `*`), which would otherwise be
    /// routed as if it began with a slash.
    static func originPath(of target: String) -> String? {
        if target.hasPrefix("/") { return target }
        let lowered = target.lowercased()
        guard let scheme = ["http://", "https://"].first(where: { lowered.hasPrefix($0) }) else { return nil }
        let authorityAndPath = target.dropFirst(scheme.count)
        guard let slash = authorityAndPath.firstIndex(of: "/") else { return authorityAndPath.isEmpty ? nil : "/" }
        return authorityAndPath.distance(from: authorityAndPath.startIndex, to: slash) == 0 ? nil : String(authorityAndPath[slash...])
    }

    /// Builds the request from what arrived with the headers; returns why to refuse it, if so.
    private func readHead(
        of pending: PendingRequest,
        url: UnsafePointer<CChar>,
        method: UnsafePointer<CChar>
    ) -> HTTPServerRejection? {
        if !acceptsRequests.load(ordering: .relaxed) { return .serviceUnavailable }
        guard let target = String(validatingCString: url), let rawPath = Self.originPath(of: target),
              let path = PercentDecoding.decode(rawPath) else {
            return .badRequest
        }
        let connection = pending.connection
        var headers = HTTPHeaders()
        withUnsafeMutablePointer(to: &headers) { headersPointer in
            _ = MHD_get_connection_values_n(connection, .HEADER_KIND, { cls, _, key, keyBytes, value, valueBytes in
                let headers = cls!.assumingMemoryBound(to: HTTPHeaders.self)
                headers.pointee.add(makeString(key, keyBytes), makeString(value, valueBytes))
                return .YES
            }, headersPointer)
        }
        var query = QueryCollector()
        withUnsafeMutablePointer(to: &query) { queryPointer in
            _ = MHD_get_connection_values_n(connection, .GET_ARGUMENT_KIND, { cls, _, key, keyBytes, value, valueBytes in
                let query = cls!.assumingMemoryBound(to: QueryCollector.self)
                return query.pointee.add(key: key, keyBytes, value: value, valueBytes) ? .YES : .NO
            }, queryPointer)
        }
        if query.isMalformed { return .badRequest }
        // libmicrohttpd refuses heads past its connection memory itself (HTML, no request ID); it has
        // room beyond these limits, so most oversized heads get the embedder's answer here instead.
        if rawPath.utf8.count + query.rawBytes > targetBytesMax { return .uriTooLong(limitBytes: targetBytesMax) }
        if kakin_mhd_request_header_bytes(connection) > headerBytesMax { return .headersTooLarge(limitBytes: headerBytesMax) }
        let declaredBodyBytes = headers["Content-Length"].flatMap { Int($0) } ?? 0
        pending.bodyBytesMax = bodyBytesMaxByPath[path] ?? bodyBytesMax
        if declaredBodyBytes > pending.bodyBytesMax {
            // Answered before the body is read, a client still sending would find the connection closed (a broken pipe,
            // not the 413): a body within what we discard anyway is read and dropped first, like a chunked one.
            guard declaredBodyBytes - pending.bodyBytesMax <= bodyDiscardBytesMax else { return .bodyTooLarge(limitBytes: pending.bodyBytesMax) }
            pending.bodyTooLarge = true
        }

        var request = HTTPRequest(
            method: String(cString: method), path: path, rawPath: rawPath, queryItems: query.items,
            headers: headers, requestId: pending.requestId, remoteAddress: remoteAddress(of: connection))
        // Reserve only part of a large declared body: a client must send bytes to make us hold them.
        if !pending.bodyTooLarge { request.body.reserveCapacity(min(declaredBodyBytes, Self.bodyReserveBytesMax)) }
        pending.request = request
        return nil
    }

    private func receiveBodyChunk(_ data: UnsafePointer<CChar>?, count: Int, into pending: PendingRequest) -> MHD_Result {
        pending.bodyBytesReceived += count
        if !pending.bodyTooLarge, pending.bodyBytesReceived <= pending.bodyBytesMax, let data {
            pending.request?.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: count))
            return .YES
        }
        if !pending.bodyTooLarge {
            pending.bodyTooLarge = true
            pending.request?.body = []
        }
        // MHD cannot answer until the whole body is read; past this much, drop the connection.
        return pending.bodyBytesReceived - pending.bodyBytesMax <= bodyDiscardBytesMax ? .YES : .NO
    }

    /// The body is complete: suspend the connection and run the handler as a Swift task.
    private func dispatchToHandler(_ pending: PendingRequest) -> MHD_Result {
        pending.connectionState?.receiveDeadlineNs.store(0, ordering: .relaxed)
        if pending.bodyTooLarge {
            return queue(rejectionResponder(.bodyTooLarge(limitBytes: pending.bodyBytesMax), pending.requestId), for: pending)
        }
        if !acceptsHandlers.load(ordering: .relaxed) {
            return queue(rejectionResponder(.serviceUnavailable, pending.requestId), for: pending)
        }
        // Beyond `handlersMax` a request costs a refusal, not a task and a held body.
        if runningHandlers.add(1, ordering: .relaxed).newValue > handlersMax {
            runningHandlers.subtract(1, ordering: .relaxed)
            pending.request = nil
            return queue(rejectionResponder(.overloaded, pending.requestId), for: pending)
        }
        guard let request = pending.request.take() else {
            runningHandlers.subtract(1, ordering: .relaxed)
            return .NO
        }
        pending.phase = .awaitingResponse
        // Suspend before the request becomes visible to anyone who might resume it.
        pending.isSuspended = true
        suspendedCount.add(1, ordering: .relaxed)
        MHD_suspend_connection(pending.connection)
        let deadlineNs = DispatchTime.now().uptimeNanoseconds + requestTimeoutNs
        let handler = handler
        let handlerTask = Task {
            defer { self.runningHandlers.subtract(1, ordering: .relaxed) }
            // Refused between task creation and registration (shutdown): the handler must not run.
            guard !pending.isAnswered else { return }
            let response = await handler(request)
            self.finish(pending, with: response)
        }
        // The handler may already have finished; then this entry is stale and the next watchdog tick
        // drops it.
        let accepted = registry.withLock { registry in
            guard registry.acceptsHandlers else { return false }
            registry.entries[pending.serial] = PendingRegistry.Entry(
                request: pending, deadlineNs: deadlineNs, handlerTask: handlerTask)
            return true
        }
        if !accepted {
            handlerTask.cancel()
            answer(pending, with: .serviceUnavailable)
        }
        return .YES
    }

    /// Hands a handler's response to MHD, unless the request was already answered (timeout,
    /// shutdown); then the late response is dropped.
    private func finish(_ pending: PendingRequest, with response: HTTPResponse) {
        guard pending.claimAnswer() else { return }
        pending.response = response
        MHD_resume_connection(pending.connection)
        registry.withLock { _ = $0.entries.removeValue(forKey: pending.serial) }
    }

    /// Answers a suspended request with `rejection`, unless someone answered it already.
    private func answer(_ pending: PendingRequest, with rejection: HTTPServerRejection) {
        guard pending.claimAnswer() else { return }
        pending.response = rejectionResponder(rejection, pending.requestId)
        MHD_resume_connection(pending.connection)
    }

    /// Answers `entries` with `rejection`, cancels their handlers so they can stop early, and
    /// drops them from the registry.
    private func abandon(_ entries: [PendingRegistry.Entry], with rejection: HTTPServerRejection) {
        guard !entries.isEmpty else { return }
        for entry in entries {
            answer(entry.request, with: rejection)
            entry.handlerTask.cancel()
        }
        registry.withLock { registry in
            for entry in entries { registry.entries.removeValue(forKey: entry.request.serial) }
        }
    }

    private func queue(_ response: HTTPResponse, for pending: PendingRequest) -> MHD_Result {
        let mhdResponse = response.body.withUnsafeBytes { body in
            MHD_create_response_from_buffer(body.count, UnsafeMutableRawPointer(mutating: body.baseAddress),
                                            .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        var hasRequestId = false
        for field in response.headers {
            // MHD computes framing itself and refuses these.
            if HTTPHeaders.namesMatch(field.name, "Content-Length")
                || HTTPHeaders.namesMatch(field.name, "Transfer-Encoding") { continue }
            if HTTPHeaders.namesMatch(field.name, "X-Request-Id") { hasRequestId = true }
            // MHD refuses values with CR or LF; such a header is dropped rather than failing the response.
            _ = MHD_add_response_header(mhdResponse, field.name, field.value)
        }
        if !hasRequestId {
            _ = MHD_add_response_header(mhdResponse, "X-Request-Id", pending.requestId)
        }
        let status = (200...599).contains(response.status) ? response.status : 500
        return MHD_queue_response(pending.connection, UInt32(status), mhdResponse)
    }

    // MARK: - Watchdog and shutdown

    /// One timer for all requests: answers those whose handler overran the deadline. This also
    /// bounds how long a connection stays suspended, which MHD itself never times out.
    func startWatchdog() {
        let timer = DispatchSource.makeTimerSource(queue: controlQueue)
        let tick = DispatchTimeInterval.milliseconds(Self.watchdogTickMs)
        timer.schedule(deadline: .now() + tick, repeating: tick, leeway: .milliseconds(Self.watchdogTickMs / 2))
        timer.setEventHandler { [self] in
            answerOverdueRequests()
            disconnectSlowSenders()
        }
        timer.resume()
        watchdog.withLock { $0 = WatchdogTimer(source: timer) }
    }

    /// Stops the watchdog, then the daemon (which joins MHD's threads and reports every open
    /// request completed). The caller must have answered all pending requests first.
    func stopDaemon(_ daemon: DaemonPointer) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            controlQueue.async { [self] in
                // On the control queue no watchdog tick can be running now.
                watchdog.withLock { $0.take() }?.source.cancel()
                MHD_stop_daemon(daemon.pointer)
                continuation.resume()
            }
        }
    }

    private func answerOverdueRequests() {
        let now = DispatchTime.now().uptimeNanoseconds
        // Also collects stale entries, of handlers that finished before their entry was inserted;
        // for those `abandon` only removes the entry.
        let overdue = registry.withLock { registry in
            registry.entries.values.filter { $0.deadlineNs <= now || $0.request.isAnswered }
        }
        abandon(overdue, with: .requestTimeout)
    }

    /// Disconnects clients whose request (head and body) has not fully arrived within
    /// `receiveTimeoutSeconds` of their connection being ready for it, e.g. one sending a byte a
    /// second: they would otherwise hold a connection (and MHD's idle timeout) forever. No answer
    /// is sent: MHD owns the socket's output. The next read MHD makes ends the connection.
    private func disconnectSlowSenders() {
        let now = DispatchTime.now().uptimeNanoseconds
        connections.withLock { connections in
            for state in connections.values {
                let deadline = state.receiveDeadlineNs.load(ordering: .relaxed)
                guard deadline != 0, deadline <= now, state.descriptor >= 0 else { continue }
                state.receiveDeadlineNs.store(0, ordering: .relaxed)
                Glibc.shutdown(state.descriptor, Int32(SHUT_RDWR))
            }
        }
    }

    /// From now on, requests whose headers arrive get `serviceUnavailable`; requests received
    /// earlier go on, body and handler included.
    func beginDraining() {
        acceptsRequests.store(false, ordering: .relaxed)
    }

    /// Answers every request still waiting for its handler with `serviceUnavailable`, refuses
    /// handlers from now on, then waits until MHD has taken back every suspended connection.
    func answerAllPending() async {
        acceptsHandlers.store(false, ordering: .relaxed)
        let remaining = registry.withLock { registry in
            registry.acceptsHandlers = false
            return Array(registry.entries.values)
        }
        abandon(remaining, with: .serviceUnavailable)
        while suspendedCount.load(ordering: .relaxed) > 0 {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }

    private func remoteAddress(of connection: OpaquePointer) -> String? {
        guard let address = kakin_mhd_client_address(connection) else { return nil }
        var buffer = (UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        return withUnsafeMutableBytes(of: &buffer) { text -> String? in
            let output = text.baseAddress!.assumingMemoryBound(to: CChar.self)
            let length = socklen_t(text.count)
            let family = Int32(address.pointee.sa_family)
            let formatted: UnsafePointer<CChar>?
            switch family {
            case AF_INET:
                formatted = UnsafeRawPointer(address).withMemoryRebound(to: sockaddr_in.self, capacity: 1) { ipv4 in
                    withUnsafePointer(to: ipv4.pointee.sin_addr) { inet_ntop(AF_INET, $0, output, length) }
                }
            case AF_INET6:
                formatted = UnsafeRawPointer(address).withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { ipv6 in
                    withUnsafePointer(to: ipv6.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, output, length) }
                }
            default:
                formatted = nil
            }
            return formatted.map { String(cString: $0) }
        }
    }
}

/// A daemon handle that can cross threads: MHD's daemon API is thread-safe for what we call
/// (quiesce, stop), and each is called once.
struct DaemonPointer: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Dispatch sources are thread-safe; the type just doesn't say so.
private struct WatchdogTimer: @unchecked Sendable {
    let source: DispatchSourceTimer
}

/// Query arguments as MHD split them ('+' already turned into a space), percent-decoded here.
private struct QueryCollector {
    var items: [(name: String, value: String)] = []
    var isMalformed = false
    /// The query's length as received (MHD has split it at `&` and `=`).
    var rawBytes = 0

    /// Returns false to stop the iteration at the first malformed argument.
    mutating func add(key: UnsafePointer<CChar>?, _ keyBytes: Int, value: UnsafePointer<CChar>?, _ valueBytes: Int) -> Bool {
        rawBytes += keyBytes + valueBytes + 2
        guard let name = decode(key, keyBytes), let value = value == nil ? "" : decode(value, valueBytes) else {
            isMalformed = true
            return false
        }
        items.append((name: name, value: value))
        return true
    }

    private func decode(_ text: UnsafePointer<CChar>?, _ count: Int) -> String? {
        guard let text else { return "" }
        return UnsafeRawBufferPointer(start: text, count: count).withMemoryRebound(to: UInt8.self) {
            PercentDecoding.decode($0)
        }
    }
}

private func makeString(_ text: UnsafePointer<CChar>?, _ count: Int) -> String {
    guard let text else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: text, count: count), as: UTF8.self)
}
