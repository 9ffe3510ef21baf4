import AppStoreSecurity
import KakinCore
import KakinCrypto
@testable import KakinServer
import KakinService
import Testing

/// Inputs the fuzzers (`scripts/fuzz`) found that crashed or misled Kakin, kept as regression tests.
@Suite struct FuzzFindings {
    static func hs256(_ claims: String, secret: [UInt8]) -> String {
        let input = Base64.urlEncode(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)) + "." + Base64.urlEncode(Array(claims.utf8))
        return input + "." + Base64.urlEncode(HMACSHA256.authenticationCode(key: secret, message: Array(input.utf8)))
    }

    /// `jwt` target: `exp * 1000` overflowed Int64 and trapped, so one signed token stopped the server.
    @Test func customerTokenWithAnExpiryBeyondInt64MillisecondsIsReadNotACrash() {
        let secret = Array("fuzz-secret-fuzz-secret-fuzz-sec".utf8)
        let nowMs: Int64 = 1_767_225_600_000
        #expect(CustomerToken.verifyHS256(Self.hs256(#"{"sub": "nge0", "exp": 17272276640027664}"#, secret: secret), secret: secret, nowMs: nowMs) == "nge0")
        #expect(CustomerToken.verifyHS256(Self.hs256(#"{"sub": "u1", "exp": 9223372036854775807}"#, secret: secret), secret: secret, nowMs: nowMs) == "u1")
        #expect(CustomerToken.verifyHS256(Self.hs256(#"{"sub": "u1", "exp": -9223372036854775808}"#, secret: secret), secret: secret, nowMs: nowMs) == nil)
        #expect(CustomerToken.verifyHS256(Self.hs256(#"{"sub": "u1", "exp": 1767225600}"#, secret: secret), secret: secret, nowMs: nowMs) == nil)
        #expect(CustomerToken.verifyHS256(Self.hs256(#"{"sub": "u1", "exp": 1767225601}"#, secret: secret), secret: secret, nowMs: nowMs) == "u1")
    }
}
