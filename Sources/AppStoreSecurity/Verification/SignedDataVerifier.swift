import KakinCore
import KakinCrypto
import Synchronization

/// Verifies App Store signed data (JWS) by Apple's rules — those of Apple's App Store Server Library —
/// and decodes it. Thread-safe; one instance serves a whole server.
///
/// Order of checks (each failure is a `VerificationFailure` with the contract's code):
/// 1. three base64url segments, header a JSON object (`invalid_format`);
/// 2. `alg` is `ES256` (`unsupported_algorithm`);
/// 3. payload a JSON object, `signedDate`/`receiptCreationDate` a number if present (`invalid_format`);
/// 4. `Xcode`/`LocalTesting` payloads: refused (`wrong_environment`) unless an accepted app lists that
///    environment; if listed, accepted without chain or signature (as Apple's library does) → step 8;
/// 5. `x5c` is exactly three certificate strings, leaf and intermediate DER (`invalid_format`);
/// 6. leaf → intermediate → a pinned root, Apple's marker extensions on leaf and intermediate, every
///    certificate valid at `signedDate` (`receiptCreationDate`; now without either) (`untrusted_certificate`);
/// 7. ES256 signature over `header.payload` by the leaf key (`invalid_signature`);
/// 8. app checks: bundle ID (`wrong_bundle_id`), App Apple ID in Production (`wrong_app_apple_id`),
///    environment (`wrong_environment`);
/// 9. typed helpers only: the fields their payload type requires (`invalid_format`).
///
/// Verified chains are cached (bounded LRU) by the exact leaf and intermediate strings, and parsed
/// headers by their exact bytes, so the steady state costs one ECDSA verification per JWS.
public final class SignedDataVerifier: Sendable {
    /// The apps whose data is accepted: a payload passes when one of them matches it.
    public let apps: [AppIdentity]
    private let chainVerifier: ChainVerifier
    private let clock: @Sendable () -> Int64
    private let acceptedLocalEnvironments: Set<AppStoreEnvironment>
    /// Key: x5c[0] + "," + x5c[1] bytes.
    private let chains: Mutex<LRUCache<ByteKey, VerifiedChain>>
    /// Key: the raw header segment. Only headers whose chain verified are kept.
    private let headers: Mutex<LRUCache<ByteKey, VerifiedChain>>
    /// The header found or verified last, compared byte for byte before `headers` is asked: nearly every JWS carries the
    /// same header (Apple's current leaf), and a memcmp of its ~2.5 KB costs less than copying and hashing it for the key.
    private let lastHeader: Mutex<(key: ByteKey, chain: VerifiedChain)?>

    /// - Parameters:
    ///   - trustedRoots: DER root certificates; chains must end in one of them.
    ///   - apps: the apps (bundle ID, App Apple ID, environments) whose data is accepted; a payload
    ///     passes when one of them matches.
    ///   - clock: now in ms since the epoch; read only for payloads without a signed date.
    ///   - chainCacheEntriesMax: bound of each cache (verified chains, parsed headers).
    public init(
        trustedRoots: [[UInt8]], apps: [AppIdentity], clock: @escaping @Sendable () -> Int64,
        chainCacheEntriesMax: Int = 64
    ) throws(CryptoError) {
        var roots: [X509Certificate] = []
        for der in trustedRoots { roots.append(try X509Certificate(der: der)) }
        chainVerifier = try ChainVerifier(roots: roots)
        self.apps = apps
        self.clock = clock
        acceptedLocalEnvironments = Set(apps.flatMap { $0.environments.filter(\.isLocal) })
        chains = Mutex(LRUCache(entriesMax: chainCacheEntriesMax))
        headers = Mutex(LRUCache(entriesMax: chainCacheEntriesMax))
        lastHeader = Mutex(nil)
    }

    // MARK: Public entry points

    /// Verifies any signed payload; its kind is told by its fields (`SignedPayloadKind.of`). A payload
    /// of unknown kind must name an accepted `environment`, and its `bundleId`, if any, must match.
    public func verify(_ jws: String) throws(VerificationFailure) -> VerifiedSignedData {
        try withUTF8(jws) { (bytes) throws(VerificationFailure) in try verify(utf8: bytes, as: nil) }
    }

    /// Verifies a payload that must be of `kind`, with that kind's app checks (as Apple's
    /// `verify_and_decode_*` methods do). Fields are not required beyond the app checks.
    public func verify(_ jws: String, as kind: SignedPayloadKind) throws(VerificationFailure) -> VerifiedSignedData {
        try withUTF8(jws) { (bytes) throws(VerificationFailure) in try verify(utf8: bytes, as: kind) }
    }

    /// Verifies a JWS given as UTF-8 bytes (no String needed; for batch input).
    public func verify(utf8 jws: UnsafeRawBufferPointer, as kind: SignedPayloadKind? = nil) throws(VerificationFailure)
        -> VerifiedSignedData
    {
        try verifyBytes(jws, expecting: kind)
    }

    /// A signed transaction (`signedTransactionInfo`, StoreKit 2 `jwsRepresentation`).
    public func verifyTransaction(_ jws: String) throws(VerificationFailure) -> TransactionPayload {
        let verified = try verify(jws, as: .transaction)
        do { return try TransactionPayload(json: verified.payload) } catch { throw Self.incomplete("transaction", error) }
    }

    /// Signed renewal info (`signedRenewalInfo`).
    public func verifyRenewalInfo(_ jws: String) throws(VerificationFailure) -> RenewalInfoPayload {
        let verified = try verify(jws, as: .renewalInfo)
        do { return try RenewalInfoPayload(json: verified.payload) } catch { throw Self.incomplete("renewal info", error) }
    }

    /// An App Store Server Notification V2 `signedPayload`. Nested JWS inside stay unverified strings.
    public func verifyNotification(_ jws: String) throws(VerificationFailure) -> NotificationPayload {
        let verified = try verify(jws, as: .notification)
        do { return try NotificationPayload(json: verified.payload) } catch { throw Self.incomplete("notification", error) }
    }

    /// A signed app transaction (`AppTransaction.jwsRepresentation`, `signedAppTransactionInfo`).
    public func verifyAppTransaction(_ jws: String) throws(VerificationFailure) -> AppTransactionPayload {
        let verified = try verify(jws, as: .appTransaction)
        do { return try AppTransactionPayload(json: verified.payload) } catch { throw Self.incomplete("app transaction", error) }
    }

    /// The signed request of the Retention Messaging API's Get Retention Message call (`RealtimeRequestBody`'s
    /// `signedPayload`), by the same chain rules as every other signed payload; the app checks are Apple's for
    /// it: App Apple ID (Production) and environment.
    public func verifyRealtimeRequest(_ jws: String) throws(VerificationFailure) -> RealtimeRequestPayload {
        let verified = try verify(jws, as: .realtimeRequest)
        do { return try RealtimeRequestPayload(json: verified.payload) } catch { throw Self.incomplete("realtime request", error) }
    }

    private static func incomplete(_ what: String, _ error: PayloadDecodingError) -> VerificationFailure {
        VerificationFailure(.invalidFormat, "\(what) payload: \(error.description)")
    }

    private func withUTF8<R>(_ jws: String, _ body: (UnsafeRawBufferPointer) throws(VerificationFailure) -> R)
        throws(VerificationFailure) -> R
    {
        let result: Result<R, VerificationFailure>? = jws.utf8.withContiguousStorageIfAvailable { buffer in
            Result { () throws(VerificationFailure) in try body(UnsafeRawBufferPointer(buffer)) }
        }
        if let result { return try result.get() }
        return try Array(jws.utf8).withUnsafeBytes { bytes in Result { () throws(VerificationFailure) in try body(bytes) } }.get()
    }

    // MARK: The verification

    private func verifyBytes(_ jws: UnsafeRawBufferPointer, expecting expectedKind: SignedPayloadKind?)
        throws(VerificationFailure) -> VerifiedSignedData
    {
        guard jws.count <= Self.jwsBytesMax else {
            throw VerificationFailure(.invalidFormat, "JWS longer than \(Self.jwsBytesMax) bytes")
        }
        guard let segments = CompactJWSSegments(jws) else {
            throw VerificationFailure(.invalidFormat, "not a compact JWS (three dot-separated parts)")
        }

        // 1–2. Header: a known header skips parsing and chain building entirely.
        let cachedChain = knownChain(header: segments.header)
        let header: JSONValue? = cachedChain == nil ? try parseHeader(segments.header) : Optional.none

        // 3. Payload.
        guard let payloadBytes = SegmentBase64.decode(segments.payload) else {
            throw VerificationFailure(.invalidFormat, "payload is not base64url")
        }
        let payload: JSONValue
        do {
            payload = try JSONParser.parse(payloadBytes, depthMax: Self.jsonDepthMax)
        } catch {
            throw VerificationFailure(.invalidFormat, "payload is not JSON (\(error.reason))")
        }
        guard case .object = payload else { throw VerificationFailure(.invalidFormat, "payload is not a JSON object") }
        let facts = try PayloadFacts(payload, kind: expectedKind)
        let signedDate = try Self.signedDate(of: payload)

        // 4. Data not signed by Apple: only where an accepted app lists the environment, and never chain-verified.
        if let environment = facts.environment, environment.isLocal {
            guard acceptedLocalEnvironments.contains(environment) else {
                throw VerificationFailure(.wrongEnvironment, "\(environment.rawValue) data is not accepted")
            }
            try checkApp(facts)
            return VerifiedSignedData(
                kind: facts.kind, payload: payload, payloadBytes: payloadBytes, signedDate: signedDate,
                environment: facts.environment, isAppleSigned: false)
        }

        // 5–6. Chain, then its validity at the signing time.
        let atMs = signedDate ?? clock()
        let chain: VerifiedChain
        if let cachedChain {
            chain = cachedChain
        } else if let header {
            let certificates = try Self.certificates(in: header)
            chain = try verifiedChain(leaf: certificates.leaf, intermediate: certificates.intermediate, atMs: atMs)
            let key = ByteKey(segments.header)
            headers.withLock { $0.insert(chain, for: key) }
            lastHeader.withLock { $0 = (key, chain) }
        } else {
            throw VerificationFailure(.invalidFormat, "header unreadable")  // unreachable: one of the two is set
        }
        guard chain.isValid(atMs: atMs) else {
            throw VerificationFailure(.untrustedCertificate, "a certificate of the chain is not valid at the signing date")
        }

        // 7. Signature.
        guard let signature = SegmentBase64.decode(segments.signature) else {
            throw VerificationFailure(.invalidFormat, "signature is not base64url")
        }
        guard signature.count == es256SignatureByteCount else {
            throw VerificationFailure(.invalidSignature, "ES256 signature must be 64 bytes, got \(signature.count)")
        }
        let valid = signature.withUnsafeBytes { chain.leafKey.isValidES256Signature($0, for: segments.signingInput) }
        guard valid else { throw VerificationFailure(.invalidSignature, "signature does not match the leaf certificate") }

        // 9. Which app, which environment.
        try checkApp(facts)
        return VerifiedSignedData(
            kind: facts.kind, payload: payload, payloadBytes: payloadBytes, signedDate: signedDate,
            environment: facts.environment, isAppleSigned: true)
    }

    /// The verified chain of a header seen before: the last one's by memcmp, else the cache's (which then becomes the last).
    private func knownChain(header segment: UnsafeRawBufferPointer) -> VerifiedChain? {
        let last = lastHeader.withLock { last in last.flatMap { $0.key.equals(segment) ? $0.chain : nil } }
        if let last { return last }
        let key = ByteKey(segment)
        guard let chain = headers.withLock({ $0.value(for: key) }) else { return nil }
        lastHeader.withLock { $0 = (key, chain) }
        return chain
    }

    /// Parses the header and checks `alg` (before `x5c`, so `none`/`HS256` tokens say so even without `x5c`).
    private func parseHeader(_ segment: UnsafeRawBufferPointer) throws(VerificationFailure) -> JSONValue {
        guard let bytes = SegmentBase64.decode(segment) else {
            throw VerificationFailure(.invalidFormat, "header is not base64url")
        }
        let header: JSONValue
        do {
            header = try JSONParser.parse(bytes, depthMax: Self.jsonDepthMax)
        } catch {
            throw VerificationFailure(.invalidFormat, "header is not JSON (\(error.reason))")
        }
        guard case .object = header else { throw VerificationFailure(.invalidFormat, "header is not a JSON object") }
        guard let alg = header["alg"]?.stringValue, alg == "ES256" else {
            throw VerificationFailure(.unsupportedAlgorithm, "alg must be ES256")
        }
        return header
    }

    /// The leaf and intermediate of `x5c`, which must hold exactly three certificate strings.
    private static func certificates(in header: JSONValue) throws(VerificationFailure) -> (leaf: String, intermediate: String) {
        guard let x5c = header["x5c"]?.arrayValue else { throw VerificationFailure(.invalidFormat, "header has no x5c") }
        guard x5c.count == 3 else {
            throw VerificationFailure(.invalidFormat, "x5c must hold 3 certificates, holds \(x5c.count)")
        }
        // x5c[2] (the root) is never used — the pinned roots are — but must be there as a string.
        guard let leaf = x5c[0].stringValue, let intermediate = x5c[1].stringValue, x5c[2].stringValue != nil else {
            throw VerificationFailure(.invalidFormat, "x5c entries must be strings")
        }
        return (leaf, intermediate)
    }

    private func verifiedChain(leaf: String, intermediate: String, atMs: Int64) throws(VerificationFailure) -> VerifiedChain {
        let key = ByteKey(Array(leaf.utf8) + [UInt8(ascii: ",")] + Array(intermediate.utf8))
        if let cached = chains.withLock({ $0.value(for: key) }) { return cached }
        guard let leafDER = Base64.decode(leaf), let intermediateDER = Base64.decode(intermediate) else {
            throw VerificationFailure(.invalidFormat, "x5c certificate is not base64")
        }
        let leafCertificate: X509Certificate
        let intermediateCertificate: X509Certificate
        do {
            leafCertificate = try X509Certificate(der: leafDER)
            intermediateCertificate = try X509Certificate(der: intermediateDER)
        } catch {
            throw VerificationFailure(.invalidFormat, "x5c entry is not a DER certificate")
        }
        let chain = try chainVerifier.verify(leaf: leafCertificate, intermediate: intermediateCertificate, atMs: atMs)
        chains.withLock { $0.insert(chain, for: key) }
        return chain
    }

    /// The instant certificates must be valid at: `signedDate`, else `receiptCreationDate` (app
    /// transactions), in ms; fractional ms (Xcode) truncated as Apple's library does.
    static func signedDate(of payload: JSONValue) throws(VerificationFailure) -> Int64? {
        let value: JSONValue?
        if let date = payload["signedDate"], !date.isNull {
            value = date
        } else if let date = payload["receiptCreationDate"], !date.isNull {
            value = date
        } else {
            value = nil
        }
        guard let value else { return nil }
        guard let ms = value.int64Value else { throw VerificationFailure(.invalidFormat, "signedDate is not a number") }
        return ms
    }

    // MARK: App checks

    /// Passes when one identity accepts the payload. Otherwise the failure is the first check that no
    /// identity passed, in Apple's order: bundle ID, App Apple ID, environment.
    private func checkApp(_ facts: PayloadFacts) throws(VerificationFailure) {
        var bundleMatched = false
        var appAppleIdMatched = false
        for app in apps {
            if facts.checksBundleId, let expected = app.bundleId, facts.bundleId != expected { continue }
            bundleMatched = true
            if facts.checksAppAppleId, facts.environment == .production, let expected = app.appAppleId,
                facts.appAppleId != expected
            {
                continue
            }
            appAppleIdMatched = true
            if let environment = facts.environment, app.environments.contains(environment) { return }
        }
        if !bundleMatched {
            throw VerificationFailure(.wrongBundleId, "bundle ID \(Self.quoted(facts.bundleId)) is not accepted")
        }
        if !appAppleIdMatched { throw VerificationFailure(.wrongAppAppleId, "App Apple ID does not match the app") }
        throw VerificationFailure(.wrongEnvironment, "environment \(Self.quoted(facts.environment?.rawValue)) is not accepted")
    }

    private static func quoted(_ value: String?) -> String {
        guard let value else { return "(none)" }
        let shown = value.count > 64 ? String(value.prefix(64)) + "…" : value
        return "\"" + shown + "\""
    }
}

/// What the app checks read from a payload, per kind, as Apple's library reads it.
struct PayloadFacts {
    var kind: SignedPayloadKind
    var bundleId: String?
    var appAppleId: Int64?
    var environment: AppStoreEnvironment?
    var checksBundleId: Bool
    var checksAppAppleId: Bool

    init(_ payload: JSONValue, kind expected: SignedPayloadKind?) throws(VerificationFailure) {
        kind = expected ?? SignedPayloadKind.of(payload)
        switch kind {
        case .transaction:
            bundleId = payload["bundleId"]?.stringValue
            environment = Self.environment(payload["environment"])
            checksBundleId = true
            checksAppAppleId = false
        case .renewalInfo:
            environment = Self.environment(payload["environment"])
            checksBundleId = false
            checksAppAppleId = false
        case .realtimeRequest:
            // Apple's `verify_and_decode_realtime_request`: no bundle ID in the payload; the App Apple ID in
            // Production, and the environment.
            appAppleId = Self.appAppleId(payload["appAppleId"])
            environment = Self.environment(payload["environment"])
            checksBundleId = false
            checksAppAppleId = true
        case .appTransaction:
            bundleId = payload["bundleId"]?.stringValue
            appAppleId = Self.appAppleId(payload["appAppleId"])
            environment = Self.environment(payload["receiptType"])
            checksBundleId = true
            checksAppAppleId = true
        case .notification:
            checksBundleId = true
            checksAppAppleId = true
            // Apple's order: data, summary, externalPurchaseToken, appData.
            for key in ["data", "summary", "externalPurchaseToken", "appData"] {
                guard let section = payload[key], !section.isNull else { continue }
                guard case .object = section else {
                    throw VerificationFailure(.invalidFormat, "notification \(key) is not an object")
                }
                bundleId = section["bundleId"]?.stringValue
                appAppleId = Self.appAppleId(section["appAppleId"])
                if key == "externalPurchaseToken" {
                    let sandbox = section["externalPurchaseId"]?.stringValue?.hasPrefix("SANDBOX") ?? false
                    environment = sandbox ? .sandbox : .production
                } else {
                    environment = Self.environment(section["environment"])
                }
                break
            }
        case .unknown:
            bundleId = payload["bundleId"]?.stringValue
            environment = Self.environment(payload["environment"] ?? payload["receiptType"])
            checksBundleId = payload["bundleId"] != nil
            checksAppAppleId = false
        }
    }

    private static func environment(_ value: JSONValue?) -> AppStoreEnvironment? {
        value?.stringValue.map(AppStoreEnvironment.init(rawValue:))
    }

    /// Exact integers only: an App Apple ID is never fractional.
    private static func appAppleId(_ value: JSONValue?) -> Int64? {
        if case .int(let id)? = value { return id }
        return nil
    }
}
