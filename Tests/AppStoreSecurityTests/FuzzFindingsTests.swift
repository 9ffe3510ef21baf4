import AppStoreSecurity
import KakinCore
import KakinCrypto
import Testing

/// Inputs found while fuzzing (`scripts/fuzz`) that crashed a verifier, kept as regression tests.
@Suite struct SecurityFuzzFindings {
    /// Found while writing the `jwt` target: `exp - iat` overflowed Int64 for a far-past `iat` and a
    /// far-future `exp`, trapping the simulator's App Store Server API on one signed token.
    @Test func apiTokenWithExtremeIssueAndExpiryTimesIsRefusedNotACrash() throws {
        let key = try P256PrivateKey()
        let verifier = AppStoreServerAPITokenVerifier(keys: ["KEY1": .init(publicKey: key.publicKey)], bundleId: "com.example")
        let token = try AppStoreServerAPIToken.make(key: key, keyId: "KEY1", issuerId: "i", bundleId: "com.example",
                                                    issuedAtSeconds: Int64.min + 1, expiresAtSeconds: Int64.max)
        #expect(throws: APITokenFailure(.lifetimeTooLong)) { try verifier.verify(token, nowSeconds: 1_780_272_000) }
    }
}
