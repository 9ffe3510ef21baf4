import Foundation
import Glibc
import HTTPServer
import Synchronization

/// Answers each rejection with its suggested status and a body naming it, so tests can tell
/// the server's own answers from the handler's.
let testRejectionResponder: HTTPRejectionResponder = { rejection, requestId in
    HTTPResponse.text("rejected: \(rejection) \(requestId)", status: rejection.suggestedStatus)
}

/// Starts a server on an ephemeral loopback port.
func startServer(
    _ adjust: (inout HTTPServerConfiguration) -> Void = { _ in },
    handler: @escaping HTTPHandler
) throws -> HTTPServer {
    var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
    configuration.threadCount = 2
    adjust(&configuration)
    let server = HTTPServer(configuration: configuration, handler: handler, rejectionResponder: testRejectionResponder)
    try server.start()
    return server
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
}

/// Runs blocking socket work on a thread of its own: Swift's cooperative pool (and Dispatch's
/// global queues, which share its threads on Linux) must stay free for the server's handlers.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(with: Result { try work() })
        }.start()
    }
}

/// Checks `condition` until it holds or `seconds` passed (generous: a loaded 2-core machine runs other suites beside
/// this one); answers whether it held.
func eventually(seconds: Int = 30, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}

struct RawResponse: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A blocking HTTP/1.1 client over one TCP connection, for what URLSession can't send: exact
/// bytes, malformed requests, keep-alive control. Every read has a timeout.
final class RawConnection: @unchecked Sendable {
    private let descriptor: Int32
    private var buffered: [UInt8] = []

    /// Connects to `host` (an IPv4 or IPv6 literal) on `port`.
    init(host: String = "127.0.0.1", port: Int, receiveTimeoutSeconds: Int = 30) throws {
        // Connected before `self` exists, so a failure never reaches `deinit` and closes twice.
        descriptor = try Self.connect(host: host, port: port, timeoutSeconds: receiveTimeoutSeconds)
    }

    private static func connect(host: String, port: Int, timeoutSeconds: Int) throws -> Int32 {
        var storage = sockaddr_storage()
        let family: Int32
        let length: Int
        var ipv4 = sockaddr_in()
        var ipv6 = sockaddr_in6()
        if inet_pton(AF_INET, host, &ipv4.sin_addr) == 1 {
            ipv4.sin_family = sa_family_t(AF_INET)
            ipv4.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: ipv4, as: sockaddr_in.self) }
            (family, length) = (AF_INET, MemoryLayout<sockaddr_in>.size)
        } else if inet_pton(AF_INET6, host, &ipv6.sin6_addr) == 1 {
            ipv6.sin6_family = sa_family_t(AF_INET6)
            ipv6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: ipv6, as: sockaddr_in6.self) }
            (family, length) = (AF_INET6, MemoryLayout<sockaddr_in6>.size)
        } else {
            throw TestFailure(description: "bad host \(host)")
        }
        let descriptor = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestFailure(description: "socket failed") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(descriptor, $0, socklen_t(length)) }
        }
        guard connected == 0 else {
            let error = errno
            Glibc.close(descriptor)
            throw TestFailure(description: "connect failed: errno \(error)")
        }
        return descriptor
    }

    deinit {
        Glibc.close(descriptor)
    }

    func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw TestFailure(description: "send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads one response; `bodyExpected: false` for answers to HEAD.
    func readResponse(bodyExpected: Bool = true) throws -> RawResponse {
        var headerEnd: Int?
        while headerEnd == nil {
            headerEnd = buffered.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound
            if headerEnd == nil { try fill() }
        }
        let head = String(decoding: buffered[..<headerEnd!], as: UTF8.self)
        buffered.removeFirst(headerEnd!)
        var lines = head.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw TestFailure(description: "bad status line in \(head)")
        }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.add(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = bodyExpected ? Int(headers["Content-Length"] ?? "0") ?? 0 : 0
        while buffered.count < length { try fill() }
        let body = Array(buffered.prefix(length))
        buffered.removeFirst(length)
        return RawResponse(status: status, headers: headers, body: body)
    }

    /// True when the server closed the connection (EOF or reset) before sending anything more.
    func isClosedByPeer() -> Bool {
        do {
            try fill()
            return false
        } catch {
            return true
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        let received = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard received > 0 else {
            throw TestFailure(description: received == 0 ? "connection closed" : "recv failed: errno \(errno)")
        }
        buffered.append(contentsOf: chunk[..<received])
    }
}

/// Opens a connection, sends `request` and reads one response.
func rawExchange(host: String = "127.0.0.1", port: Int, _ request: String, bodyExpected: Bool = true) async throws -> RawResponse {
    try await offPool {
        let connection = try RawConnection(host: host, port: port)
        try connection.send(request)
        return try connection.readResponse(bodyExpected: bodyExpected)
    }
}

/// A counter that handlers running concurrently can share.
final class ConcurrencyGauge: Sendable {
    private let state = Mutex<(current: Int, peak: Int, arrived: Int)>((0, 0, 0))

    func enter() {
        state.withLock { state in
            state.current += 1
            state.arrived += 1
            state.peak = max(state.peak, state.current)
        }
    }

    func leave() {
        state.withLock { $0.current -= 1 }
    }

    var peak: Int { state.withLock { $0.peak } }
    var arrived: Int { state.withLock { $0.arrived } }
}
