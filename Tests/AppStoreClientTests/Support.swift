import AppStoreClient
import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import StoreAPITransport
import Synchronization
import Testing

/// Apple's model fixtures: the copy in `Tests/Fixtures/apple-testdata` (CI has no `/work/shared`), or
/// `KAKIN_APPLE_TESTDATA`.
enum Fixtures {
    static let packageRoot: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static let appleTestData: URL = {
        if let path = ProcessInfo.processInfo.environment["KAKIN_APPLE_TESTDATA"] { return URL(fileURLWithPath: path) }
        return packageRoot.appendingPathComponent("Tests/Fixtures/apple-testdata")
    }()

    static var modelsDirectory: URL { appleTestData.appendingPathComponent("models") }

    static func model(_ name: String) throws -> [UInt8] {
        let url = modelsDirectory.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: url.path) else {
            Issue.record("missing Apple fixture \(url.path)")
            throw FixtureMissing()
        }
        return [UInt8](data)
    }

    struct FixtureMissing: Error {}

    /// 2026-06-01 00:00:00 UTC.
    static let now: Int64 = 1_780_272_000_000

    /// One key for the whole test run (key generation is not free).
    static let key: P256PrivateKey = try! P256PrivateKey()
}

/// A clock that moves only when told (or when `AdvancingSleeper` sleeps).
final class ManualClock: Clock {
    private let ms: Mutex<Int64>
    init(_ ms: Int64 = Fixtures.now) { self.ms = Mutex(ms) }
    func nowMs() -> Int64 { ms.withLock { $0 } }
    func advance(by delta: Int64) { ms.withLock { $0 += delta } }
}

/// Records each requested wait and moves the manual clock by it, instantly.
final class AdvancingSleeper: RetrySleeper {
    let clock: ManualClock
    private let waits = Mutex<[Int64]>([])
    /// When set, the n-th sleep (0-based) throws as if the task had been cancelled.
    let cancelAt: Int?

    init(clock: ManualClock, cancelAt: Int? = nil) {
        self.clock = clock
        self.cancelAt = cancelAt
    }

    var waitsMs: [Int64] { waits.withLock { $0 } }

    func sleep(ms: Int64) async throws(CancellationError) {
        let index = waits.withLock { all in
            all.append(ms)
            return all.count - 1
        }
        if index == cancelAt { throw CancellationError() }
        clock.advance(by: ms)
    }
}

/// A transport that answers from a script and remembers what it was sent.
final class ScriptedTransport: HTTPTransport {
    typealias Answer = Result<HTTPClientResponse, HTTPTransportError>
    private let handler: @Sendable (HTTPClientRequest, Int) -> Answer
    private let sent = Mutex<[HTTPClientRequest]>([])

    /// - Parameter handler: gets each request and its 0-based index.
    init(_ handler: @escaping @Sendable (HTTPClientRequest, Int) -> Answer) { self.handler = handler }

    /// Answers in order; the last answer repeats.
    convenience init(_ answers: [Answer]) {
        self.init { _, index in answers[min(index, answers.count - 1)] }
    }

    var requests: [HTTPClientRequest] { sent.withLock { $0 } }

    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        let index = sent.withLock { all in
            all.append(request)
            return all.count - 1
        }
        return try handler(request, index).get()
    }
}

extension HTTPClientRequest {
    var path: String { String(url.split(separator: "?", maxSplits: 1)[0]) }

    /// Query items in order, percent-decoded.
    var queryItems: [(String, String)] {
        let parts = url.split(separator: "?", maxSplits: 1)
        guard parts.count == 2 else { return [] }
        return parts[1].split(separator: "&").map { item in
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(pair[0]).removingPercentEncoding!, String(pair.count > 1 ? pair[1] : "").removingPercentEncoding!)
        }
    }

    func queryValues(_ name: String) -> [String] { queryItems.filter { $0.0 == name }.map(\.1) }

    var bodyJSON: JSONValue? { body.flatMap { try? JSONParser.parse($0) } }

    var bearerToken: String? {
        guard let value = header("Authorization"), value.hasPrefix("Bearer ") else { return nil }
        return String(value.dropFirst(7))
    }
}

func ok(_ body: [UInt8], headers: [String: String] = [:]) -> ScriptedTransport.Answer {
    .success(HTTPClientResponse(status: 200, headers: headers, body: body))
}

func ok(_ json: JSONValue) -> ScriptedTransport.Answer { ok(json.serialized()) }

func status(_ code: Int, _ body: JSONValue? = nil, headers: [String: String] = [:]) -> ScriptedTransport.Answer {
    .success(HTTPClientResponse(status: code, headers: headers, body: body?.serialized() ?? []))
}

func appleError(_ code: Int, _ errorCode: Int64, headers: [String: String] = [:]) -> ScriptedTransport.Answer {
    status(code, ["errorCode": .int(errorCode), "errorMessage": "scripted"], headers: headers)
}

let testIssuerId = "99b16628-15e4-4668-972b-eeff55eeff55"
let testKeyId = "KAKINTEST1"
let testBundleId = "com.example"

func makeConfiguration(
    server: AppStoreServerAPIConfiguration.Server = .apple, key: P256PrivateKey = Fixtures.key
) -> AppStoreServerAPIConfiguration {
    AppStoreServerAPIConfiguration(
        issuerId: testIssuerId, keyId: testKeyId, privateKey: key, bundleId: testBundleId, server: server)
}

/// A client over a scripted transport, a manual clock and an instant sleeper.
struct Harness {
    let client: AppStoreServerAPIClient
    let transport: ScriptedTransport
    let clock: ManualClock
    let sleeper: AdvancingSleeper

    init(
        _ transport: ScriptedTransport, server: AppStoreServerAPIConfiguration.Server = .apple,
        cancelSleepAt: Int? = nil, configure: (inout AppStoreServerAPIConfiguration) -> Void = { _ in }
    ) throws {
        var configuration = makeConfiguration(server: server)
        configure(&configuration)
        clock = ManualClock()
        sleeper = AdvancingSleeper(clock: clock, cancelAt: cancelSleepAt)
        self.transport = transport
        client = try AppStoreServerAPIClient(configuration: configuration, clock: clock, transport: transport, sleeper: sleeper)
    }
}

/// Runs `body` and returns the client error it throws (recording an issue when it throws none).
func apiError<T>(_ body: () async throws(AppStoreServerAPIError) -> T) async -> AppStoreServerAPIError? {
    do {
        _ = try await body()
        Issue.record("expected an AppStoreServerAPIError")
        return nil
    } catch {
        return error
    }
}

/// Header and claims of a compact JWT, unverified.
func jwtParts(_ token: String) -> (header: JSONValue, claims: JSONValue)? {
    let segments = token.split(separator: ".", omittingEmptySubsequences: false)
    guard segments.count == 3, let header = Base64.decode(String(segments[0])), let claims = Base64.decode(String(segments[1])),
        let headerJSON = try? JSONParser.parse(header), let claimsJSON = try? JSONParser.parse(claims)
    else { return nil }
    return (headerJSON, claimsJSON)
}
