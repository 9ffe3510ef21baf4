import Foundation
import GooglePlaySecurity
import HTTPServer
import KakinCore
import KakinCrypto
import Synchronization

/// A fake Google Play on a clock it is handed: it sells the catalog, moves subscriptions through renewals, grace,
/// hold, pause and expiry as that clock moves, serves the Developer API at Google's paths (bearer tokens from its own
/// OAuth token endpoint, for the service account it generates), and pushes RTDNs as Pub/Sub does (wrapped envelope,
/// OIDC bearer token it signs; redelivered with backoff while refused).
///
/// Threading: the engine (a value type) sits behind a lock held only for short synchronous work; pushes are sent
/// outside it. Calls apply one at a time under the lock; an action or a clock move answers once the pushes it made
/// due have had their attempt.
public final class GooglePlaySimulator: Sendable {
    /// Simulated time (in local mode the App Store simulator's clock). The engine catches up with it on every call.
    public let clock: any Clock
    /// Real time: access tokens live an hour of it (Google's libraries cache them by the wall clock).
    let wall: any Clock
    let core: Mutex<Core>
    let push: Mutex<PushSettings>

    static let accessTokenLifetimeSeconds: Int64 = 3600

    struct Core: Sendable {
        var engine: PlayEngine
        var keys: PlayKeys
        /// Issued bearer tokens → their expiry on the wall clock (ms).
        var accessTokens: [String: Int64] = [:]
    }

    /// Where RTDNs are pushed and what their OIDC token says.
    public struct PushSettings: Sendable {
        public var sink: (any PlayPushSink)?
        /// The push token's `aud` (Pub/Sub's default is the push endpoint's URL).
        public var audience: String
        /// The push token's `email`: the push subscription's service account.
        public var serviceAccountEmail: String
        /// The `subscription` field of the envelope.
        public var subscription: String

        public init(sink: (any PlayPushSink)? = nil, audience: String = "http://127.0.0.1:8080/v1/notifications/googleplay",
                    serviceAccountEmail: String = "rtdn-push@kakin-play-simulator.iam.gserviceaccount.com",
                    subscription: String = "projects/kakin-play-simulator/subscriptions/play-rtdn") {
            self.sink = sink
            self.audience = audience
            self.serviceAccountEmail = serviceAccountEmail
            self.subscription = subscription
        }
    }

    /// A fresh simulator: new service-account and push-signing keys, the engine at the clock's time.
    public init(configuration: PlaySimulatorConfiguration, clock: any Clock, wall: any Clock, push: PushSettings = PushSettings()) throws(KakinError) {
        try configuration.validate()
        let keys = try PlayKeys.generate(seed: configuration.seed)
        self.clock = clock
        self.wall = wall
        core = Mutex(Core(engine: PlayEngine(config: configuration, startMs: clock.nowMs()), keys: keys))
        self.push = Mutex(push)
    }

    /// Starts from a state file (`snapshot()`): same keys, purchases, orders and RTDN log; the engine at its saved time.
    public init(stateFile bytes: [UInt8], clock: any Clock, wall: any Clock, push: PushSettings = PushSettings()) throws(KakinError) {
        let file = try PlayStateFile.decode(bytes)
        var engine = file.engine
        engine.requeueInFlight()
        self.clock = clock
        self.wall = wall
        core = Mutex(Core(engine: engine, keys: file.keys))
        self.push = Mutex(push)
    }

    public var configuration: PlaySimulatorConfiguration { core.withLock { $0.engine.config } }

    /// The whole state as JSON, to save beside Kakin's database (it holds private keys: keep it like a secret).
    public func snapshot() -> [UInt8] {
        core.withLock { PlayStateFile(engine: $0.engine, keys: $0.keys).encoded() }
    }

    public func setPush(_ settings: PushSettings) { push.withLock { $0 = settings } }
    public var pushSettings: PushSettings { push.withLock { $0 } }

    /// The service account's key file, its `token_uri` pointing at `tokenURI` (the simulator's `/play-simulator/token`).
    public func serviceAccountFile(tokenURI: String) -> [UInt8] {
        let keys = core.withLock { $0.keys }
        return ((try? keys.serviceAccount(tokenURI: tokenURI).fileJSON(clientId: keys.clientId)) ?? .null).serialized()
    }

    /// The JWKS of the keys that sign push tokens (served at `/play-simulator/oauth2/v3/certs`).
    public var pushKeySet: JSONWebKeySet { core.withLock { $0.keys.pushSigner().keySet } }

    // MARK: - Time

    /// The next moment something happens by itself (renewal, expiry, grace or hold end, pause, acknowledgement
    /// deadline) or a push is due: a shared clock stops there too.
    public func nextEventMs() -> Int64? {
        let pushing = push.withLock { $0.sink != nil }
        return core.withLock { c in Self.nextStop(c.engine, pushing: pushing) }
    }

    static func nextStop(_ engine: PlayEngine, pushing: Bool) -> Int64? {
        let event = engine.nextEventMs()
        guard pushing, let due = engine.nextDeliveryDueMs() else { return event }
        return min(event ?? due, due)
    }

    /// Applies everything due up to `targetMs` at its own instant, pushing RTDNs as their times come. Returns the
    /// RTDNs published (`SUBSCRIPTION_RENEWED`, …).
    @discardableResult
    public func advance(toMs targetMs: Int64) async -> [String] {
        var produced: [String] = []
        let pushing = push.withLock { $0.sink != nil }
        var steps = 0
        while true {
            steps += 1
            let finished = core.withLock { c -> Bool in
                if let next = Self.nextStop(c.engine, pushing: pushing), next <= targetMs, steps < 100_000 {
                    produced += c.engine.advance(toMs: max(next, c.engine.nowMs))
                    return false
                }
                produced += c.engine.advance(toMs: max(targetMs, c.engine.nowMs))
                return true
            }
            await deliverDue()
            if finished { break }
        }
        return produced
    }

    /// Runs `body` on the engine (caught up with the clock), then pushes what became due.
    func act<T: Sendable, E: Error>(_ body: (inout PlayEngine) throws(E) -> T) async throws(E) -> T {
        let result = try core.withLock { (c: inout Core) throws(E) -> T in
            catchUp(&c)
            return try body(&c.engine)
        }
        await deliverDue()
        return result
    }

    func read<T: Sendable, E: Error>(_ body: (PlayEngine) throws(E) -> T) throws(E) -> T {
        try core.withLock { (c: inout Core) throws(E) -> T in
            catchUp(&c)
            return try body(c.engine)
        }
    }

    func catchUp(_ c: inout Core) {
        let now = clock.nowMs()
        if now > c.engine.nowMs { c.engine.advance(toMs: now) }
    }

    /// Pushes every RTDN due now, a few at a time, each with a fresh OIDC token, and records each answer.
    func deliverDue() async {
        let settings = push.withLock { $0 }
        guard let sink = settings.sink else { return }
        let (batch, signer, nowSeconds) = core.withLock { c in (c.engine.takeDueDeliveries(), c.keys.pushSigner(), c.engine.nowMs / 1000) }
        guard !batch.isEmpty else { return }
        var results: [(String, Int)] = []
        await withTaskGroup(of: (String, Int).self) { group in
            var pending = batch[...]
            func start(_ item: (messageId: String, data: String, publishTimeMs: Int64)) {
                let body = PubSubPushMessage.envelope(data: Array(item.data.utf8), messageId: item.messageId, publishTimeMs: item.publishTimeMs,
                                                      subscription: settings.subscription).serialized()
                let token = (try? signer.sign(audience: settings.audience, email: settings.serviceAccountEmail,
                                              subject: PlayKeys.pushSubject, nowSeconds: nowSeconds)) ?? ""
                group.addTask { (item.messageId, await sink.push(body: body, authorization: "Bearer " + token)) }
            }
            for _ in 0..<Self.pushConcurrencyMax {
                guard let item = pending.popFirst() else { break }
                start(item)
            }
            while let done = await group.next() {
                results.append(done)
                if let item = pending.popFirst() { start(item) }
            }
        }
        core.withLock { c in
            for (id, status) in results { c.engine.recordAttempt(messageId: id, status: status) }
        }
    }

    // MARK: - Access tokens

    /// Exchanges a JWT-bearer assertion for an access token (Google's `oauth2/token` answer).
    func grant(assertion: String, tokenURLs: Set<String>) throws(AssertionFailure) -> (token: String, expiresIn: Int64) {
        let wallMs = wall.nowMs()
        return try core.withLock { (c: inout Core) throws(AssertionFailure) -> (String, Int64) in
            let verifier = c.keys.assertionVerifier(audiences: tokenURLs.union([ServiceAccountAssertion.googleTokenURL]))
            // The signer's clock may be the simulated one (Kakin in local mode) or the real one (Google's libraries).
            do throws(AssertionFailure) {
                _ = try verifier.verify(assertion, nowSeconds: wallMs / 1000)
            } catch where [.expired, .issuedInFuture].contains(error.reason) {
                _ = try verifier.verify(assertion, nowSeconds: c.engine.nowMs / 1000)
            }
            if c.accessTokens.count >= Self.accessTokensMax {
                c.accessTokens = c.accessTokens.filter { $0.value > wallMs }
                if c.accessTokens.count >= Self.accessTokensMax, let oldest = c.accessTokens.min(by: { $0.value < $1.value })?.key {
                    c.accessTokens[oldest] = nil
                }
            }
            let token = "ya29.play-sim." + c.keys.newAccessToken()
            c.accessTokens[token] = wallMs + Self.accessTokenLifetimeSeconds * 1000
            return (token, Self.accessTokenLifetimeSeconds - 1)
        }
    }

    /// Whether `Authorization` carries an access token this simulator issued that has not expired.
    func isAuthorized(_ authorization: String?) -> Bool {
        guard let authorization, authorization.hasPrefix("Bearer ") else { return false }
        let token = String(authorization.dropFirst(7))
        let wallMs = wall.nowMs()
        return core.withLock { ($0.accessTokens[token] ?? .min) > wallMs }
    }

    /// A ready-made access token (for curl walkthroughs: `GET /play-simulator/v1/access-token`).
    func issueAccessToken() -> String {
        let wallMs = wall.nowMs()
        return core.withLock { c in
            let token = "ya29.play-sim." + c.keys.newAccessToken()
            c.accessTokens[token] = wallMs + Self.accessTokenLifetimeSeconds * 1000
            return token
        }
    }
}
