import AppStoreSecurity
@testable import AppStoreSimulator
import Foundation
import HTTPServer
import KakinCore
import KakinCrypto
import KakinSystem
import Synchronization
import Testing
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A simulator over the seed-003 test catalog, its clock standing at `startMs`.
func makeSimulator(sink: (any NotificationSink)? = nil, graceDays: Int? = nil, environment: AppStoreEnvironment = .sandbox,
                   catalog: Catalog = offersCatalog()) throws -> AppStoreSimulator {
    let config = SimulatorConfiguration(catalog: catalog, bundleId: "com.example.app", appAppleId: 1234, environment: environment,
                                        gracePeriodDays: graceDays, seed: 7)
    return try AppStoreSimulator(configuration: config, clock: SimulatedClock(startMs: startMs), sink: sink)
}

struct Reply: Sendable {
    var status: Int
    var body: [UInt8]
    var json: JSONValue { (try? JSONParser.parse(body)) ?? .null }
}

/// Calls the simulator in-process, as the server would.
func call(_ sim: AppStoreSimulator, _ method: String, _ path: String, _ body: JSONValue? = nil, query: [(String, String)] = [],
          bearer: String? = nil, rawBody: [UInt8]? = nil) async -> Reply {
    var headers = HTTPHeaders()
    if let bearer { headers.set("Authorization", "Bearer \(bearer)") }
    let request = HTTPRequest(method: method, path: path, queryItems: query.map { (name: $0.0, value: $0.1) }, headers: headers,
                              body: rawBody ?? body?.serialized() ?? [], requestId: "req_test")
    let response = await sim.handle(request)
    return Reply(status: response.status, body: response.body)
}

/// An App Store Server API token for the simulator's own key, made like Apple's library makes them
/// (no `iat`, `exp` five minutes ahead of real time) unless told otherwise.
func apiToken(_ sim: AppStoreSimulator, bundleId: String = "com.example.app", issuedAt: Int64? = nil, expiresIn: Int64 = 300,
              nowSeconds: Int64 = SystemClock().nowMs() / 1000, keyId: String? = nil, key: P256PrivateKey? = nil, audience: String? = nil) throws -> String {
    let k = sim.apiKey
    let signing = try key ?? P256PrivateKey(pemPKCS8: k.privateKeyPEM)
    if let audience {
        // Built by hand: the library's maker always writes Apple's audience.
        let header: JSONValue = ["alg": "ES256", "kid": .string(keyId ?? k.keyId), "typ": "JWT"]
        let claims: JSONValue = ["iss": .string(k.issuerId), "exp": .int(nowSeconds + expiresIn), "aud": .string(audience), "bid": .string(bundleId)]
        let input = Base64.urlEncode(header.serialized()) + "." + Base64.urlEncode(claims.serialized())
        return input + "." + Base64.urlEncode(try signing.signES256(Array(input.utf8)))
    }
    return try AppStoreServerAPIToken.make(key: signing, keyId: keyId ?? k.keyId, issuerId: k.issuerId, bundleId: bundleId,
                                           issuedAtSeconds: issuedAt, expiresAtSeconds: nowSeconds + expiresIn)
}

/// Verifies the simulator's signed data as Kakin would, trusting only the simulator's root.
func verifier(_ sim: AppStoreSimulator) throws -> SignedDataVerifier {
    try SignedDataVerifier(trustedRoots: [sim.rootCertificateDER],
                           apps: [AppIdentity(bundleId: "com.example.app", appAppleId: 1234, environments: [.sandbox, .production])],
                           clock: { SystemClock().nowMs() })
}

/// A sink that answers from a script (then success) and records what it was sent.
final class ScriptedSink: NotificationSink {
    private let state: Mutex<(script: [SendAttemptResult], received: [String])>
    init(_ script: [SendAttemptResult] = []) { state = Mutex((script, [])) }

    func deliver(signedPayload: String) async -> SendAttemptResult {
        state.withLock { s in
            s.received.append(signedPayload)
            return s.script.isEmpty ? .success : s.script.removeFirst()
        }
    }

    var received: [String] { state.withLock { $0.received } }
}

/// An HTTP receiver on a loopback port answering each notification POST with the next scripted status
/// (then 200), recording the bodies.
final class NotificationReceiver: Sendable {
    final class Log: Sendable {
        let state: Mutex<(statuses: [Int], bodies: [[UInt8]])>
        init(_ statuses: [Int]) { state = Mutex((statuses, [])) }
    }

    let server: HTTPServer
    let log: Log

    init(statuses: [Int]) throws {
        let log = Log(statuses)
        self.log = log
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
        configuration.threadCount = 1
        server = HTTPServer(configuration: configuration, handler: { request in
            let status = log.state.withLock { s -> Int in
                s.bodies.append(request.body)
                return s.statuses.isEmpty ? 200 : s.statuses.removeFirst()
            }
            return HTTPResponse(status: status)
        }, rejectionResponder: { rejection, _ in HTTPResponse(status: rejection.suggestedStatus) })
        try server.start()
    }

    var url: URL { URL(string: "http://127.0.0.1:\(server.port)/notifications")! }
    var bodies: [[UInt8]] { log.state.withLock { $0.bodies } }
}

/// Serves a simulator on a loopback port, like `kakin simulator serve`.
func serve(_ sim: AppStoreSimulator) throws -> HTTPServer {
    var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
    configuration.threadCount = 2
    let server = HTTPServer(configuration: configuration, handler: { await sim.handle($0) },
                            rejectionResponder: { rejection, id in SimulatorCommand.rejectionResponse(rejection, id) })
    try server.start()
    return server
}

/// The smallest App Store Server API client: one fresh token per request, as Apple's library does.
struct TestAPIClient {
    let base: String
    let sim: AppStoreSimulator

    func get(_ path: String, query: [(String, String)] = [], token: String? = nil) async throws -> Reply {
        var components = URLComponents(string: base + path)!
        if !query.isEmpty { components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        var request = URLRequest(url: components.url!, timeoutInterval: 10)
        request.setValue("Bearer \(try token ?? apiToken(sim))", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSession.shared.data(for: request)
        return Reply(status: (response as! HTTPURLResponse).statusCode, body: Array(data))
    }
}
