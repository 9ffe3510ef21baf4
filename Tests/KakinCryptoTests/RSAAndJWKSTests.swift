import KakinCore
import KakinCrypto
import Testing

@Suite struct RSAAndJWKSTests {
    static let key = try! RSAPrivateKey()

    @Test func anRSAKeyRoundTripsThroughPKCS8AndJWKAndSignsRS256() throws {
        let key = Self.key
        let pem = try key.pemPKCS8()
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let loaded = try RSAPrivateKey(pem: pem)
        #expect(loaded.publicKey.spkiDER == key.publicKey.spkiDER && key.publicKey.modulus.count == 256 && key.publicKey.exponent == [1, 0, 1])
        let signature = try loaded.signRS256(Array("hello".utf8))
        #expect(signature.count == 256)
        #expect(key.publicKey.isValidRS256Signature(signature, for: Array("hello".utf8)))
        #expect(!key.publicKey.isValidRS256Signature(signature, for: Array("hellp".utf8)))
        #expect(!key.publicKey.isValidRS256Signature(Array(signature.dropLast()), for: Array("hello".utf8)))
        let jwk = key.publicKey.jwk(keyId: "k1")
        let set = try JSONWebKeySet(json: ["keys": [jwk, ["kty": "EC", "kid": "ec", "crv": "P-256"]]])
        #expect(set.keys.count == 1 && set["k1"]?.spkiDER == key.publicKey.spkiDER)
        #expect(try JSONWebKeySet(json: try JSONParser.parse(set.json.serialized()))["k1"] != nil)
    }

    @Test func brokenKeysAndSetsAreRefused() throws {
        #expect(throws: CryptoError.self) { try RSAPrivateKey(pem: try P256PrivateKey().pemPKCS8()) }
        #expect(throws: CryptoError.self) { try RSAPrivateKey(bits: 1024) }
        #expect(throws: CryptoError.self) { try JSONWebKeySet(json: ["keys": [["kty": "RSA", "kid": "x", "n": "!!", "e": "AQAB"]]]) }
        #expect(throws: CryptoError.self) { try JSONWebKeySet(json: ["nokeys": true]) }
        #expect(throws: CryptoError.self) { try RSAPublicKey(modulus: [1, 2, 3], exponent: [1, 0, 1]) }
    }

    @Test func aCompactJWTDecodesAndItsRS256SignatureChecks() throws {
        let claims: JSONValue = ["sub": "a"]
        let token = try CompactJWS.make(header: ["alg": "RS256", "kid": "k1"], payloadBytes: claims.serialized(),
                                        sign: Self.key.signRS256)
        let jwt = try #require(DecodedJWT(token, bytesMax: 8192))
        #expect(jwt.claims["sub"] == "a" && jwt.isSignedRS256(by: Self.key.publicKey))
        #expect(!jwt.isSignedRS256(by: try RSAPrivateKey().publicKey))
        #expect(DecodedJWT(token, bytesMax: 10) == nil && DecodedJWT("a.b", bytesMax: 8192) == nil)
        var tampered = Array(token.utf8)
        tampered[tampered.count / 3] ^= 1
        #expect(DecodedJWT(String(decoding: tampered, as: UTF8.self), bytesMax: 8192).map { $0.isSignedRS256(by: Self.key.publicKey) } != true)
    }
}
