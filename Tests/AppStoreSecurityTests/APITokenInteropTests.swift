import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// The bearer tokens Kakin's App Store Server API client sends (`AppStoreServerAPIToken.make`, as the client calls it:
/// issued now, valid for the configured lifetime) checked by PyJWT (in `.venv` beside Apple's library), not only by
/// Kakin's own verifier: ES256 over the key's public half, Apple's audience, the issuer, the header Apple asks for;
/// a token changed anywhere, or signed by another key, is refused.
@Suite struct APITokenInteropTests {
    static let script = Fixtures.packageRoot.appendingPathComponent("Tests/AppStoreSecurityTests/Interop/pyjwt_check.py")

    static func publicKeyPEM(_ key: P256PublicKey) -> String {
        let body = Base64.encode(key.spkiDER)
        let lines = stride(from: 0, to: body.count, by: 64).map { start -> String in
            let from = body.index(body.startIndex, offsetBy: start)
            return String(body[from..<(body.index(from, offsetBy: 64, limitedBy: body.endIndex) ?? body.endIndex)])
        }
        return "-----BEGIN PUBLIC KEY-----\n" + lines.joined(separator: "\n") + "\n-----END PUBLIC KEY-----\n"
    }

    @Test(.enabled(if: !InteropTests.skipped, "KAKIN_SKIP_INTEROP=1"))
    func pyJWTAcceptsKakinsAPITokensAndRefusesChangedOnes() throws {
        guard FileManager.default.isExecutableFile(atPath: InteropTests.python.path) else {
            Issue.record("PyJWT (with Apple's library) is needed: ./scripts/setup --with-python")
            return
        }
        let key = try P256PrivateKey(), other = try P256PrivateKey()
        let issuer = "57246542-96fe-1a63-e053-0824d011072a", now: Int64 = 1_780_272_000
        func token(_ signer: P256PrivateKey = key, lifetime: Int64 = 300) throws -> String {
            try AppStoreServerAPIToken.make(key: signer, keyId: "2X9R4HXF34", issuerId: issuer, bundleId: "com.example",
                                            issuedAtSeconds: now, expiresAtSeconds: now + lifetime)
        }
        let good = try token(), longest = try token(lifetime: AppStoreServerAPIToken.lifetimeSecondsMax)
        var parts = good.split(separator: ".").map(String.init)
        let changedClaims = parts[0] + "." + Base64.urlEncode(Array(#"{"iss":"\#(issuer)","aud":"appstoreconnect-v1","bid":"com.evil","iat":\#(now),"exp":\#(now + 300)}"#.utf8)) + "." + parts[2]
        parts[2] = String(parts[2].reversed())
        let changedSignature = parts.joined(separator: ".")
        let request: JSONValue = ["publicKeyPEM": .string(Self.publicKeyPEM(key.publicKey)), "issuerId": .string(issuer),
                                  "tokens": [.string(good), .string(longest), .string(changedClaims), .string(changedSignature), .string(try token(other))]]
        let answers = try #require(try InteropTests.askApple(request, script: Self.script)["tokens"]?.arrayValue)
        try #require(answers.count == 5)
        for accepted in answers[0...1] {
            #expect(accepted["valid"] == true, "PyJWT refused Kakin's token: \(accepted["error"] ?? .null)")
            #expect(accepted["header"] == ["alg": "ES256", "kid": "2X9R4HXF34", "typ": "JWT"])
            #expect(accepted["claims"]?["bid"] == "com.example" && accepted["claims"]?["iat"] == .int(now))
            let lifetime = (accepted["claims"]?["exp"]?.int64Value ?? 0) - now
            #expect(lifetime > 0 && lifetime <= 3600, "Apple refuses tokens valid for more than an hour: \(lifetime) s")
        }
        for (answer, what) in zip(answers[2...], ["changed claims", "a changed signature", "another key"]) {
            #expect(answer["valid"] == false, "PyJWT accepted a token with \(what)")
        }
    }
}
