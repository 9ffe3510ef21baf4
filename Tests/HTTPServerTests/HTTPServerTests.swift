import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPServer
import Synchronization
import Testing

/// What the echo routes saw, sent back as JSON.
private struct Echo: Codable {
    var method: String
    var path: String
    var rawPath: String
    var parameters: [String: String]
    var query: [String: String]
    var testHeader: String?
    var body: String
    var requestId: String
    var remoteAddress: String?
}

private func echoRouter() -> Router {
    var router = Router()
    let echo: RouteHandler = { request, parameters in
        let echo = Echo(
            method: request.method, path: request.path, rawPath: request.rawPath,
            parameters: ["thingId": parameters["thingId"], "customerId": parameters["customerId"]]
                .compactMapValues { $0 },
            query: request.query, testHeader: request.headers["x-test"],
            body: String(decoding: request.body, as: UTF8.self), requestId: request.requestId,
            remoteAddress: request.remoteAddress)
        return .json(Array(try! JSONEncoder().encode(echo)))
    }
    router.add("GET", "/v1/things/{thingId}", echo)
    router.add("POST", "/v1/things/{thingId}", echo)
    router.add("POST", "/v1/customers/{customerId}/wallet/spend") { request, parameters in
        var response = HTTPResponse.json(request.body, status: 201)
        response.headers.add("X-Customer", parameters["customerId"] ?? "-")
        return response
    }
    router.add("GET", "/ping") { _, _ in .text("pong") }
    return router
}

private func routed(_ router: Router) -> HTTPHandler {
    { request in
        await router.handle(
            request,
            notFound: { _ in .text("no such route", status: 404) },
            methodNotAllowed: { _, _ in .text("method not allowed", status: 405) })
    }
}

private func urlSession(connectionsMax: Int = 8) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = connectionsMax
    configuration.timeoutIntervalForRequest = 60
    return URLSession(configuration: configuration)
}

@Suite struct HTTPServerTests {
    @Test func getRoundTripsDecodedPathParametersQueryAndHeaders() async throws {
        let server = try startServer(handler: routed(echoRouter()))
        let url = URL(string: "http://127.0.0.1:\(server.port)/v1/things/caf%C3%A9%2Fx?q=a%20b&plus=x+y&repeat=1&repeat=2&flag")!
        var request = URLRequest(url: url)
        request.setValue("hello", forHTTPHeaderField: "X-Test")
        let (data, response) = try await urlSession().data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(http.value(forHTTPHeaderField: "Content-Type") == "application/json; charset=utf-8")
        let echo = try JSONDecoder().decode(Echo.self, from: data)
        #expect(echo.method == "GET")
        #expect(echo.parameters["thingId"] == "café/x")
        #expect(echo.path == "/v1/things/café/x")
        #expect(echo.rawPath == "/v1/things/caf%C3%A9%2Fx")
        #expect(echo.query == ["q": "a b", "plus": "x y", "repeat": "2", "flag": ""])
        #expect(echo.testHeader == "hello")
        #expect(echo.remoteAddress == "127.0.0.1")
        #expect(http.value(forHTTPHeaderField: "X-Request-Id") == echo.requestId)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func postWithJSONBodyRoundTrips() async throws {
        let server = try startServer(handler: routed(echoRouter()))
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)/v1/customers/cus_42/wallet/spend")!)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let body = Data(#"{"amount":5,"currency":"coins","note":"ünïcode"}"#.utf8)
        request.httpBody = body
        let (data, response) = try await urlSession().data(for: request)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 201)
        #expect(http.value(forHTTPHeaderField: "X-Customer") == "cus_42")
        #expect(http.value(forHTTPHeaderField: "Content-Type") == "application/json; charset=utf-8")
        #expect(data == body)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func chunkedBodyWithinLimitArrivesWhole() async throws {
        let server = try startServer({ $0.bodyBytesMax = 4096 }, handler: routed(echoRouter()))
        let chunks = [String(repeating: "a", count: 1000), String(repeating: "b", count: 1000), "end"]
        var request = "POST /v1/things/t1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        for chunk in chunks { request += String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n" }
        request += "0\r\n\r\n"
        let response = try await rawExchange(port: server.port, request)
        #expect(response.status == 200)
        let echo = try JSONDecoder().decode(Echo.self, from: Data(response.body))
        #expect(echo.body == chunks.joined())
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func declaredBodyOverLimitGets413BeforeTheBodyIsSentAndHandlerIsNotCalled() async throws {
        let handlerCalls = Atomic<Int>(0)
        let server = try startServer({ $0.bodyBytesMax = 1024 }) { _ in
            handlerCalls.add(1, ordering: .relaxed)
            return .text("handled")
        }
        // Only the headers go out: the answer must come without the server waiting for the body.
        let response = try await rawExchange(
            port: server.port,
            "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\nContent-Length: 5000000\r\n\r\n")
        #expect(response.status == 413)
        #expect(response.text.hasPrefix("rejected: bodyTooLarge(limitBytes: 1024)"))
        #expect(response.headers["X-Request-Id"] != nil)
        #expect(handlerCalls.load(ordering: .relaxed) == 0)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func chunkedBodyOverLimitGets413AndHandlerIsNotCalled() async throws {
        let handlerCalls = Atomic<Int>(0)
        let server = try startServer({ $0.bodyBytesMax = 1024 }) { _ in
            handlerCalls.add(1, ordering: .relaxed)
            return .text("handled")
        }
        var request = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        for _ in 0..<3 { request += String(800, radix: 16) + "\r\n" + String(repeating: "z", count: 800) + "\r\n" }
        request += "0\r\n\r\n"
        let response = try await rawExchange(port: server.port, request)
        #expect(response.status == 413)
        #expect(response.text.hasPrefix("rejected: bodyTooLarge(limitBytes: 1024)"))
        #expect(handlerCalls.load(ordering: .relaxed) == 0)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func unknownPathIs404AndWrongMethodIs405WithAllow() async throws {
        let server = try startServer(handler: routed(echoRouter()))
        let missing = try await rawExchange(port: server.port, "GET /nowhere HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(missing.status == 404)
        #expect(missing.text == "no such route")
        let wrongMethod = try await rawExchange(
            port: server.port, "DELETE /v1/things/t1 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.headers["Allow"] == "GET, HEAD, POST")
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func headIsAnsweredLikeGetWithoutBodyAndConnectionStaysUsable() async throws {
        let server = try startServer(handler: routed(echoRouter()))
        let (head, next) = try await offPool {
            let connection = try RawConnection(port: server.port)
            try connection.send("HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try connection.readResponse(bodyExpected: false)
            try connection.send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            return (head, try connection.readResponse())
        }
        #expect(head.status == 200)
        #expect(head.headers["Content-Length"] == "4")
        #expect(next.status == 200)
        #expect(next.text == "pong")
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func twoHundredConcurrentSleepingHandlersAreAllInFlightAtOnce() async throws {
        let requestCount = 200
        let gauge = ConcurrencyGauge()
        let server = try startServer({ $0.threadCount = 2 }) { _ in
            gauge.enter()
            // Wait (bounded) until every request has reached a handler: impossible if handlers
            // held MHD's two threads.
            let deadline = ContinuousClock.now + .seconds(20)
            while gauge.arrived < requestCount && ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(20))
            }
            gauge.leave()
            return .text("done")
        }
        let session = urlSession(connectionsMax: requestCount)
        let url = URL(string: "http://127.0.0.1:\(server.port)/work")!
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<requestCount {
                group.addTask {
                    let (_, response) = try await session.data(from: url)
                    return (response as? HTTPURLResponse)?.statusCode ?? -1
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(statuses.count == requestCount)
        #expect(statuses.allSatisfy { $0 == 200 })
        #expect(gauge.peak == requestCount)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func handlerSlowerThanRequestTimeoutGetsTimeoutAnswerAndIsCancelled() async throws {
        let (events, sink) = AsyncStream<String>.makeStream()
        let server = try startServer({ $0.requestTimeoutSeconds = 1 }) { request in
            guard request.path == "/slow" else { return .text("fast") }
            sink.yield("started")
            do {
                try await Task.sleep(for: .seconds(600))
                sink.yield("finished")
            } catch {
                sink.yield("cancelled")
            }
            return .text("late")
        }
        let (timedOut, next) = try await offPool {
            let connection = try RawConnection(port: server.port)
            try connection.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
            let timedOut = try connection.readResponse()
            try connection.send("GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
            return (timedOut, try connection.readResponse())
        }
        #expect(timedOut.status == 504)
        #expect(timedOut.text.hasPrefix("rejected: requestTimeout"))
        // The connection stays usable. (On a loaded machine even /fast may miss a 1 s deadline; both
        // answers prove the connection survived the timeout.)
        #expect(next.text == "fast" || next.text.hasPrefix("rejected: requestTimeout"))
        // A handler that started is cancelled rather than left sleeping; one the watchdog beat to the
        // start never runs at all. Either way it never finishes its 10-minute sleep.
        let giveUp = Task {
            try? await Task.sleep(for: .seconds(10))
            sink.finish()
        }
        var seen: [String] = []
        for await event in events {
            seen.append(event)
            if event != "started" { break }
        }
        giveUp.cancel()
        #expect(seen == [] || seen == ["started", "cancelled"])
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func gracefulShutdownFinishesInFlightRefusesNewAndServerStartsAgain() async throws {
        let (slowStarts, slowStartSink) = AsyncStream<Void>.makeStream()
        // The in-flight request is what keeps the draining server up, so it lasts until the test has seen
        // what draining does to others. (It used to sleep 1 s: on a loaded machine the test reached the
        // kept-alive connection after that, when the server had rightly finished its shutdown and closed it.)
        let (release, releaseSink) = AsyncStream<Void>.makeStream()
        let server = try startServer { request in
            guard request.path == "/slow" else { return .text("ok") }
            slowStartSink.yield()
            for await _ in release { break }
            return .text("slow done")
        }
        let port = server.port
        let keptAlive = try await offPool { try RawConnection(port: port) }
        let warmUp = try await offPool {
            try keptAlive.send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            return try keptAlive.readResponse()
        }
        #expect(warmUp.status == 200)

        async let slow = rawExchange(port: port, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        var starts = slowStarts.makeAsyncIterator()
        _ = await starts.next()
        async let shutdown: Void = server.shutdown(gracePeriodSeconds: 30)

        // New connections are refused as soon as draining starts.
        #expect(try await eventually { try await offPool { (try? RawConnection(port: port)) == nil } })
        // A request on a connection opened earlier is answered 503.
        let late = try await offPool {
            try keptAlive.send("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            return try keptAlive.readResponse()
        }
        #expect(late.status == 503)
        #expect(late.text.hasPrefix("rejected: serviceUnavailable"))
        #expect(server.inFlightCount == 1, "the request that began before the shutdown is still running")

        releaseSink.finish()
        let slowResponse = try await slow
        #expect(slowResponse.status == 200)
        #expect(slowResponse.text == "slow done")
        await shutdown
        #expect(server.inFlightCount == 0)
        #expect(try await offPool { (try? RawConnection(port: port)) == nil })

        // The same instance starts again, and so does a new one, in this process.
        try server.start()
        #expect(try await rawExchange(port: server.port, "GET /ping HTTP/1.1\r\nHost: x\r\n\r\n").status == 200)
        let another = try startServer { _ in .text("another") }
        #expect(try await rawExchange(port: another.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").text == "another")
        await server.shutdown(gracePeriodSeconds: 1)
        await server.shutdown(gracePeriodSeconds: 1)
        await another.shutdown(gracePeriodSeconds: 1)
    }

    @Test func uploadWhoseHeadersArrivedBeforeShutdownStillReachesItsHandler() async throws {
        let server = try startServer { request in .text("got " + String(decoding: request.body, as: UTF8.self)) }
        let port = server.port
        let connection = try await offPool { try RawConnection(port: port) }
        try await offPool { try connection.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n") }
        #expect(try await eventually { server.inFlightCount == 1 })
        async let shutdown: Void = server.shutdown(gracePeriodSeconds: 30)
        #expect(try await eventually { try await offPool { (try? RawConnection(port: port)) == nil } })
        let response = try await offPool {
            try connection.send("hello")
            return try connection.readResponse()
        }
        #expect(response.status == 200)
        #expect(response.text == "got hello")
        await shutdown
    }

    @Test func shutdownAfterGracePeriodAnswersStillRunningHandlersWith503() async throws {
        let (starts, startSink) = AsyncStream<Void>.makeStream()
        let server = try startServer { _ in
            startSink.yield()
            try? await Task.sleep(for: .seconds(30))
            return .text("too late")
        }
        async let stuck = rawExchange(port: server.port, "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
        var iterator = starts.makeAsyncIterator()
        _ = await iterator.next()
        async let first: Void = server.shutdown(gracePeriodSeconds: 0.2)
        async let second: Void = server.shutdown(gracePeriodSeconds: 0.2)
        _ = await (first, second)
        let response = try await stuck
        #expect(response.status == 503)
        #expect(server.inFlightCount == 0)
    }

    @Test func shutdownReturnsWhenClientsLeftWhileTheirHandlersRan() async throws {
        let (starts, startSink) = AsyncStream<Void>.makeStream()
        let server = try startServer { _ in
            startSink.yield()
            try? await Task.sleep(for: .milliseconds(300))
            return .text("nobody listens")
        }
        var clients = try await offPool {
            try (0..<5).map { _ in
                let connection = try RawConnection(port: server.port)
                try connection.send("GET /gone HTTP/1.1\r\nHost: x\r\n\r\n")
                return connection
            }
        }
        var iterator = starts.makeAsyncIterator()
        for _ in 0..<5 { _ = await iterator.next() }
        // The clients leave only once their handlers run: a connection closed before the server read its request
        // would never start a handler, and this wait would never end.
        clients.removeAll()
        await server.shutdown(gracePeriodSeconds: 5)
        #expect(server.inFlightCount == 0)
    }

    @Test func everyResponseCarriesAUniqueRequestId() async throws {
        let server = try startServer { request in
            switch request.path {
            case "/own":
                HTTPResponse(status: 200, headers: ["X-Request-Id": "mine"])
            case "/missing":
                .text("none", status: 404)
            default:
                .text(request.requestId)
            }
        }
        let responses = try await offPool {
            let connection = try RawConnection(port: server.port)
            var responses: [RawResponse] = []
            for _ in 0..<50 {
                try connection.send("GET /id HTTP/1.1\r\nHost: x\r\n\r\n")
                responses.append(try connection.readResponse())
            }
            for path in ["/own", "/missing", "/bad%zz"] {
                try connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
                responses.append(try connection.readResponse())
            }
            return responses
        }
        let ids = responses.prefix(50).compactMap { $0.headers["X-Request-Id"] }
        #expect(ids.count == 50)
        #expect(Set(ids).count == 50)
        #expect(ids.allSatisfy { $0.hasPrefix("req_") && $0.utf8.count <= 15 })
        #expect(responses.prefix(50).allSatisfy { $0.text == $0.headers["X-Request-Id"] })
        #expect(responses[50].headers.values("X-Request-Id") == ["mine"])
        #expect(responses[51].status == 404 && responses[51].headers["X-Request-Id"] != nil)
        #expect(responses[52].status == 400 && responses[52].headers["X-Request-Id"] != nil)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func malformedPercentEncodingIs400AndNeverReachesTheHandler() async throws {
        let handlerCalls = Atomic<Int>(0)
        let server = try startServer { _ in
            handlerCalls.add(1, ordering: .relaxed)
            return .text("handled")
        }
        for target in ["/bad%zz", "/bad%4", "/ok?q=%G1", "/ok?%=1", "/bad%FF%FE"] {
            let response = try await rawExchange(port: server.port, "GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 400, "\(target)")
            #expect(response.text.hasPrefix("rejected: badRequest"))
        }
        #expect(handlerCalls.load(ordering: .relaxed) == 0)
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func aTargetThatIsNotAPathIs400AndTheAbsoluteFormIsRoutedByItsPath() async throws {
        let server = try startServer { request in .text("handled \(request.path)") }
        for target in ["ok", "v1/customers/u1", "*", "http://", "http:///ok", "ftp://x/ok"] {
            let response = try await rawExchange(port: server.port, "GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 400, "\(target)")
        }
        for (target, path) in [("http://x/ok", "/ok"), ("HTTPS://x:8080/a/b?q=1", "/a/b"), ("http://x", "/")] {
            let response = try await rawExchange(port: server.port, "GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(response.status == 200, "\(target)")
            #expect(response.text == "handled \(path)", "\(target)")
        }
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func headersOverTheLimitAreRefusedAndTheServerKeepsServing() async throws {
        let server = try startServer({ $0.headerBytesMax = 8 * 1024 }) { _ in .text("fine") }
        let big = String(repeating: "a", count: 20 * 1024)
        let refused = try await rawExchange(port: server.port, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: \(big)\r\n\r\n")
        #expect([413, 414, 431].contains(refused.status))
        let longQuery = try await rawExchange(port: server.port, "GET /?q=\(big) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect([413, 414, 431].contains(longQuery.status))
        let fine = try await rawExchange(port: server.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(fine.status == 200)
        #expect(fine.text == "fine")
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func startReportsPortInUseBadHostAndBadConfiguration() async throws {
        let server = try startServer { _ in .text("ok") }
        var clash = HTTPServerConfiguration(host: "127.0.0.1", port: server.port)
        clash.threadCount = 1
        let clashing = HTTPServer(configuration: clash, handler: { _ in .text("x") }, rejectionResponder: testRejectionResponder)
        let clashed = #expect(throws: HTTPServerError.self) { try clashing.start() }
        #expect(clashed?.code == .addressInUse)
        let badHost = HTTPServer(
            configuration: HTTPServerConfiguration(host: "not a host", port: 0),
            handler: { _ in .text("x") }, rejectionResponder: testRejectionResponder)
        do {
            try badHost.start()
            Issue.record("started on a bad host")
        } catch {
            #expect(error.code == .invalidHost)
        }
        var zeroThreads = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        zeroThreads.threadCount = 0
        let misconfigured = HTTPServer(configuration: zeroThreads, handler: { _ in .text("x") }, rejectionResponder: testRejectionResponder)
        do {
            try misconfigured.start()
            Issue.record("started with zero threads")
        } catch {
            #expect(error.code == .invalidConfiguration)
        }
        do {
            try server.start()
            Issue.record("started twice")
        } catch {
            #expect(error.code == .alreadyRunning)
        }
        await server.shutdown(gracePeriodSeconds: 1)
    }

    @Test func localhostAndIPv6LoopbackBind() async throws {
        let local = try startServer({ $0.host = "localhost" }) { request in .text(request.remoteAddress ?? "?") }
        #expect(try await rawExchange(port: local.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").text == "127.0.0.1")
        await local.shutdown(gracePeriodSeconds: 1)
        let v6 = try startServer({ $0.host = "::1" }) { request in .text(request.remoteAddress ?? "?") }
        #expect(try await rawExchange(host: "::1", port: v6.port, "GET / HTTP/1.1\r\nHost: x\r\n\r\n").text == "::1")
        await v6.shutdown(gracePeriodSeconds: 1)
    }
}
