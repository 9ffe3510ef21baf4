import Foundation
import KakinCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A complete HTTP answer.
struct HTTPAnswer: Sendable {
    var status: Int
    /// Header names in lowercase.
    var headers: [String: String]
    var body: [UInt8]

    var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }
    var errorCode: String? { json["error"]?["code"]?.stringValue }
}

struct HTTPTransportError: Error, CustomStringConvertible {
    var description: String
}

/// One keep-alive HTTP/1.1 connection to a server on 127.0.0.1, blocking, one request at a time.
///
/// Nothing is retried: the crash test must know exactly which requests were answered. A request that
/// fails in transport throws and closes the connection; the next request opens a new one.
final class HTTPConnection {
    static let headBytesMax = 64 * 1024
    static let bodyBytesMax = 16 << 20

    let port: Int
    let timeoutSeconds: Int
    private var socket: Int32 = -1
    /// Bytes read past the end of the previous answer.
    private var received: [UInt8] = []

    init(port: Int, timeoutSeconds: Int = 30) {
        self.port = port
        self.timeoutSeconds = timeoutSeconds
    }

    deinit { close() }

    func close() {
        if socket >= 0 { _ = closeSocket(socket) }
        socket = -1
        received.removeAll()
    }

    func request(_ method: String, _ path: String, json: JSONValue, headers: [String: String] = [:]) throws(HTTPTransportError) -> HTTPAnswer {
        try request(method, path, body: json.serialized(), headers: headers)
    }

    /// Sends one request and reads its whole answer. `body` goes out byte for byte (replays compare bodies).
    func request(_ method: String, _ path: String, body: [UInt8]? = nil, headers: [String: String] = [:]) throws(HTTPTransportError) -> HTTPAnswer {
        if socket < 0 { try connect() }
        do {
            var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
            for (name, value) in headers { head += "\(name): \(value)\r\n" }
            if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
            head += "\r\n"
            try sendAll(Array(head.utf8) + (body ?? []))
            return try readAnswer()
        } catch {
            close()
            throw error
        }
    }

    private func connect() throws(HTTPTransportError) {
        #if canImport(Glibc)
            let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
            let fd = Darwin.socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw HTTPTransportError(description: "socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connectSocket(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            _ = closeSocket(fd)
            throw HTTPTransportError(description: "connect to port \(port): errno \(error)")
        }
        var noDelay: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        socket = fd
    }

    private func sendAll(_ bytes: [UInt8]) throws(HTTPTransportError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(socket, $0.baseAddress! + offset, $0.count - offset, 0) }
            if sent < 0 {
                if errno == EINTR { continue }
                throw HTTPTransportError(description: "send: errno \(errno)")
            }
            offset += sent
        }
    }

    /// Reads more bytes into `received`; throws when the server closed the connection.
    private func receiveMore() throws(HTTPTransportError) {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(socket, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received.append(contentsOf: chunk[0..<count])
                return
            }
            if count == 0 { throw HTTPTransportError(description: "connection closed by the server") }
            if errno == EINTR { continue }
            throw HTTPTransportError(description: "recv: errno \(errno)")
        }
    }

    private func readAnswer() throws(HTTPTransportError) -> HTTPAnswer {
        var scannedUpTo = 0
        var headEnd: Int? = nil
        while headEnd == nil {
            headEnd = Self.headEnd(in: received, from: scannedUpTo)
            if headEnd == nil {
                guard received.count <= Self.headBytesMax else { throw HTTPTransportError(description: "answer head too large") }
                scannedUpTo = max(0, received.count - 3)
                try receiveMore()
            }
        }
        let head = String(decoding: received[0..<headEnd!], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let status = Int(statusParts[1]) else {
            throw HTTPTransportError(description: "malformed status line")
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        guard headers["transfer-encoding"] == nil else { throw HTTPTransportError(description: "chunked answers are not supported") }
        guard let length = Int(headers["content-length"] ?? "0"), (0...Self.bodyBytesMax).contains(length) else {
            throw HTTPTransportError(description: "bad Content-Length")
        }
        let bodyStart = headEnd! + 4
        while received.count < bodyStart + length { try receiveMore() }
        let body = Array(received[bodyStart..<(bodyStart + length)])
        received.removeFirst(bodyStart + length)
        if headers["connection"]?.lowercased() == "close" { close() }
        return HTTPAnswer(status: status, headers: headers, body: body)
    }

    /// Where the blank line ending the head starts, searching from `start`.
    private static func headEnd(in bytes: [UInt8], from start: Int) -> Int? {
        guard bytes.count >= 4 else { return nil }
        return (start...(bytes.count - 4)).first { bytes[$0] == 13 && bytes[$0 + 1] == 10 && bytes[$0 + 2] == 13 && bytes[$0 + 3] == 10 }
    }
}

#if canImport(Glibc)
    private let connectSocket = Glibc.connect
    private let closeSocket = Glibc.close
#else
    private let connectSocket = Darwin.connect
    private let closeSocket = Darwin.close
#endif
