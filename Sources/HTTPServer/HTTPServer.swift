internal import CMicroHTTPD
import Glibc
import Synchronization

/// An HTTP/1.1 server over libmicrohttpd that runs each request's handler as a Swift task.
///
/// libmicrohttpd's threads (epoll, one per `threadCount`) parse requests and write responses;
/// while a handler runs, its connection is suspended, so those threads never wait on Swift code.
/// Call ``shutdown(gracePeriodSeconds:)`` before dropping a started server: the daemon keeps
/// running until then.
public final class HTTPServer: Sendable {
    public let configuration: HTTPServerConfiguration
    private let handler: HTTPHandler
    private let rejectionResponder: HTTPRejectionResponder
    private let lifecycle = Mutex<Lifecycle>(.idle)
    private let boundPort = Atomic<Int>(0)

    private enum Lifecycle {
        case idle
        case running(RunningDaemon)
        /// Shutdown in progress; later callers of `shutdown` wait in `waiters`.
        case stopping(RunningDaemon, waiters: [CheckedContinuation<Void, Never>])
    }

    /// - Parameters:
    ///   - handler: answers every request that passes the server's own checks.
    ///   - rejectionResponder: builds the response for what the server refuses itself.
    public init(
        configuration: HTTPServerConfiguration,
        handler: @escaping HTTPHandler,
        rejectionResponder: @escaping HTTPRejectionResponder
    ) {
        self.configuration = configuration
        self.handler = handler
        self.rejectionResponder = rejectionResponder
    }

    /// Binds and starts serving. May be called again after ``shutdown(gracePeriodSeconds:)`` returned.
    /// - Throws: ``HTTPServerError`` for bad configuration, an unusable host, a port in use, or
    ///   when already running.
    public func start() throws(HTTPServerError) {
        try lifecycle.withLock { (lifecycle) throws(HTTPServerError) in
            guard case .idle = lifecycle else {
                throw HTTPServerError(code: .alreadyRunning, message: "the server is already running")
            }
            if let problem = configuration.validationProblem() {
                throw HTTPServerError(code: .invalidConfiguration, message: problem)
            }
            let listenSocket = try ListenSocket.open(
                host: configuration.host, port: configuration.port, backlog: configuration.connectionsMax)
            let runtime = ServerRuntime(
                configuration: configuration, handler: handler, rejectionResponder: rejectionResponder)
            let flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_USE_INTERNAL_POLLING_THREAD.rawValue
                | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
            let daemon = kakin_mhd_start_daemon(
                flags,
                listenSocket.descriptor,
                UInt32(configuration.threadCount),
                UInt32(configuration.connectionsMax),
                configuration.connectionMemoryBytes,
                UInt32(configuration.idleTimeoutSeconds),
                { cls, connection, url, method, _, uploadData, uploadDataSize, context in
                    guard let cls, let connection, let url, let method, let uploadDataSize, let context else {
                        return .NO
                    }
                    return Unmanaged<ServerRuntime>.fromOpaque(cls).takeUnretainedValue().handleAccess(
                        connection: connection, url: url, method: method, uploadData: uploadData,
                        uploadDataSize: uploadDataSize, context: context)
                },
                { cls, _, context, _ in
                    guard let cls, let context else { return }
                    Unmanaged<ServerRuntime>.fromOpaque(cls).takeUnretainedValue().requestCompleted(context: context)
                },
                { cls, connection, socketContext, code in
                    guard let cls, let connection, let socketContext else { return }
                    Unmanaged<ServerRuntime>.fromOpaque(cls).takeUnretainedValue().connectionChanged(
                        connection: connection, socketContext: socketContext, started: code == .CONNECTION_NOTIFY_STARTED)
                },
                // Retained by the daemon until it stops: a server dropped without shutdown leaks
                // its daemon instead of leaving MHD with a dangling context.
                Unmanaged.passRetained(runtime).toOpaque())
            guard let daemon else {
                Unmanaged.passUnretained(runtime).release()
                close(listenSocket.descriptor)
                throw HTTPServerError(code: .daemonStartFailed, message: "libmicrohttpd did not start (see stderr)")
            }
            runtime.startWatchdog()
            boundPort.store(listenSocket.port, ordering: .relaxed)
            lifecycle = .running(RunningDaemon(daemon: DaemonPointer(pointer: daemon), listenDescriptor: listenSocket.descriptor, runtime: runtime))
        }
    }

    /// The bound port of the current (or last) run; useful with `port = 0`. 0 before the first start.
    public var port: Int {
        boundPort.load(ordering: .relaxed)
    }

    /// Requests received and not yet fully answered.
    public var inFlightCount: Int {
        lifecycle.withLock { lifecycle in
            switch lifecycle {
            case .idle: 0
            case .running(let running), .stopping(let running, _): running.runtime.inFlight.load(ordering: .relaxed)
            }
        }
    }

    /// Stops gracefully: new connections are refused at once and new requests on open connections
    /// get `serviceUnavailable`; requests whose headers had arrived may finish (body and handler)
    /// for up to `gracePeriodSeconds`, then those still running get `serviceUnavailable` too (their
    /// handler tasks are cancelled), and the daemon stops.
    /// Safe to call more than once; later calls return when the first one is done.
    public func shutdown(gracePeriodSeconds: Double) async {
        enum Step {
            case nothingToDo
            case stop(RunningDaemon)
            case waitForOtherCall
        }
        let step: Step = lifecycle.withLock { lifecycle in
            switch lifecycle {
            case .idle:
                return .nothingToDo
            case .running(let running):
                lifecycle = .stopping(running, waiters: [])
                return .stop(running)
            case .stopping:
                return .waitForOtherCall
            }
        }
        switch step {
        case .nothingToDo:
            return
        case .waitForOtherCall:
            await withCheckedContinuation { continuation in
                let registered = lifecycle.withLock { lifecycle in
                    guard case .stopping(let running, var waiters) = lifecycle else { return false }
                    waiters.append(continuation)
                    lifecycle = .stopping(running, waiters: waiters)
                    return true
                }
                if !registered { continuation.resume() }
            }
        case .stop(let running):
            await running.stop(gracePeriodSeconds: gracePeriodSeconds)
            let waiters = lifecycle.withLock { lifecycle in
                defer { lifecycle = .idle }
                guard case .stopping(_, let waiters) = lifecycle else { return [CheckedContinuation<Void, Never>]() }
                return waiters
            }
            for waiter in waiters { waiter.resume() }
        }
    }
}

/// A started daemon and what it needs to be stopped.
struct RunningDaemon: Sendable {
    let daemon: DaemonPointer
    let listenDescriptor: Int32
    let runtime: ServerRuntime

    /// After the last handlers were answered with 503, those answers get this long to be written.
    private static let flushTimeoutSeconds = 1.0
    private static let pollIntervalMs = 10

    func stop(gracePeriodSeconds: Double) async {
        runtime.beginDraining()
        _ = MHD_quiesce_daemon(daemon.pointer)
        // Quiescing only stops accepting; shutting the socket down also refuses the connections
        // queued in the backlog and new ones, instead of leaving them hanging until the end.
        // The descriptor stays open until the daemon has stopped, as MHD requires.
        Glibc.shutdown(listenDescriptor, Int32(SHUT_RDWR))

        let grace = gracePeriodSeconds.isNaN ? 0 : min(max(gracePeriodSeconds, 0), Self.gracePeriodSecondsMax)
        await waitUntilIdle(seconds: grace)
        await runtime.answerAllPending()
        await waitUntilIdle(seconds: Self.flushTimeoutSeconds)

        await runtime.stopDaemon(daemon)
        close(listenDescriptor)
        Unmanaged.passUnretained(runtime).release()  // the daemon's reference, taken in start()
    }

    private func waitUntilIdle(seconds: Double) async {
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(seconds)
        while runtime.inFlight.load(ordering: .relaxed) > 0 && clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(Self.pollIntervalMs))
        }
    }
}
