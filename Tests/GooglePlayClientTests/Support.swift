import Foundation
import GooglePlaySecurity
@testable import GooglePlaySimulator
import HTTPServer
import KakinCore
import StoreAPITransport
import Synchronization
import Testing

/// Time that moves only when told.
final class ManualClock: Clock {
    private let ms: Mutex<Int64>
    init(_ ms: Int64) { self.ms = Mutex(ms) }
    func nowMs() -> Int64 { ms.withLock { $0 } }
    func set(_ value: Int64) { ms.withLock { $0 = value } }
}

/// The real time (the Play simulator's access tokens and Google's libraries live on it).
struct WallClock: Clock {
    func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }
}

enum Fixtures {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
}

/// Records every push it receives and answers with the status it is told (200 unless set).
final class PushReceiver: Sendable {
    struct Push: Sendable {
        var body: [UInt8]
        var authorization: String?
    }

    final class Record: Sendable {
        let pushes = Mutex<[Push]>([])
        let status = Mutex(200)
    }

    let record = Record()
    let server: HTTPServer
    var url: String { "http://127.0.0.1:\(server.port)/v1/notifications/googleplay" }

    init() throws {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.threadCount = 1
        let record = self.record
        server = HTTPServer(configuration: configuration, handler: { request in
            record.pushes.withLock { $0.append(Push(body: request.body, authorization: request.headers["Authorization"])) }
            return HTTPResponse(status: record.status.withLock { $0 })
        }, rejectionResponder: { rejection, _ in HTTPResponse(status: rejection.suggestedStatus) })
        try server.start()
    }

    func stop() async { await server.shutdown(gracePeriodSeconds: 0) }
}

/// The Play simulator on an ephemeral loopback port, mounted under `/play-simulator` as in local mode, on a manual
/// clock starting at the real time (Google's libraries check push tokens against the real clock).
final class PlayServer: Sendable {
    let clock = ManualClock(WallClock().nowMs())
    let simulator: GooglePlaySimulator
    let server: HTTPServer
    var base: String { "http://127.0.0.1:\(server.port)" }
    var apiRoot: String { base + "/play-simulator/" }

    init(push: GooglePlaySimulator.PushSettings = .init()) throws {
        simulator = try GooglePlaySimulator(configuration: .demo(seed: 7), clock: clock, wall: WallClock(), push: push)
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.threadCount = 2
        let simulator = self.simulator
        server = HTTPServer(configuration: configuration, handler: { await simulator.handle($0) },
                            rejectionResponder: { rejection, _ in HTTPResponse(status: rejection.suggestedStatus) })
        try server.start()
    }

    func stop() async { await server.shutdown(gracePeriodSeconds: 0) }

    /// A control API call in-process (as curl would make it).
    func control(_ method: String, _ path: String, _ body: JSONValue? = nil) async throws -> JSONValue {
        let response = await simulator.handle(HTTPRequest(method: method, path: "/play-simulator" + path, body: body?.serialized() ?? [],
                                                          requestId: "req_test"))
        try #require((200...299).contains(response.status), "\(method) \(path): \(response.status) \(String(decoding: response.body, as: UTF8.self))")
        return try JSONParser.parse(response.body)
    }

    /// The service account Kakin would be configured with: the simulator's key file, `token_uri` on this port.
    func serviceAccount() throws -> GoogleServiceAccount {
        try GoogleServiceAccount(fileBytes: simulator.serviceAccountFile(tokenURI: base + "/play-simulator/token"))
    }
}
