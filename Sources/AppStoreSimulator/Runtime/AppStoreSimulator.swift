import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinCrypto
import KakinSystem
import Synchronization

/// The App Store Server API key a client uses against the simulator (the `.p8` key, its id and issuer).
public struct SimulatorAPIKey: Sendable, Equatable {
    public let issuerId: String
    public let keyId: String
    /// PKCS#8 PEM, like the `.p8` file App Store Connect hands out once.
    public let privateKeyPEM: String
}

/// A fake App Store on a controllable clock: it sells the catalog, signs transactions, renewal info and
/// notifications with its own CA (as Apple's chain is built), serves the App Store Server API at Apple's
/// paths and its control API under `/simulator/v1/`, and delivers Notifications V2 to a sink with Apple's
/// retry schedule in simulated time.
///
/// Threading: the engine (a value-type state machine) sits behind a lock held only for short synchronous
/// work; notification delivery happens outside it. Actions and clock moves pass one at a time through a
/// gate and return once the notifications they caused have had their delivery attempt.
public final class AppStoreSimulator: Sendable {
    /// Simulated time. In local mode Kakin reads this clock too.
    public let clock: SimulatedClock
    let core: Mutex<Core>
    let gate = AsyncGate()
    let sink: (any NotificationSink)?
    let wall: any Clock
    /// Other simulated stores on this clock (local mode's Play simulator): see `SimulatedTimeFollower`.
    let followers = Mutex<[any SimulatedTimeFollower]>([])
    /// How Get Retention Message calls are made (API/Apple2026API.swift).
    let retentionTransport = Mutex<any RetentionMessageTransport>(HTTPRetentionMessageTransport())

    struct Core: Sendable {
        var engine: SimulatorState
        var authority: SigningCertificateAuthority
        var apiKey: APIKeyRecord
        var registeredKeys: [RegisteredKeyRecord]
        /// The verifier over the generated key plus registered ones, rebuilt when keys change.
        var tokenVerifier: AppStoreServerAPITokenVerifier
    }

    /// Starts a fresh simulator: a new signing CA and API key, the clock at `clock`'s time.
    /// - Parameters:
    ///   - configuration: the app, catalog and behaviour settings.
    ///   - clock: simulated time; nil starts at the real time now, standing still until advanced.
    ///   - sink: where notifications go; nil keeps them only in Notification History.
    ///   - wall: the real clock (API tokens made by outside clients are checked against it as well).
    public init(configuration: SimulatorConfiguration, clock: SimulatedClock? = nil, sink: (any NotificationSink)?,
                wall: any Clock = SystemClock()) throws(KakinError) {
        do {
            try configuration.validate()
        } catch {
            throw KakinError(.invalidConfiguration, error.description)
        }
        let clock = clock ?? SimulatedClock(startMs: wall.nowMs(), wall: wall)
        let start = clock.nowMs()
        let authority = try Self.makeAuthority(startMs: start)
        let key = try Self.makeAPIKey()
        let engine = SimulatorState(config: configuration, signer: AuthoritySigner(authority.signer()), startMs: start)
        let verifier = try Self.verifier(key: key, registered: [], bundleId: configuration.bundleId)
        self.clock = clock
        self.sink = sink
        self.wall = wall
        core = Mutex(Core(engine: engine, authority: authority, apiKey: key, registeredKeys: [], tokenVerifier: verifier))
    }

    /// Starts from a saved state file (`GET /simulator/v1/state`): same CA, keys, clock time and history.
    /// - Parameter timeRate: replaces the saved time rate when given.
    public convenience init(stateFile bytes: [UInt8], sink: (any NotificationSink)?, timeRate: Double? = nil,
                            wall: any Clock = SystemClock()) throws(KakinError) {
        let file = try SimulatorStateFile.decode(bytes)
        let loaded = try Self.core(from: file)
        let clock = SimulatedClock(startMs: file.clockMs, timeRate: timeRate ?? file.timeRate, wall: wall)
        try self.init(configuration: loaded.engine.config, clock: clock, sink: sink, wall: wall)
        core.withLock { $0 = loaded }
    }

    // MARK: - Public surface for the composition layer

    /// The root certificate (DER) that verifiers must trust for the simulator's signed data.
    public var rootCertificateDER: [UInt8] { core.withLock { $0.authority.rootDER } }

    /// The generated App Store Server API key (also served by `GET /simulator/v1/api-key`).
    public var apiKey: SimulatorAPIKey {
        core.withLock { SimulatorAPIKey(issuerId: $0.apiKey.issuerId, keyId: $0.apiKey.keyId, privateKeyPEM: $0.apiKey.privateKeyPEM) }
    }

    public var configuration: SimulatorConfiguration { core.withLock { $0.engine.config } }

    /// The whole state as a state file, for `--state FILE` or `GET /simulator/v1/state`.
    public func snapshot() -> [UInt8] {
        core.withLock { c in
            SimulatorStateFile(format: SimulatorStateFile.currentFormat, configuration: ConfigurationRecord(c.engine.config),
                               clockMs: c.engine.nowMs, timeRate: clock.timeRate,
                               signingAuthority: ((try? c.authority.exported()) ?? .null).jsonString, apiKey: c.apiKey,
                               registeredKeys: c.registeredKeys, engine: c.engine.store).encoded()
        }
    }

    /// Replaces the whole state with a saved one (the clock goes to the saved time, backwards if need be).
    public func restore(stateFile bytes: [UInt8]) async throws(KakinError) {
        let file = try SimulatorStateFile.decode(bytes)
        let loaded = try Self.core(from: file)
        await gate.acquire()
        defer { gate.release() }
        core.withLock { $0 = loaded }
        clock.reset(toMs: file.clockMs)
    }

    /// Moves simulated time forward, applying renewals, billing retries, grace periods and expirations at
    /// their own instants, and delivering (and retrying) notifications as their times come. Returns the
    /// notifications produced, once every attempt due by the new time has been made.
    @discardableResult
    public func advance(seconds: Int64) async -> [String] {
        let target = clock.nowMs() + max(0, min(seconds, Self.advanceSecondsMax)) * 1000
        return await advance(toMs: target)
    }

    /// With a time rate, runs until cancelled: applies due events and delivers due notifications as simulated
    /// time passes (every `intervalMs` of real time).
    public func runTicker(intervalMs: Int = 250) async {
        while !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(max(10, intervalMs)))
            if clock.timeRate > 0 { _ = await advance(toMs: clock.nowMs()) }
        }
    }

    // MARK: - Driving the engine

    func advance(toMs target: Int64) async -> [String] {
        await gate.acquire()
        defer { gate.release() }
        var produced: [String] = []
        let followers = self.followers.withLock { $0 }
        if sink == nil, followers.isEmpty {
            // Nothing to deliver between events: the engine applies them all, in order, in one go.
            return core.withLock { c in
                let out = c.engine.advance(toMs: max(target, c.engine.nowMs))
                clock.moveForward(toMs: c.engine.nowMs)
                return out
            }
        }
        var steps = 0
        while true {
            steps += 1
            let followerNext = followers.compactMap { $0.nextEventMs() }.min()
            let finished = core.withLock { c -> Bool in
                var next = c.engine.nextEventMs()
                if sink != nil, let due = c.engine.nextDeliveryDueMs() { next = min(next ?? due, due) }
                if let followerNext, followerNext > c.engine.nowMs { next = min(next ?? followerNext, followerNext) }
                if let next, next <= target, steps < 1_000_000 {
                    produced += c.engine.advance(toMs: next)
                    clock.moveForward(toMs: c.engine.nowMs)
                    return false
                }
                produced += c.engine.advance(toMs: max(target, c.engine.nowMs))
                clock.moveForward(toMs: c.engine.nowMs)
                return true
            }
            await deliverDue()
            for follower in followers { await follower.advance(toMs: clock.nowMs()) }
            if finished { break }
        }
        return produced
    }

    /// Adds a store that moves with this clock: every clock move also stops at its events and brings it along.
    public func addFollower(_ follower: any SimulatedTimeFollower) {
        followers.withLock { $0.append(follower) }
    }

    /// Brings the engine up to the clock (with a time rate the clock runs ahead between calls).
    func catchUp(_ c: inout Core) {
        let now = clock.nowMs()
        if now > c.engine.nowMs { c.engine.advance(toMs: now) }
    }

    /// Runs one action on the engine, then delivers what it queued. Refused actions change nothing.
    func act<T: Sendable>(_ body: (inout SimulatorState) throws(KakinError) -> T) async throws(KakinError) -> T {
        await gate.acquire()
        defer { gate.release() }
        let result = try core.withLock { (c: inout Core) throws(KakinError) -> T in
            catchUp(&c)
            return try body(&c.engine)
        }
        await deliverDue()
        return result
    }

    /// The same for App Store Server API calls that change state (Apple's error codes). These skip the gate:
    /// Kakin may make them while handling a notification the gate's holder is delivering (a consumption
    /// answer to CONSUMPTION_REQUEST); the engine lock alone keeps them atomic.
    func actAPI<T: Sendable>(_ body: (inout SimulatorState) throws(AppStoreAPIError) -> T) async throws(AppStoreAPIError) -> T {
        let result = try core.withLock { (c: inout Core) throws(AppStoreAPIError) -> T in
            catchUp(&c)
            return try body(&c.engine)
        }
        await deliverDue()
        return result
    }

    func read<T: Sendable>(_ body: (SimulatorState) throws(AppStoreAPIError) -> T) throws(AppStoreAPIError) -> T {
        try core.withLock { (c: inout Core) throws(AppStoreAPIError) -> T in
            catchUp(&c)
            return try body(c.engine)
        }
    }

    /// Sends every notification due now, a few at a time, and records each attempt. Never under the lock.
    func deliverDue() async {
        guard let sink else { return }
        let batch = core.withLock { $0.engine.takeDueDeliveries() }
        guard !batch.isEmpty else { return }
        var results: [(String, SendAttemptResult)] = []
        await withTaskGroup(of: (String, SendAttemptResult).self) { group in
            var pending = batch[...]
            for _ in 0..<Self.deliveryConcurrencyMax {
                guard let item = pending.popFirst() else { break }
                group.addTask { (item.uuid, await sink.deliver(signedPayload: item.signedPayload)) }
            }
            while let done = await group.next() {
                results.append(done)
                if let item = pending.popFirst() {
                    group.addTask { (item.uuid, await sink.deliver(signedPayload: item.signedPayload)) }
                }
            }
        }
        core.withLock { c in
            for (uuid, result) in results { c.engine.recordAttempt(uuid: uuid, result: result) }
        }
    }

    // MARK: - Keys and certificates

    /// Certificates valid from two years before the simulated start to forty years after, so a clock moved
    /// far ahead still signs with a valid chain (verifiers check validity at `signedDate`).
    static func makeAuthority(startMs: Int64) throws(KakinError) -> SigningCertificateAuthority {
        let yearMs: Int64 = 365 * 86_400_000
        var options = SigningCertificateAuthority.Options()
        options.leafValidity = CertificateValidity(notBeforeMs: startMs - 2 * yearMs, notAfterMs: startMs + 40 * yearMs)
        do {
            return try SigningCertificateAuthority(nowMs: startMs, options: options)
        } catch {
            throw KakinError(.internalError, "The simulator could not create its signing certificates.", detail: error.description)
        }
    }

    static func makeAPIKey() throws(KakinError) -> APIKeyRecord {
        do {
            let key = try P256PrivateKey()
            var rng = SystemRandomNumberGenerator()
            let alphabet = Array("ABCDEFGHJKLMNPQRSTUVWXYZ23456789")
            let keyId = String((0..<10).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            var ids = SimulatorIDs(seed: rng.next(), environment: .sandbox)
            return APIKeyRecord(issuerId: ids.uuid(), keyId: keyId, privateKeyPEM: try key.pemPKCS8())
        } catch {
            throw KakinError(.internalError, "The simulator could not create its API key.", detail: error.description)
        }
    }

    static func verifier(key: APIKeyRecord, registered: [RegisteredKeyRecord], bundleId: String) throws(KakinError) -> AppStoreServerAPITokenVerifier {
        var keys: [String: AppStoreServerAPITokenVerifier.Key] = [:]
        do {
            keys[key.keyId] = .init(publicKey: try P256PrivateKey(pemPKCS8: key.privateKeyPEM).publicKey, issuerId: key.issuerId)
        } catch {
            throw KakinError(.invalidField, "The simulator's API key is not a P-256 PKCS#8 key.", detail: error.description)
        }
        for r in registered {
            keys[r.keyId] = .init(publicKey: try publicKey(pem: r.publicKeyPEM), issuerId: r.issuerId)
        }
        return AppStoreServerAPITokenVerifier(keys: keys, bundleId: bundleId)
    }

    /// A `-----BEGIN PUBLIC KEY-----` PEM (SubjectPublicKeyInfo) of a P-256 key.
    static func publicKey(pem: String) throws(KakinError) -> P256PublicKey {
        let body = pem.split(whereSeparator: \.isNewline).filter { !$0.hasPrefix("-----") }.joined()
        guard pem.contains("BEGIN PUBLIC KEY"), let der = Base64.decode(body), !der.isEmpty else {
            throw KakinError(.invalidField, "publicKeyPEM must be a PEM public key (-----BEGIN PUBLIC KEY-----).")
        }
        do {
            return try P256PublicKey(spkiDER: der)
        } catch {
            throw KakinError(.invalidField, "publicKeyPEM must hold a P-256 public key.")
        }
    }

    static func core(from file: SimulatorStateFile) throws(KakinError) -> Core {
        let config = try file.configuration.configuration()
        let authority: SigningCertificateAuthority
        do {
            authority = try SigningCertificateAuthority(exported: try JSONParser.parse(file.signingAuthority))
        } catch {
            throw KakinError(.invalidField, "The state file's signing CA cannot be loaded.")
        }
        let verifier = try verifier(key: file.apiKey, registered: file.registeredKeys, bundleId: config.bundleId)
        var engine = SimulatorState(config: config, signer: AuthoritySigner(authority.signer()), store: file.engine)
        engine.requeueInFlight()
        return Core(engine: engine, authority: authority, apiKey: file.apiKey, registeredKeys: file.registeredKeys, tokenVerifier: verifier)
    }
}

/// Another simulated store sharing this simulator's clock (local mode's Play simulator, wired by the composition
/// layer): a clock move stops at its next events too, in time order with the App Store's, and advances it to each stop.
public protocol SimulatedTimeFollower: Sendable {
    /// The next moment it has something to do by itself, if any.
    func nextEventMs() -> Int64?
    /// Applies what is due up to `targetMs`.
    func advance(toMs targetMs: Int64) async
}

/// Signs with the simulator's CA. OpenSSL's ECDSA with a loaded key fails only when memory runs out; the
/// engine then stores an empty JWS rather than stopping (a verifier refuses it as malformed).
struct AuthoritySigner: PayloadSigner {
    let signer: JWSSigner
    init(_ signer: JWSSigner) { self.signer = signer }
    func sign(_ payload: JSONValue) -> String { (try? signer.sign(payload)) ?? "" }
}
