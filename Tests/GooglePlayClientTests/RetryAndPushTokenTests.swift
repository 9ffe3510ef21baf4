import Foundation
import GooglePlayClient
import GooglePlaySecurity
@testable import GooglePlaySimulator
import KakinCore
import KakinCrypto
import StoreAPITransport
import Synchronization
import Testing

/// Answers from a script: the token endpoint always grants; API calls get the next scripted answer.
final class ScriptedTransport: HTTPTransport {
    let answers: Mutex<[HTTPClientResponse]>
    let apiCalls = Mutex(0)
    init(_ answers: [HTTPClientResponse]) { self.answers = Mutex(answers) }
    func send(_ request: HTTPClientRequest, responseBytesMax: Int) async throws(HTTPTransportError) -> HTTPClientResponse {
        if request.url.hasSuffix("/token") {
            return HTTPClientResponse(status: 200, body: Array(#"{"access_token":"t","expires_in":3599,"token_type":"Bearer"}"#.utf8))
        }
        apiCalls.withLock { $0 += 1 }
        return answers.withLock { $0.isEmpty ? HTTPClientResponse(status: 500) : $0.removeFirst() }
    }
}

final class RecordingSleeper: RetrySleeper {
    let waits = Mutex<[Int64]>([])
    func sleep(ms: Int64) async throws(CancellationError) { waits.withLock { $0.append(ms) } }
}

@Suite struct RetryTests {
    static let account = try! GoogleServiceAccount(clientEmail: "a@b.iam.gserviceaccount.com", privateKeyId: "k", privateKey: RSAPrivateKey(),
                                                   tokenURI: "http://127.0.0.1:1/token", projectId: nil)

    func client(_ transport: ScriptedTransport, _ sleeper: RecordingSleeper) throws -> GooglePlayDeveloperAPIClient {
        try GooglePlayDeveloperAPIClient(configuration: GooglePlayClientConfiguration(serviceAccount: Self.account, packageName: "dev.kakin.demo",
                                                                                      apiRoot: "http://127.0.0.1:1/"),
                                         transport: transport, clock: WallClock(), sleeper: sleeper)
    }

    static func google(_ code: Int, _ reason: String, headers: [String: String] = [:]) -> HTTPClientResponse {
        HTTPClientResponse(status: code, headers: headers, body: GoogleAPIErrorBody.json(code: code, status: "X", reason: reason, message: "m").serialized())
    }

    @Test func serverErrorsAndRateLimitsAreRetriedWithRetryAfterInSeconds() async throws {
        let ok = HTTPClientResponse(status: 204)
        let transport = ScriptedTransport([Self.google(503, "backendError"), Self.google(429, "rateLimitExceeded", headers: ["Retry-After": "2"]), ok])
        let sleeper = RecordingSleeper()
        try await client(transport, sleeper).consumeProduct(productId: "coins_500", token: "t")
        #expect(transport.apiCalls.withLock { $0 } == 3)
        let waits = sleeper.waits.withLock { $0 }
        #expect(waits.count == 2 && (250...500).contains(waits[0]) && waits[1] == 2000)
    }

    @Test func refusalsAreNotRetriedAndTooLongARetryAfterFailsAtOnce() async throws {
        for (answer, kind) in [(Self.google(400, "invalid"), GooglePlayAPIError.Kind.refused), (Self.google(410, "purchaseTokenNoLongerValid"), .tokenNoLongerValid),
                               (Self.google(429, "rateLimitExceeded", headers: ["Retry-After": "3600"]), .unavailable)] {
            let transport = ScriptedTransport([answer])
            let api = try client(transport, RecordingSleeper())
            do throws(GooglePlayAPIError) {
                _ = try await api.subscriptionV2(token: "t")
                Issue.record("\(answer.status) must fail")
            } catch {
                #expect(error.kind == kind && error.attempts == 1 && transport.apiCalls.withLock { $0 } == 1)
                if answer.status == 429 { #expect(error.retryAfterMs == 3_600_000 && error.isRetryable) }
            }
        }
        let exhausted = try client(ScriptedTransport([]), RecordingSleeper())
        do throws(GooglePlayAPIError) {
            _ = try await exhausted.subscriptionV2(token: "t")
        } catch {
            #expect(error.kind == .unavailable && error.attempts == 4 && error.isRetryable && !error.isRefused)
        }
    }
}

/// RTDN push tokens: what the simulator signs passes Kakin's verifier with the simulator's JWKS over HTTP; forged,
/// expired, wrong-audience or wrong-email tokens are refused with the reason; the key set is cached and refetched
/// at most once per interval for unknown key ids.
@Suite(.serialized) struct PushTokenTests {
    final class CountingSource: JSONWebKeySetSource {
        let inner: any JSONWebKeySetSource
        let fetches = Mutex(0)
        init(_ inner: any JSONWebKeySetSource) { self.inner = inner }
        func fetchKeySet() async throws(PushTokenFailure) -> JSONWebKeySet {
            fetches.withLock { $0 += 1 }
            return try await inner.fetchKeySet()
        }
    }

    @Test func aPushTheSimulatorSignedVerifiesAndForgeriesDoNot() async throws {
        let receiver = try PushReceiver()
        let play = try PlayServer(push: .init(sink: HTTPPlayPushSink(url: URL(string: receiver.url)!), audience: receiver.url))
        defer { Task { await play.stop(); await receiver.stop() } }
        let bought = try await play.control("POST", "/v1/purchases", ["productId": "noads"])
        let push = try #require(receiver.record.pushes.withLock { $0.first })
        let envelope = try PubSubPushMessage(json: try JSONParser.parse(push.body))
        let notification = try envelope.developerNotification()
        #expect(notification.packageName == "dev.kakin.demo" && notification.purchaseToken == bought["purchaseToken"]?.stringValue)
        guard case .oneTimeProduct(let type, _, let sku) = notification.kind else { Issue.record("\(notification.kind)"); return }
        #expect(type == .purchased && sku == "noads")

        let source = CountingSource(HTTPKeySetSource(url: play.base + "/play-simulator/oauth2/v3/certs", transport: URLSessionTransport()))
        let email = play.simulator.pushSettings.serviceAccountEmail
        let verifier = PushTokenVerifier(policy: PushTokenPolicy(audience: receiver.url, serviceAccountEmail: email), source: source)
        let now = play.clock.nowMs()
        let claims = try await verifier.verify(authorization: push.authorization, nowMs: now)
        #expect(claims.email == email && claims.audience == receiver.url && claims.issuer == "https://accounts.google.com")
        // Pushes arriving together on a cold cache share one fetch, and every one verifies.
        let cold = CountingSource(HTTPKeySetSource(url: play.base + "/play-simulator/oauth2/v3/certs", transport: URLSessionTransport()))
        let together = PushTokenVerifier(policy: PushTokenPolicy(audience: receiver.url, serviceAccountEmail: email), source: cold)
        let verified = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<8 { group.addTask { (try? await together.verify(authorization: push.authorization, nowMs: now)) != nil } }
            return await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(verified == 8 && cold.fetches.withLock { $0 } == 1)

        func refusal(_ verifier: PushTokenVerifier, _ token: String?, at ms: Int64) async -> PushTokenFailure.Reason? {
            do throws(PushTokenFailure) {
                _ = try await verifier.verify(authorization: token.map { "Bearer " + $0 }, nowMs: ms)
                return nil
            } catch {
                return error.reason
            }
        }
        let token = String(push.authorization!.dropFirst(7))
        #expect(await refusal(verifier, nil, at: now) == .missing)
        #expect(await refusal(verifier, token, at: now + 2 * 3_600_000) == .expired)
        let elsewhere = PushTokenVerifier(policy: PushTokenPolicy(audience: "https://elsewhere.example/", serviceAccountEmail: email), source: source)
        #expect(await refusal(elsewhere, token, at: now) == .wrongAudience)
        let otherEmail = PushTokenVerifier(policy: PushTokenPolicy(audience: receiver.url, serviceAccountEmail: "x@y"), source: source)
        #expect(await refusal(otherEmail, token, at: now) == .wrongEmail)

        // The same claims signed by another key under the simulator's key id: the signature fails.
        let simulatorKid = try #require(play.simulator.pushKeySet.keys.keys.first)
        let forger = PushTokenSigner(key: try RSAPrivateKey(), keyId: simulatorKid)
        let forged = try forger.sign(audience: receiver.url, email: email, subject: "1", nowSeconds: now / 1000)
        #expect(await refusal(verifier, forged, at: now) == .invalidSignature)
        // An unknown key id refetches once, then not again within the interval.
        let fetchesBefore = source.fetches.withLock { $0 }
        let later = now + 2 * 3_600_000 + 31_000  // 31 s after the last fetch (the expired check refetched the aged set)
        let stranger = try PushTokenSigner(key: RSAPrivateKey(), keyId: "unknown-kid").sign(audience: receiver.url, email: email, subject: "1",
                                                                                             nowSeconds: later / 1000)
        #expect(await refusal(verifier, stranger, at: later) == .unknownKey)
        #expect(await refusal(verifier, stranger, at: later + 1000) == .unknownKey)
        #expect(source.fetches.withLock { $0 } == fetchesBefore + 1)
        // No keys at all (the certs URL down): retryable.
        let down = PushTokenVerifier(policy: PushTokenPolicy(audience: receiver.url, serviceAccountEmail: email),
                                     source: HTTPKeySetSource(url: "http://127.0.0.1:1/certs", transport: URLSessionTransport()))
        do throws(PushTokenFailure) {
            _ = try await down.verify(token: token, nowMs: now)
            Issue.record("no keys must be refused")
        } catch {
            #expect(error.reason == .keysUnavailable && error.isRetryable && error.errorKind == .pushTokenKeysUnavailable)
        }
    }
}
