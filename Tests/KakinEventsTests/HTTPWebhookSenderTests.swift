import Foundation
import KakinEvents
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The sender as an endpoint sees it on the wire: one kept-alive connection for a stream of deliveries, the
/// contract's headers, an answer's start kept and the rest read.
struct HTTPWebhookSenderTests {
    let secret = Array("whsec_test".utf8)

    func request(port: Int, eventId: String, payload: String) -> WebhookRequest {
        WebhookRequest(endpoint: WebhookEndpoint(id: "e", url: "http://127.0.0.1:\(port)/hooks", secrets: [secret]), eventId: eventId,
                       payload: payload, nowSeconds: 1_764_000_000, timeoutMs: 5_000)
    }

    @Test func manyDeliveriesToOneEndpointGoOverOneKeptAliveConnection() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: "ok")
        defer { endpoint.close() }
        let sender = HTTPWebhookSender()
        // Bodies past 1 KiB too: no `Expect: 100-continue` wait, and nothing but the body on the wire.
        let payload = #"{"id":"evt_1","data":""# + String(repeating: "x", count: 3_000) + #""}"#
        for n in 0..<20 {
            let answer = await sender.send(request(port: endpoint.port, eventId: "evt_\(n)", payload: payload))
            #expect(answer == .answered(status: 200, bodyExcerpt: "ok"))
        }
        let seen = endpoint.seen
        #expect(seen.connections == 1)
        #expect(seen.requests.count == 20)
        let first = try #require(seen.requests.first)
        #expect(first.head.hasPrefix("POST /hooks HTTP/1.1\r\n"))
        for header in ["content-type: application/json", "kakin-event-id: evt_0", "kakin-signature: t=1764000000,v1="] {
            #expect(first.head.lowercased().contains(header), "\(header) in \(first.head)")
        }
        #expect(!first.head.lowercased().contains("expect:"))
        #expect(first.body == Array(payload.utf8))
    }

    @Test func onlyTheStartOfALongAnswerIsKept() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: String(repeating: "a", count: 5_000), status: "500 Internal Server Error")
        defer { endpoint.close() }
        let answer = await HTTPWebhookSender().send(request(port: endpoint.port, eventId: "evt_1", payload: "{}"))
        #expect(answer == .answered(status: 500, bodyExcerpt: String(repeating: "a", count: HTTPWebhookSender.excerptBytesMax)))
    }

    /// A server may close a kept-alive connection whenever it likes (an idle timeout, a restart) without a
    /// `Connection: close`: a delivery that finds its connection closed goes out on a new one, never lost and never
    /// failed for it, whether deliveries come one at a time or side by side.
    @Test func aKeptAliveConnectionTheEndpointClosedIsReplacedNotFailed() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: "ok", answersPerConnectionMax: 2)
        defer { endpoint.close() }
        let sender = HTTPWebhookSender()
        var answers: [WebhookResponse] = []
        for n in 0..<40 { answers.append(await sender.send(request(port: endpoint.port, eventId: "evt_\(n)", payload: "{}"))) }
        answers += await withTaskGroup(of: WebhookResponse.self) { group in
            for n in 40..<80 { group.addTask { await sender.send(request(port: endpoint.port, eventId: "evt_\(n)", payload: "{}")) } }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(answers.filter { $0 != .answered(status: 200, bodyExcerpt: "ok") } == [])
        #expect(endpoint.seen.requests.count == 80)
        #expect(endpoint.seen.connections >= 40)
    }

    @Test func aClosedPortIsACannotConnectFailure() async throws {
        let endpoint = try RawHTTPEndpoint(answerBody: "ok")
        let port = endpoint.port
        endpoint.close()
        let answer = await HTTPWebhookSender().send(request(port: port, eventId: "evt_1", payload: "{}"))
        #expect(answer == .failed(reason: "cannot connect to host"))
    }
}

/// A bare HTTP/1.1 endpoint on a loopback socket: answers every request on a connection with `status` and
/// `answerBody`, keeping the connection open (or closing it after `answersPerConnectionMax` answers, without saying so,
/// as a server closing idle kept-alive connections does), and records how many connections it accepted and what came in.
final class RawHTTPEndpoint: Sendable {
    struct Seen: Sendable {
        var connections = 0
        var requests: [(head: String, body: [UInt8])] = []
    }

    let port: Int
    private let listener: Int32
    private let answer: [UInt8]
    private let answersPerConnectionMax: Int
    private let state = Mutex(Seen())

    init(answerBody: String, status: String = "200 OK", answersPerConnectionMax: Int = .max) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, SOMAXCONN) == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        self.answersPerConnectionMax = answersPerConnectionMax
        port = Int(UInt16(bigEndian: address.sin_port))
        answer = Array("HTTP/1.1 \(status)\r\nContent-Length: \(answerBody.utf8.count)\r\n\r\n\(answerBody)".utf8)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                // Interrupted, or a connection reset before it was taken: take the next (only a closed listener ends it).
                if client < 0, errno == EINTR || errno == ECONNABORTED { continue }
                guard client >= 0 else { return }
                state.withLock { $0.connections += 1 }
                Thread.detachNewThread { [self] in serve(client) }
            }
        }
    }

    var seen: Seen { state.withLock { $0 } }

    func close() {
        shutdown(listener, Int32(SHUT_RDWR))
        Glibc.close(listener)
    }

    /// Reads requests (head, then `Content-Length` bytes of body) and answers each, until the client closes.
    private func serve(_ client: Int32) {
        defer { Glibc.close(client) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func fill() -> Bool {
            var n: Int
            repeat { n = chunk.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) } } while n < 0 && errno == EINTR
            if n <= 0 { return false }
            buffer += chunk[0..<n]
            return true
        }
        var answered = 0
        while answered < answersPerConnectionMax {
            var headEnd: Int?
            while headEnd == nil {
                headEnd = buffer.indices.dropLast(3).first { buffer[$0] == 13 && buffer[$0 + 1] == 10 && buffer[$0 + 2] == 13 && buffer[$0 + 3] == 10 }
                if headEnd == nil, !fill() { return }
            }
            let head = String(decoding: buffer[..<headEnd!], as: UTF8.self)
            let lengthLine = head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            let length = lengthLine.flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            let bodyStart = headEnd! + 4
            while buffer.count < bodyStart + length { if !fill() { return } }
            state.withLock { $0.requests.append((head + "\r\n", Array(buffer[bodyStart..<(bodyStart + length)]))) }
            buffer.removeFirst(bodyStart + length)
            _ = answer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            answered += 1
        }
    }
}
