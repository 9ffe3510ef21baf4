import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
@testable import KakinServer
import KakinService
import KakinSystem
import Testing

@Suite struct ConfigurationFile {
    func parse(_ text: String, env: [String: String] = [:]) -> Result<Configuration, ConfigurationError> {
        do {
            return .success(try Configuration.parse(try JSONParser.parse(text), baseDirectory: "/tmp", environment: env))
        } catch let e as ConfigurationError {
            return .failure(e)
        } catch {
            return .failure(ConfigurationError("", "\(error)"))
        }
    }

    func error(_ text: String, env: [String: String] = [:]) -> String {
        if case .failure(let e) = parse(text, env: env) { return e.description }
        return "no error"
    }

    static let app = #"{"bundleId": "com.example.video", "appAppleId": 1234567890, "environments": ["Production", "Sandbox"], "products": [{"productId": "coins.100", "type": "consumable", "coins": 100}]}"#

    @Test func theContractsKeysParse() throws {
        let c = try parse(#"""
            {"listen": {"host": "127.0.0.1", "port": 9090}, "database": "sqlite:data/kakin.db",
             "apps": [\#(Self.app)], "wallet": {"spendOrder": "paidFirst", "allowNegativeBalance": false},
             "accounts": {"transferPolicy": "transfer"}}
            """#).get()
        #expect(c.port == 9090)
        #expect(c.database == .sqlite(path: "/tmp/data/kakin.db"))
        #expect(c.apps.first?.environments == [.production, .sandbox])
        #expect(c.wallet == WalletPolicy(spendOrder: .paidFirst, allowNegativeBalance: false))
        #expect(c.transferPolicy == .transfer)
    }

    @Test func everyErrorIsOneLineNamingTheKey() {
        #expect(error(#"{"apps": [\#(Self.app)], "colour": 1}"#) == "colour: unknown key")
        #expect(error(#"{"apps": []}"#) == "apps: must list at least one app")
        #expect(error(#"{"apps": [\#(Self.app)], "listen": {"port": 70000}}"#) == "listen.port: must be between 0 and 65535")
        #expect(error(#"{"apps": [\#(Self.app)], "database": "mysql://x"}"#).hasPrefix("database: must be sqlite:PATH"))
        #expect(error(#"{"apps": [{"bundleId": "a", "environments": ["Production"], "products": [{"productId": "x", "type": "noads"}]}]}"#)
            .hasPrefix("apps[0].appAppleId: is required"))
        #expect(error(#"{"apps": [{"bundleId": "a", "environments": ["Staging"], "products": []}]}"#).hasPrefix("apps[0].environments[0]"))
        #expect(error(#"{"apps": [\#(Self.app)], "wallet": {"spendOrder": "random"}}"#) == "wallet.spendOrder: must be freeFirst or paidFirst")
        #expect(error(#"{"apps": [\#(Self.app)], "auth": {"apiKeys": [{"sha256": "abc", "scope": "backend"}]}}"#)
            .hasPrefix("auth.apiKeys[0].sha256"))
        #expect(error(#"{"apps": [\#(Self.app)], "auth": {"customerTokens": {"hs256SecretEnv": "MISSING"}}}"#)
            .hasPrefix("auth.customerTokens.hs256SecretEnv"))
        #expect(error(#"{"apps": [\#(Self.app)], "trustedRoots": ["nope.der"]}"#).hasPrefix("trustedRoots[0]: cannot read file"))
        for text in [#"{"apps": [\#(Self.app)], "colour": 1}"#, #"{"apps": []}"#] { #expect(!error(text).contains("\n")) }
    }

    static let subscriptionApp = #"{"bundleId": "com.example.video", "environments": ["Sandbox"], "products": [{"productId": "m", "type": "autoRenewable", "groupId": "g", "offers": [{"type": "promotional", "id": "p", "mode": "freeTrial", "period": "P1M"}, {"type": "promotional", "id": "q", "mode": "freeTrial", "period": "P1W"}]}]"#

    @Test func offerRulesAndTheOfferSigningKeyParse() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try Data("-----BEGIN PRIVATE KEY-----\n…\n-----END PRIVATE KEY-----\n".utf8).write(to: dir.appendingPathComponent("SubscriptionKey.p8"))
        func load(_ text: String) throws -> Configuration {
            try Configuration.parse(try JSONParser.parse(text), baseDirectory: dir.path, environment: [:])
        }
        let c = try load(#"""
            {"apps": [\#(Self.subscriptionApp), "offerRules": [{"offerId": "p", "eligibility": "lapsed", "maxRedemptions": 1}]}],
             "offerSigning": {"issuerId": "i", "keyId": "K", "privateKeyFile": "SubscriptionKey.p8"}}
            """#)
        #expect(c.apps[0].offerRules == ["p": OfferRule(offerId: "p", eligibility: .lapsed, maxRedemptions: 1)])
        #expect(c.offerSigning?.keyId == "K")
        #expect(c.offerSigning?.issuerId == "i")
        // The contract's first spelling, `offers`, still works (it has no issuer).
        let old = try load(#"{"apps": [\#(Self.subscriptionApp)}], "offers": {"keyId": "K2", "privateKeyFile": "SubscriptionKey.p8"}}"#)
        #expect(old.offerSigning?.keyId == "K2")
        #expect(old.offerSigning?.issuerId == nil)
    }

    @Test func badOfferRulesNameTheirKey() {
        func rules(_ r: String) -> String { error(#"{"apps": [\#(Self.subscriptionApp), "offerRules": [\#(r)]}]}"#) }
        #expect(rules(#"{"offerId": "nope", "eligibility": "anyone"}"#) == "apps[0].offerRules[0].offerId: names no promotional offer of the app's catalog")
        #expect(rules(#"{"offerId": "p", "eligibility": "vip"}"#) == "apps[0].offerRules[0].eligibility: must be current, lapsed, currentOrLapsed or anyone")
        #expect(rules(#"{"offerId": "p", "eligibility": "current"}, {"offerId": "p", "eligibility": "lapsed"}"#) == "apps[0].offerRules[1].offerId: has a rule already")
        #expect(rules(#"{"offerId": "p", "eligibility": "current", "maxRedemptions": 0}"#).hasPrefix("apps[0].offerRules[0].maxRedemptions"))
        #expect(rules(#"{"offerId": "p", "eligibility": "current", "limit": 2}"#) == "apps[0].offerRules[0].limit: unknown key")
        #expect(error(#"{"apps": [\#(Self.subscriptionApp)}], "offers": {"keyId": "a", "privateKeyFile": "x"}, "offerSigning": {"keyId": "a", "privateKeyFile": "x"}}"#)
            .hasPrefix("offers: give offerSigning"))
    }

    @Test func xcodeDataIsAcceptedOnlyWhenListed() throws {
        let c = try parse(#"{"apps": [\#(Self.app)]}"#).get()
        #expect(!c.apps[0].environments.contains(.xcode))
    }

    @Test func theCommandLineRefusesABadConfigWithExit2() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("kakin-cfg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("kakin.json").path
        try #"{"apps": [], "extra": true}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(await KakinCommand.run(["serve", "--config", path]) == 2)
        #expect(await KakinCommand.run(["serve", "--bogus"]) == 2)
        #expect(await KakinCommand.run(["nonsense"]) == 2)
        #expect(await KakinCommand.run(["--help"]) == 0)
        #expect(await KakinCommand.run(["errors"]) == 0)
    }

    @Test func aNonLoopbackAddressWithoutAuthRefusesToStart() async throws {
        var c = Configuration()
        c.host = "0.0.0.0"
        c.port = 0
        c.apps = [Configuration.App(bundleId: "a", appAppleId: 1, environments: [.sandbox], catalog: .demo)]
        await #expect(throws: KakinError.self) { _ = try await KakinRuntime.start(KakinRuntime.Options(configuration: c)) }
    }
}

/// The contract's authentication over real HTTP.
@Suite(.serialized) struct Authentication {
    static let backendKey = "kakin_backend_key_0123456789abcdef"
    static let adminKey = "kakin_admin_key_0123456789abcdefgh"
    static let secret = Array("a-customer-token-secret-of-32-bytes!".utf8)

    static func sha256Hex(_ s: String) -> String { Hex.encode(SHA256Hash.digest(Array(s.utf8))) }

    static func customerToken(_ sub: String, expiresInSeconds: Int64 = 600, secret: [UInt8] = Authentication.secret) -> String {
        let header = Base64.urlEncode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let exp = Int64(Date().timeIntervalSince1970) + expiresInSeconds
        let payload = Base64.urlEncode(JSONValue.object(["sub": .string(sub), "exp": .int(exp)]).serialized())
        let mac = HMACSHA256.authenticationCode(key: secret, message: Array("\(header).\(payload)".utf8))
        return "\(header).\(payload).\(Base64.urlEncode(mac))"
    }

    static func withAuthenticatedKakin(_ body: (TestKakin) async throws -> Void) async throws {
        let k = try await TestKakin.start(auth: Configuration.Auth(
            apiKeys: [Configuration.APIKey(sha256: sha256Hex(backendKey), scope: .backend),
                      Configuration.APIKey(sha256: sha256Hex(adminKey), scope: .admin)],
            customerTokenSecret: secret), clock: SystemClock())
        try await using(k, stop: { await $0.stop() }, body)
    }

    @Test func requestsWithoutCredentialsAre401AndHealthStaysOpen() async throws {
        try await Self.withAuthenticatedKakin { k in
            let r = try await k.request("GET", "/v1/customers/u1")
            #expect(r.status == 401)
            #expect(r.errorId == "KKN-1011")
            #expect(try await k.request("GET", "/v1/customers/u1", headers: ["Authorization": "Bearer wrong"]).status == 401)
            #expect(try await k.request("GET", "/healthz").status == 200)
        }
    }

    @Test func backendKeyActsForAnyCustomerButNotAdmin() async throws {
        try await Self.withAuthenticatedKakin { k in
            let auth = ["Authorization": "Bearer \(Self.backendKey)"]
            #expect(try await k.request("GET", "/v1/customers/anyone", headers: auth).status == 200)
            let grant = try await k.request("POST", "/v1/customers/anyone/wallet/grants", json: ["amount": 5, "reason": "x"],
                                            headers: auth.merging(["Idempotency-Key": "g1"]) { a, _ in a })
            #expect(grant.status == 201)
            #expect(try await k.request("GET", "/v1/admin/ledger/check", headers: auth).status == 403)
            #expect(try await k.request("GET", "/v1/admin/ledger/check", headers: ["Authorization": "Bearer \(Self.adminKey)"]).status == 200)
        }
    }

    @Test func customerTokenReachesOnlyItsOwnCustomer() async throws {
        try await Self.withAuthenticatedKakin { k in
            let mine = ["Authorization": "Bearer \(Self.customerToken("u1"))"]
            #expect(try await k.request("GET", "/v1/customers/u1", headers: mine).status == 200)
            #expect(try await k.request("GET", "/v1/customers/u1/wallet", headers: mine).status == 200)
            let other = try await k.request("GET", "/v1/customers/u2", headers: mine)
            #expect(other.status == 403)
            #expect(other.errorId == "KKN-1012")
            let grant = try await k.request("POST", "/v1/customers/u1/wallet/grants", json: ["amount": 5, "reason": "x"],
                                            headers: mine.merging(["Idempotency-Key": "g"]) { a, _ in a })
            #expect(grant.status == 403)
            #expect(try await k.request("GET", "/v1/customers/u1", headers: ["Authorization": "Bearer \(Self.customerToken("u1", expiresInSeconds: -10))"]).status == 401)
            #expect(try await k.request("GET", "/v1/customers/u1", headers: ["Authorization": "Bearer \(Self.customerToken("u1", secret: Array("another-secret-another-secret-xx!".utf8)))"]).status == 401)
        }
    }

    @Test func notificationsNeedNoBearer() async throws {
        try await Self.withAuthenticatedKakin { k in
            let n = try k.appStore.notification("TEST", nil, transaction: nil, signedMs: k.clock.nowMs())
            #expect(try await k.postNotification(n).status == 200)
        }
    }
}

@Suite(.serialized) struct Operations {
    @Test func readyzMetricsAndRequestIds() async throws {
        try await TestKakin.with { k in
            #expect(try await k.request("GET", "/readyz").status == 200)
            _ = try await k.request("GET", "/v1/nothing")
            let tx = try k.appStore.transaction(purchaseMs: k.clock.nowMs())
            _ = try await k.postTransaction("u1", jws: tx.jws)
            let m = try await k.request("GET", "/metrics")
            let text = String(decoding: m.body, as: UTF8.self)
            #expect(m.status == 200)
            #expect(text.contains("kakin_purchases_applied_total 1"))
            #expect(text.contains(#"kakin_errors_total{id="KKN-1005",code="not_found"} 1"#))
            #expect(m.headers["x-request-id"]?.hasPrefix("req_") == true)
        }
    }
}
