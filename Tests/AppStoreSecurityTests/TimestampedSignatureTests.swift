import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// Stripe's signature scheme (`Stripe-Signature` in, `Kakin-Signature` out), checked against `openssl dgst`.
@Suite struct TimestampedSignatureTests {
    let body = Array(#"{"id":"evt_1","type":"coins.credited"}"#.utf8)
    let secret = Array("whsec_test_secret".utf8)

    @Test func signatureIsOpenSSLsHMACOfTimestampDotBody() throws {
        let header = TimestampedSignature.header(body: body, timestamp: 1_700_000_000, secrets: [secret])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["dgst", "-sha256", "-hmac", "whsec_test_secret", "-hex"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("1700000000.".utf8) + Data(body))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let hex = try #require(printed.split(separator: " ").last).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(header == "t=1700000000,v1=\(hex)")
    }

    @Test func verifiesWithinToleranceAndAnyRotatedSecret() throws {
        let old = Array("old".utf8)
        let header = TimestampedSignature.header(body: body, timestamp: 1000, secrets: [secret, old])
        #expect(try TimestampedSignature.verify(header: header, body: body, secrets: [old], nowSeconds: 1200, toleranceSeconds: 300) == 1000)
        #expect(try TimestampedSignature.verify(header: header, body: body, secrets: [secret], nowSeconds: 800, toleranceSeconds: 300) == 1000)
        // Unknown schemes and spaces are ignored, as Stripe's libraries do.
        let spaced = "t=1000, v0=abcd, v1=" + header.split(separator: "=").last!
        #expect(try TimestampedSignature.verify(header: spaced, body: body, secrets: [old], nowSeconds: 1000, toleranceSeconds: 300) == 1000)
    }

    @Test func refusesTamperingStalenessAndMalformedHeaders() {
        let header = TimestampedSignature.header(body: body, timestamp: 1000, secrets: [secret])
        #expect(throws: TimestampedSignature.Failure.noMatchingSignature) {
            try TimestampedSignature.verify(header: header, body: body + [0x20], secrets: [secret], nowSeconds: 1000, toleranceSeconds: 300)
        }
        #expect(throws: TimestampedSignature.Failure.noMatchingSignature) {
            try TimestampedSignature.verify(header: header, body: body, secrets: [Array("other".utf8)], nowSeconds: 1000, toleranceSeconds: 300)
        }
        #expect(throws: TimestampedSignature.Failure.timestampOutsideTolerance) {
            try TimestampedSignature.verify(header: header, body: body, secrets: [secret], nowSeconds: 1301, toleranceSeconds: 300)
        }
        for bad in [nil, "", "v1=00", "t=1000", "t=x,v1=00", "t=1,t=2,v1=00", String(repeating: "t", count: 2000)] as [String?] {
            #expect(throws: TimestampedSignature.Failure.malformedHeader) {
                try TimestampedSignature.verify(header: bad, body: body, secrets: [secret], nowSeconds: 1000, toleranceSeconds: 300)
            }
        }
    }
}
