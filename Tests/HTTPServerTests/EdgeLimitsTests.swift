import Foundation
import Glibc
import HTTPServer
import Synchronization
import Testing

/// A gate handlers wait at until the test opens it.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.open { return true }
                s.waiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }
}

/// The edge's own limits: slow senders, half-sent bodies, load beyond the handlers, oversized heads.
@Suite struct EdgeLimits {
    /// Sends `bytes` one at a time, `gapMs` apart; returns how many were sent before the server cut
    /// the connection (nil if all were sent).
    static func trickle(_ connection: RawConnection, _ bytes: [UInt8], gapMs: UInt32) -> Int? {
        for (index, byte) in bytes.enumerated() {
            usleep(gapMs * 1000)
            if (try? connection.send([byte])) == nil { return index }
        }
        return nil
    }

    @Test func clientSendingHeadersAByteASecondIsCutOffWithoutHoldingOtherClients() async throws {
        let slowCalls = Atomic<Int>(0)
        let server = try startServer({ $0.receiveTimeoutSeconds = 2 }) { request in
            if request.path == "/slow" { slowCalls.add(1, ordering: .relaxed) }
            return .text("fine")
        }
        let port = server.port
        let head = Array("GET /slow HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "a", count: 60))\r\n\r\n".utf8)
        let slow = Task {
            try await offPool { () -> Int? in
                let connection = try RawConnection(port: port, receiveTimeoutSeconds: 30)
                return Self.trickle(connection, head, gapMs: 1000)
            }
        }
        // While the slow client holds its connection, others are served as usual.
        var served = 0
        for _ in 0..<20 {
            let r = try await rawExchange(port: port, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            if r.status == 200 { served += 1 }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(served == 20)
        let sentBeforeCut = try await slow.value
        #expect(sentBeforeCut != nil, "the slow client sent its whole head without being cut off")
        #expect((sentBeforeCut ?? .max) < head.count)
        #expect(slowCalls.load(ordering: .relaxed) == 0)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func bodyThatStopsMidwayIsDiscardedAndNeverReachesTheHandler() async throws {
        let calls = Atomic<Int>(0)
        let server = try startServer({ $0.receiveTimeoutSeconds = 1 }) { _ in
            calls.add(1, ordering: .relaxed)
            return .text("applied")
        }
        let port = server.port
        let head = "POST /grant HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        // The client goes quiet after half the body: the server drops the connection without answering.
        let cutWhileQuiet = try await offPool { () -> Bool in
            let connection = try RawConnection(port: port, receiveTimeoutSeconds: 20)
            try connection.send(head + String(repeating: "x", count: 50))
            return connection.isClosedByPeer()
        }
        #expect(cutWhileQuiet)
        // The client disconnects after half the body.
        try await offPool {
            let connection = try RawConnection(port: port)
            try connection.send(head + String(repeating: "x", count: 50))
        }
        let whole = try await rawExchange(port: port, head + String(repeating: "x", count: 100))
        #expect(whole.status == 200)
        #expect(calls.load(ordering: .relaxed) == 1)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func requestsBeyondHandlersMaxAreRefusedAtOnceWithoutRunningTheirHandler() async throws {
        let gate = Gate()
        let gauge = ConcurrencyGauge()
        let server = try startServer({ $0.handlersMax = 3 }) { _ in
            gauge.enter()
            await gate.wait()
            gauge.leave()
            return .text("done")
        }
        let port = server.port
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<10 {
                group.addTask { try await rawExchange(port: port, "GET /work HTTP/1.1\r\nHost: x\r\n\r\n").status }
            }
            // The seven refusals come back while three handlers still wait at the gate.
            var refused: [Int] = []
            for _ in 0..<7 { refused.append(try await group.next()!) }
            #expect(gauge.arrived == 3)
            gate.open()
            return try await group.reduce(into: refused) { $0.append($1) }
        }
        #expect(statuses.sorted() == [200, 200, 200] + Array(repeating: 503, count: 7))
        #expect(gauge.peak == 3)
        // Capacity comes back once handlers finish.
        #expect(try await rawExchange(port: port, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n").status == 200)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func oversizedHeadsGetTheEmbeddersAnswerWithARequestId() async throws {
        let server = try startServer({ $0.headerBytesMax = 8 * 1024 }) { _ in .text("fine") }
        let port = server.port
        let headers = try await rawExchange(port: port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 12 * 1024))\r\n\r\n")
        #expect(headers.status == 431)
        #expect(headers.text.hasPrefix("rejected: headersTooLarge"))
        #expect(headers.headers["X-Request-Id"] != nil)
        let target = try await rawExchange(port: port, "GET /?q=\(String(repeating: "b", count: 8 * 1024)) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(target.status == 414)
        #expect(target.text.hasPrefix("rejected: uriTooLong"))
        #expect(target.headers["X-Request-Id"] != nil)
        // Past libmicrohttpd's own memory it answers by itself, without a request ID (documented gap).
        let huge = try await rawExchange(port: port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "c", count: 100 * 1024))\r\n\r\n")
        #expect(huge.status == 431)
        #expect(try await rawExchange(port: port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").status == 200)
        await server.shutdown(gracePeriodSeconds: 1)
    }
}
