import AppStoreClient
import HTTPServer
import KakinCore
import StoreAPITransport
import Synchronization
import Testing

/// The real transport against a loopback HTTP server: what it sends and reads, and its three limits
/// (response size, attempt deadline, cancellation).
@Suite struct URLSessionTransportTests {
    /// Starts a loopback server on an ephemeral port with these routes, runs `body`, shuts the server down.
    static func withServer(
        _ build: (inout Router) -> Void, _ body: (_ baseURL: String) async throws -> Void
    ) async throws {
        var router = Router()
        build(&router)
        let routes = router
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.bodyBytesMax = 64 * 1024
        let server = HTTPServer(
            configuration: configuration,
            handler: { request in
                await routes.handle(
                    request, notFound: { _ in .text("no route", status: 404) },
                    methodNotAllowed: { _, _ in .text("no method", status: 405) })
            },
            rejectionResponder: { rejection, _ in .text("rejected", status: rejection.suggestedStatus) })
        try server.start()
        do {
            try await body("http://127.0.0.1:\(server.port)")
        } catch {
            await server.shutdown(gracePeriodSeconds: 0)
            throw error
        }
        await server.shutdown(gracePeriodSeconds: 0)
    }

    static func request(_ url: String, method: String = "GET", body: [UInt8]? = nil, timeoutMs: Int64 = 10_000) -> HTTPClientRequest {
        HTTPClientRequest(
            method: method, url: url, headers: [("Authorization", "Bearer a.b.c"), ("Content-Type", "application/json")],
            body: body, timeoutMs: timeoutMs)
    }

    @Test func sendsMethodHeadersAndBodyAndReadsStatusHeadersAndBody() async throws {
        try await Self.withServer({ router in
            router.add("POST", "/prefix/inApps/v1/notifications/history") { request, _ in
                let echo: JSONValue = [
                    "method": .string(request.method), "rawPath": .string(request.rawPath),
                    "token": .string(request.queryItems.first?.value),
                    "authorization": .string(request.headers["authorization"]),
                    "contentType": .string(request.headers["content-type"]),
                    "body": .string(String(decoding: request.body, as: UTF8.self)),
                ]
                var response = HTTPResponse.json(echo.serialized(), status: 429)
                response.headers.add("Retry-After", "1780272000000")
                return response
            }
        }) { baseURL in
            let transport = URLSessionTransport()
            let response = try await transport.send(
                Self.request(
                    "\(baseURL)/prefix/inApps/v1/notifications/history?paginationToken=a%2Bb", method: "POST",
                    body: Array(#"{"startDate":1}"#.utf8)),
                responseBytesMax: 1024)
            #expect(response.status == 429)
            #expect(response.headers["retry-after"] == "1780272000000")
            let echo = try JSONParser.parse(response.body)
            #expect(echo["method"] == "POST")
            #expect(echo["token"] == "a+b")
            #expect(echo["authorization"] == "Bearer a.b.c")
            #expect(echo["contentType"] == "application/json")
            #expect(echo["body"] == #"{"startDate":1}"#)
        }
    }

    @Test func answerOverTheLimitIsAbandonedAndOneAtTheLimitIsRead() async throws {
        try await Self.withServer({ router in
            router.add("GET", "/big/{size}") { _, parameters in
                .json([UInt8](repeating: UInt8(ascii: "x"), count: Int(parameters["size"] ?? "0") ?? 0))
            }
        }) { baseURL in
            let transport = URLSessionTransport()
            let limit = 256 * 1024
            let atLimit = try await transport.send(Self.request("\(baseURL)/big/\(limit)"), responseBytesMax: limit)
            #expect(atLimit.body.count == limit)
            await #expect(throws: HTTPTransportError.responseTooLarge) {
                try await transport.send(Self.request("\(baseURL)/big/\(limit + 1)"), responseBytesMax: limit)
            }
            await #expect(throws: HTTPTransportError.responseTooLarge) {
                try await transport.send(Self.request("\(baseURL)/big/\(4 * limit)"), responseBytesMax: limit)
            }
        }
    }

    @Test func slowAnswerEndsAsTimedOut() async throws {
        try await Self.withServer({ router in
            router.add("GET", "/slow") { _, _ in
                try? await Task.sleep(nanoseconds: 3_000_000_000)
                return .text("late")
            }
        }) { baseURL in
            let transport = URLSessionTransport()
            await #expect(throws: HTTPTransportError.timedOut) {
                try await transport.send(Self.request("\(baseURL)/slow", timeoutMs: 300), responseBytesMax: 1024)
            }
        }
    }

    @Test func cancellingTheCallerCancelsTheExchange() async throws {
        let (starts, started) = AsyncStream<Void>.makeStream()
        try await Self.withServer({ router in
            router.add("GET", "/slow") { _, _ in
                started.yield()
                try? await Task.sleep(for: .seconds(60))   // until the server's shutdown cancels it
                return .text("late")
            }
        }) { baseURL in
            let transport = URLSessionTransport()
            let call = Task { () async -> HTTPTransportError? in
                do throws(HTTPTransportError) {
                    _ = try await transport.send(Self.request("\(baseURL)/slow"), responseBytesMax: 1024)
                    return nil
                } catch {
                    return error
                }
            }
            // Cancelled while the server holds the answer, however long the request took to get there on a loaded machine.
            var iterator = starts.makeAsyncIterator()
            _ = await iterator.next()
            call.cancel()
            #expect(await call.value == .cancelled)
        }
    }

    @Test func redirectIsReturnedNotFollowedSoTheTokenStaysHome() async throws {
        let followed = Mutex(false)
        try await Self.withServer({ router in
            router.add("GET", "/moved") { _, _ in
                var response = HTTPResponse(status: 302)
                response.headers.add("Location", "/elsewhere")
                return response
            }
            router.add("GET", "/elsewhere") { _, _ in
                followed.withLock { $0 = true }
                return .text("followed")
            }
        }) { baseURL in
            let response = try await URLSessionTransport().send(Self.request("\(baseURL)/moved"), responseBytesMax: 1024)
            #expect(response.status == 302)
            #expect(!followed.withLock { $0 })
        }
    }

    @Test func closedPortIsAConnectionFailure() async throws {
        var closedBaseURL = ""
        try await Self.withServer({ _ in }) { baseURL in closedBaseURL = baseURL }
        let transport = URLSessionTransport()
        do throws(HTTPTransportError) {
            _ = try await transport.send(Self.request("\(closedBaseURL)/anything"), responseBytesMax: 1024)
            Issue.record("a closed port answered")
        } catch {
            guard case .connectionFailed = error else {
                Issue.record("expected connectionFailed, got \(error)")
                return
            }
        }
    }
}
