import AppStoreSecurity
import KakinCore
import KakinCrypto
import KakinServer

/// Compact JWS decoding and verification by Apple's rules. The first byte picks the mode: even feeds
/// the rest as a JWS; odd signs the rest as a payload with a trusted test CA first, so the fuzzer also
/// reaches what only verified data meets (payload models, the status engine).
struct JWSTarget: FuzzTarget {
    static let nowMs: Int64 = 1_767_225_600_000
    let signer: JWSSigner
    let verifier: SignedDataVerifier

    init() {
        let ca = try! SigningCertificateAuthority(nowMs: Self.nowMs - 86_400_000)
        signer = ca.signer()
        verifier = try! SignedDataVerifier(
            trustedRoots: [ca.rootDER],
            apps: [AppIdentity(bundleId: nil, environments: Set(AppStoreEnvironment.known))],
            clock: { Self.nowMs })
    }

    func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let rest = Array(input.dropFirst())
        let jws: String
        if mode & 1 == 1 {
            guard let signed = try? signer.sign(payloadBytes: rest, header: signer.header) else { return }
            jws = signed
        } else {
            jws = String(decoding: rest, as: UTF8.self)
        }
        if let payload = StoredJWS.payload(jws) { decodeAndEvaluate(payload) }
        if let verified = try? verifier.verify(jws) { decodeAndEvaluate(verified.payload) }
        var history = CustomerHistory()
        if let tx = try? verifier.verifyTransaction(jws) { history.transactions.append(tx) }
        if let info = try? verifier.verifyRenewalInfo(jws) { history.renewalInfos.append(info) }
        _ = try? verifier.verifyNotification(jws)
        _ = try? verifier.verifyAppTransaction(jws)
        _ = StatusEngine.evaluate(history, catalog: .demo, nowMs: Self.nowMs).json(customerId: "u1", appAccountToken: nil, wallet: WalletBalance(paid: 0, free: 0))
    }

    /// Decodes the payload as every kind and runs the status engine on what decodes.
    func decodeAndEvaluate(_ payload: JSONValue) {
        var history = CustomerHistory()
        if let tx = try? TransactionPayload(json: payload) { history.transactions.append(tx) }
        if let info = try? RenewalInfoPayload(json: payload) { history.renewalInfos.append(info) }
        if let n = try? NotificationPayload(json: payload), let data = n.data {
            for nested in [data.signedTransactionInfo, data.signedRenewalInfo].compactMap({ $0 }) {
                if let inner = StoredJWS.payload(nested) {
                    if let tx = try? TransactionPayload(json: inner) { history.transactions.append(tx) }
                    if let info = try? RenewalInfoPayload(json: inner) { history.renewalInfos.append(info) }
                }
            }
        }
        _ = try? AppTransactionPayload(json: payload)
        _ = SignedPayloadKind.of(payload)
        _ = StatusEngine.evaluate(history, catalog: .demo, nowMs: Self.nowMs).json(customerId: "u1", appAccountToken: nil, wallet: WalletBalance(paid: 0, free: 0))
    }
}

/// JWTs Kakin accepts: App Store Server API bearer tokens and signed offer requests (ES256, checked by the
/// simulator), customer tokens (HS256), legacy promotional offer signatures. The first byte picks the
/// mode: 0 mod 3 feeds the rest as a token to every verifier; 1 signs the rest as ES256 claims with a
/// known key; 2 signs the rest as HS256 claims with a known secret.
struct JWTTarget: FuzzTarget {
    static let nowSeconds: Int64 = 1_767_225_600
    static let secret = Array("fuzz-secret-fuzz-secret-fuzz-sec".utf8)
    let key: P256PrivateKey
    let verifier: AppStoreServerAPITokenVerifier
    let requests: SignedRequestVerifier

    init() {
        key = try! P256PrivateKey()
        verifier = AppStoreServerAPITokenVerifier(keys: ["KEY1234567": .init(publicKey: key.publicKey, issuerId: "issuer")],
                                                  bundleId: Catalog.demoBundleId)
        requests = SignedRequestVerifier(keys: ["KEY1234567": .init(publicKey: key.publicKey, issuerId: "issuer")],
                                         bundleId: Catalog.demoBundleId)
    }

    func verifyES256(_ token: String) {
        _ = try? verifier.verify(token, nowSeconds: Self.nowSeconds)
        for audience in SignedRequestJWS.Audience.allCases { _ = try? requests.verify(token, audience: audience) }
    }

    func run(_ input: [UInt8]) {
        guard let mode = input.first else { return }
        let rest = Array(input.dropFirst())
        switch mode % 3 {
        case 1:
            let header: JSONValue = ["alg": "ES256", "kid": "KEY1234567", "typ": "JWT"]
            let signer = JWSSigner(key: key, x5c: [])
            guard let token = try? signer.sign(payloadBytes: rest, header: header) else { return }
            verifyES256(token)
        case 2:
            let input = Base64.urlEncode(#"{"alg":"HS256","typ":"JWT"}"#.utf8) + "." + Base64.urlEncode(rest)
            let mac = HMACSHA256.authenticationCode(key: Self.secret, message: Array(input.utf8))
            _ = CustomerToken.verifyHS256(input + "." + Base64.urlEncode(mac), secret: Self.secret, nowMs: Self.nowSeconds * 1000)
        default:
            let token = String(decoding: rest, as: UTF8.self)
            verifyES256(token)
            _ = CustomerToken.verifyHS256(token, secret: Self.secret, nowMs: Self.nowSeconds * 1000)
            let legacy = PromotionalOfferSignature(bundleId: Catalog.demoBundleId, keyIdentifier: "KEY1234567", productIdentifier: "premium.monthly",
                                                   offerIdentifier: "back", appAccountToken: nil, nonce: "n", timestampMs: Self.nowSeconds * 1000)
            _ = legacy.isValidSignature(token, publicKey: key.publicKey)
        }
    }
}

/// The config reader (`kakin serve --config`): any JSON, with relative files looked up in an empty folder.
struct ConfigTarget: FuzzTarget {
    let base: String

    init() {
        base = FuzzFiles.directory("config")
    }

    func run(_ input: [UInt8]) {
        guard let json = try? JSONParser.parse(input) else { return }
        _ = try? Configuration.parse(json, baseDirectory: base, environment: ["KAKIN_SECRET": "0123456789abcdef0123456789abcdef"])
    }
}
