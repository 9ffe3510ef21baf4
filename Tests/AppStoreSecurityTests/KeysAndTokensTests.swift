import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

@Suite struct KeyTests {
    @Test func applesP8KeyLoadsAndRoundTripsThroughPEM() throws {
        let pem = String(decoding: try Fixtures.appleFile("certs/testSigningKey.p8"), as: UTF8.self)
        let key = try P256PrivateKey(pemPKCS8: pem)
        let exported = try key.pemPKCS8()
        #expect(exported.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let again = try P256PrivateKey(pemPKCS8: exported)
        #expect(again.publicKey.spkiDER == key.publicKey.spkiDER)
    }

    @Test func es256SignaturesAre64BytesAndVerify() throws {
        let key = try P256PrivateKey()
        let message = Array("header.payload".utf8)
        for _ in 0..<20 {  // r or s with leading zero bytes must keep their 32-byte width
            let signature = try key.signES256(message)
            #expect(signature.count == 64)
            #expect(key.publicKey.isValidES256Signature(signature, for: message))
        }
        let signature = try key.signES256(message)
        #expect(!key.publicKey.isValidES256Signature(signature, for: Array("header.payloaD".utf8)))
        #expect(!key.publicKey.isValidES256Signature(Array(signature.prefix(63)), for: message))
        #expect(!key.publicKey.isValidES256Signature(signature + [0], for: message))
        #expect(!key.publicKey.isValidES256Signature([UInt8](repeating: 0, count: 64), for: message))
        #expect(!(try P256PrivateKey()).publicKey.isValidES256Signature(signature, for: message))
    }

    @Test func derSignaturesVerify() throws {
        let key = try P256PrivateKey()
        let message = Array("offer".utf8)
        let der = try key.signDER(message)
        #expect(der.first == 0x30)
        #expect(key.publicKey.isValidDERSignature(der, for: message))
        #expect(!key.publicKey.isValidDERSignature(der, for: Array("offer!".utf8)))
    }

    @Test func malformedKeysAreRefused() {
        #expect(throws: CryptoError.self) {
            try P256PrivateKey(pemPKCS8: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        }
        #expect(throws: CryptoError.self) { try P256PublicKey(spkiDER: [0x30, 0x03, 0x02, 0x01, 0x00]) }
        #expect(throws: CryptoError.self) { try X509Certificate(der: Array("not a certificate".utf8)) }
    }

    @Test func publicKeyRoundTripsThroughSPKI() throws {
        let key = try P256PrivateKey()
        let copy = try P256PublicKey(spkiDER: key.publicKey.spkiDER)
        let message = Array("m".utf8)
        #expect(copy.isValidES256Signature(try key.signES256(message), for: message))
    }
}

@Suite struct CertificateTests {
    @Test func embeddedAppleRootEqualsTheResourceFile() throws {
        let file = Fixtures.packageRoot.appendingPathComponent("Sources/AppStoreSecurity/Resources/AppleRootCA-G3.cer")
        let bytes = try #require(FileManager.default.contents(atPath: file.path))
        #expect(try AppleRootCertificates.rootCAG3() == [UInt8](bytes))
    }

    @Test func appleRootHasThePublishedFingerprint() throws {
        let root = try X509Certificate(der: try AppleRootCertificates.rootCAG3())
        #expect(SHA256Hash.fingerprintString(root.sha256Fingerprint) == AppleRootCertificates.rootCAG3Fingerprint)
        #expect(root.subject.contains("CN=Apple Root CA - G3"))
        #expect(root.notBeforeMs == 1_398_881_946_000)  // 2014-04-30 18:19:06 UTC
        #expect(root.notAfterMs == 2_187_800_346_000)  // 2039-04-30 18:19:06 UTC
    }

    @Test func testCAChainCarriesAppleMarkersAndKeyIdentifiers() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        #expect(ca.leaf.hasExtension(oid: "1.2.840.113635.100.6.11.1"))
        #expect(!ca.leaf.hasExtension(oid: "1.2.840.113635.100.6.2.1"))
        #expect(ca.intermediate.hasExtension(oid: "1.2.840.113635.100.6.2.1"))
        for certificate in [ca.root, ca.intermediate, ca.leaf] {
            #expect(certificate.hasExtension(oid: "2.5.29.14"))  // subjectKeyIdentifier
            #expect(certificate.hasExtension(oid: "2.5.29.35"))  // authorityKeyIdentifier
            #expect(certificate.hasExtension(oid: "2.5.29.19"))  // basicConstraints
            #expect(certificate.hasExtension(oid: "2.5.29.15"))  // keyUsage
        }
        #expect(ca.intermediate.issuer == ca.root.subject)
        #expect(ca.leaf.issuer == ca.intermediate.subject)
        #expect(try ca.leaf.publicKey().spkiDER == ca.leafKey.publicKey.spkiDER)
    }

    @Test func signingAuthoritySurvivesExportAndImport() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        let exported = try ca.exported()
        let text = exported.jsonString
        let restored = try SigningCertificateAuthority(exported: try JSONParser.parse(text))
        #expect(restored.rootDER == ca.rootDER)
        #expect(restored.x5c == ca.x5c)
        let verifier = try makeVerifier(roots: [ca.rootDER])
        #expect(failureCode { _ = try verifier.verify(try restored.signer().sign(transactionPayload())) } == nil)
    }

    @Test func importRefusesAKeyThatIsNotTheCertificates() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        guard case .object(var fields) = try ca.exported(), case .object(var leaf) = fields["leaf"] else {
            Issue.record("unexpected export shape")
            return
        }
        leaf["privateKey"] = .string(try P256PrivateKey().pemPKCS8())
        fields["leaf"] = .object(leaf)
        #expect(throws: CryptoError.self) { try SigningCertificateAuthority(exported: .object(fields)) }
    }
}

@Suite struct APITokenTests {
    let key: P256PrivateKey
    let verifier: AppStoreServerAPITokenVerifier
    let now: Int64 = 1_780_272_000

    init() throws {
        key = try P256PrivateKey()
        verifier = AppStoreServerAPITokenVerifier(
            keys: ["KEY1": .init(publicKey: key.publicKey, issuerId: "issuer-1")], bundleId: "com.example")
    }

    func token(
        keyId: String = "KEY1", issuer: String = "issuer-1", bundleId: String = "com.example", iat: Int64? = nil,
        exp: Int64? = nil
    ) throws -> String {
        try AppStoreServerAPIToken.make(
            key: key, keyId: keyId, issuerId: issuer, bundleId: bundleId, issuedAtSeconds: iat ?? now,
            expiresAtSeconds: exp ?? now + 300)
    }

    func reason(_ token: String) -> APITokenFailure.Reason? {
        do {
            _ = try verifier.verify(token, nowSeconds: now)
            return nil
        } catch {
            return error.reason
        }
    }

    @Test func tokenFromOurKeyIsAccepted() throws {
        let claims = try verifier.verify(try token(), nowSeconds: now)
        #expect(claims.bundleId == "com.example")
        #expect(claims.keyId == "KEY1")
        let parts = try token().split(separator: ".")
        let header = try JSONParser.parse(Base64.decode(String(parts[0]))!)
        #expect(header == ["alg": "ES256", "kid": "KEY1", "typ": "JWT"])
        let claimsJSON = try JSONParser.parse(Base64.decode(String(parts[1]))!)
        #expect(claimsJSON["aud"] == "appstoreconnect-v1")
    }

    @Test func tokenWithoutIatIsAcceptedUpToAnHourFromNow() throws {
        let noIat = try AppStoreServerAPIToken.make(
            key: key, keyId: "KEY1", issuerId: "issuer-1", bundleId: "com.example", issuedAtSeconds: nil,
            expiresAtSeconds: now + 3600)
        #expect(reason(noIat) == nil)
        let tooLong = try AppStoreServerAPIToken.make(
            key: key, keyId: "KEY1", issuerId: "issuer-1", bundleId: "com.example", issuedAtSeconds: nil,
            expiresAtSeconds: now + 3601)
        #expect(reason(tooLong) == .lifetimeTooLong)
    }

    @Test func badTokensAreRefusedWithTheirReason() throws {
        #expect(reason(try token(keyId: "OTHER")) == .unknownKey)
        #expect(reason(try token(issuer: "issuer-2")) == .wrongIssuer)
        #expect(reason(try token(bundleId: "com.other")) == .wrongBundleId)
        #expect(reason(try token(exp: now)) == .expired)
        #expect(reason(try token(iat: now - 100, exp: now + 3600)) == .lifetimeTooLong)
        #expect(reason(try token(iat: now + 600, exp: now + 900)) == .issuedInFuture)
        #expect(reason("a.b") == .malformed)
        #expect(reason("") == .malformed)
        let valid = try token()
        let parts = valid.split(separator: ".").map(String.init)
        #expect(reason(parts[0] + "." + parts[1] + "." + Base64.urlEncode([UInt8](repeating: 1, count: 64))) == .invalidSignature)
        let strangerSigned = try AppStoreServerAPIToken.make(
            key: try P256PrivateKey(), keyId: "KEY1", issuerId: "issuer-1", bundleId: "com.example", issuedAtSeconds: now,
            expiresAtSeconds: now + 300)
        #expect(reason(strangerSigned) == .invalidSignature)
        // Claims signed properly but wrong in shape.
        func signed(_ header: JSONValue, _ claims: JSONValue) throws -> String {
            let input = Base64.urlEncode(header.serialized()) + "." + Base64.urlEncode(claims.serialized())
            return input + "." + Base64.urlEncode(try key.signES256(Array(input.utf8)))
        }
        let header: JSONValue = ["alg": "ES256", "kid": "KEY1", "typ": "JWT"]
        #expect(
            reason(try signed(header, ["iss": "issuer-1", "aud": "appstoreconnect-v1", "bid": "com.example"])) == .missingExpiry)
        #expect(
            reason(
                try signed(header, ["iss": "issuer-1", "aud": "appstoreconnect-v2", "bid": "com.example", "exp": .int(now + 60)]))
                == .wrongAudience)
        #expect(
            reason(
                try signed(
                    ["alg": "HS256", "kid": "KEY1"],
                    ["iss": "issuer-1", "aud": "appstoreconnect-v1", "bid": "com.example", "exp": .int(now + 60)]))
                == .unsupportedAlgorithm)
    }
}

@Suite struct PromotionalOfferSignatureTests {
    let offer = PromotionalOfferSignature(
        bundleId: "com.example", keyIdentifier: "KEY1", productIdentifier: "premium.monthly", offerIdentifier: "promo",
        appAccountToken: nil, nonce: "0E4A4B8E-1C51-4B1B-8DDA-0F0C1D8E9A10", timestampMs: 1_780_272_000_123)

    @Test func messageJoinsSevenFieldsWithInvisibleSeparators() {
        let text = String(decoding: offer.message, as: UTF8.self)
        #expect(
            text
                == "com.example\u{2063}KEY1\u{2063}premium.monthly\u{2063}promo\u{2063}\u{2063}0e4a4b8e-1c51-4b1b-8dda-0f0c1d8e9a10\u{2063}1780272000123"
        )
        var withToken = offer
        withToken.appAccountToken = "A2E1C0E4-7E7B-4A4B-9C32-55C3D9F4B1AA"
        #expect(
            String(decoding: withToken.message, as: UTF8.self).contains("\u{2063}a2e1c0e4-7e7b-4a4b-9c32-55c3d9f4b1aa\u{2063}"))
    }

    @Test func signatureIsStandardBase64DERAndVerifies() throws {
        let key = try P256PrivateKey()
        let signature = try offer.signature(key: key)
        #expect(Base64.decode(signature)?.first == 0x30)
        #expect(!signature.contains("-") && !signature.contains("_"))
        #expect(offer.isValidSignature(signature, publicKey: key.publicKey))
        var later = offer
        later.timestampMs += 1
        #expect(!later.isValidSignature(signature, publicKey: key.publicKey))
        #expect(!offer.isValidSignature("not base64!", publicKey: key.publicKey))
    }
}
