import AppStoreSecurity
import HTTPServer
import KakinCore
import KakinCrypto
import KakinService

/// The contract's authentication: API keys (scope `backend` acts for any customer, `admin` also reaches
/// `/v1/admin/*`) and customer JWTs (HS256, `sub` = customer ID, `exp` required) that reach only their own
/// customer. With no `auth` configured (local mode, loopback only) every request is allowed.
struct Authenticator: Sendable {
    enum Need { case customer, backend, admin }

    enum Principal: Equatable {
        case open
        case apiKey(Configuration.APIKey.Scope)
        case customer(String)
    }

    let auth: Configuration.Auth?
    let clock: any Clock
    let keyHashes: [[UInt8]: Configuration.APIKey.Scope]

    init(auth: Configuration.Auth?, clock: any Clock) {
        self.auth = auth
        self.clock = clock
        var hashes: [[UInt8]: Configuration.APIKey.Scope] = [:]
        for key in auth?.apiKeys ?? [] {
            if let bytes = Hex.decode(key.sha256) { hashes[bytes] = key.scope }
        }
        self.keyHashes = hashes
    }

    func authorize(_ request: HTTPRequest, customerId: String?, needs: Need) throws(KakinError) {
        let principal = try authenticate(request)
        switch (principal, needs) {
        case (.open, _), (.apiKey(.admin), _), (.apiKey(.backend), .customer), (.apiKey(.backend), .backend):
            return
        case (.customer(let sub), .customer) where sub == customerId:
            return
        default:
            throw KakinError(.forbidden)
        }
    }

    func authenticate(_ request: HTTPRequest) throws(KakinError) -> Principal {
        guard let auth else { return .open }
        guard let header = request.headers["Authorization"], header.utf8.count <= Self.tokenLengthMax,
              header.hasPrefix("Bearer ") else {
            throw KakinError(.unauthorized)
        }
        let token = String(header.dropFirst("Bearer ".count))
        if let scope = keyHashes[SHA256Hash.digest(Array(token.utf8))] { return .apiKey(scope) }
        if let secret = auth.customerTokenSecret, let sub = CustomerToken.verifyHS256(token, secret: secret, nowMs: clock.nowMs()) {
            return .customer(sub)
        }
        throw KakinError(.unauthorized)
    }
}

/// HS256 customer tokens issued by the app's own auth server.
package enum CustomerToken {
    /// The token's `sub` when its signature, `alg` and `exp` are good; nil otherwise.
    package static func verifyHS256(_ token: String, secret: [UInt8], nowMs: Int64) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64.decode(Array(parts[0].utf8)),
              let header = try? JSONParser.parse(headerBytes, depthMax: 4), header["alg"]?.stringValue == "HS256",
              let signature = Base64.decode(Array(parts[2].utf8)) else { return nil }
        let expected = HMACSHA256.authenticationCode(key: secret, message: Array("\(parts[0]).\(parts[1])".utf8))
        guard HMACSHA256.constantTimeEqual(expected, signature),
              let payloadBytes = Base64.decode(Array(parts[1].utf8)),
              let payload = try? JSONParser.parse(payloadBytes, depthMax: 8),
              let sub = payload["sub"]?.stringValue, CustomerID.isValid(sub),
              let exp = payload["exp"]?.int64Value, exp > nowMs / 1000 else { return nil }  // seconds: `exp * 1000` could overflow
        return sub
    }
}
