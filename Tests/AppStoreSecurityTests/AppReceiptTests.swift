@testable import AppStoreSecurity
import Foundation
import KakinCore
import KakinCrypto
import Testing

/// App receipts (reference §9): Apple's Xcode receipts read as Apple's tools read them, receipts Kakin
/// writes read back and verified, and hostile bytes refused without a crash.
@Suite struct AppReceiptTests {
    static func xcodeReceipt(_ name: String) throws -> String {
        String(decoding: try Fixtures.appleFile("xcode/\(name)"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Xcode's StoreKit Testing certificate, the signer Xcode embeds in its receipts (offsets from
    /// `openssl asn1parse` of the fixture).
    static func xcodeCertificate() throws -> X509Certificate {
        let der = try AppReceipt.der(fromBase64: try xcodeReceipt("xcode-app-receipt-with-transaction"))
        return try X509Certificate(der: Array(der[442..<(442 + 4 + 884)]))
    }

    @Test func applesXcodeReceiptWithATransactionNamesTransactionZero() throws {
        let receipt = try AppReceipt.parse(base64: try Self.xcodeReceipt("xcode-app-receipt-with-transaction"))
        #expect(receipt.receiptType == "Xcode")
        #expect(receipt.appItemId == 0)
        #expect(receipt.bundleId == "com.example.naturelab.backyardbirds.example")
        #expect(receipt.applicationVersion == "1")
        #expect(receipt.creationDateMs == Timestamp.parseRFC3339("2023-10-19T01:45:40Z"))
        #expect(receipt.inApp.count == 1)
        let purchase = try #require(receipt.inApp.first)
        #expect(purchase.transactionId == "0")
        #expect(purchase.originalTransactionId == nil)
        #expect(purchase.productId == "pass.premium")
        #expect(purchase.quantity == 1)
        #expect(purchase.purchaseDateMs == Timestamp.parseRFC3339("2023-10-19T01:45:36Z"))
        #expect(purchase.expiresDateMs == Timestamp.parseRFC3339("2023-11-19T01:45:36Z"))
        #expect(receipt.transactionIds == ["0"])
    }

    @Test func applesEmptyXcodeReceiptHasNoTransactions() throws {
        let receipt = try AppReceipt.parse(base64: try Self.xcodeReceipt("xcode-app-receipt-empty"))
        #expect(receipt.bundleId == "com.example.naturelab.backyardbirds.example")
        #expect(receipt.inApp.isEmpty)
        #expect(receipt.transactionIds.isEmpty)
    }

    @Test func applesXcodeReceiptVerifiesAgainstItsStoreKitCertificateButNotAppleIncRoot() throws {
        let der = try AppReceipt.der(fromBase64: try Self.xcodeReceipt("xcode-app-receipt-with-transaction"))
        let storeKit = try Self.xcodeCertificate()
        #expect(storeKit.subject.contains("CN=StoreKit"))
        let receipt = try AppReceipt.parse(der: der, trustedRoots: [storeKit], nowMs: Fixtures.now)
        #expect(receipt.transactionIds == ["0"])
        let apple = try X509Certificate(der: try AppleRootCertificates.appleIncRoot())
        #expect(apple.subject.contains("CN=Apple Root CA"))
        let refused = #expect(throws: AppReceiptError.self) { try AppReceipt.parse(der: der, trustedRoots: [apple], nowMs: Fixtures.now) }
        guard case .untrusted? = refused else { Issue.record("expected untrusted, got \(String(describing: refused))"); return }
    }

    static func sampleReceipt() -> AppReceipt {
        let day: Int64 = 86_400_000
        let t0 = Fixtures.now - 40 * day
        return AppReceipt(
            receiptType: "ProductionSandbox", appItemId: 6_000_000_001, bundleId: "dev.kakin.demo", applicationVersion: "7",
            originalApplicationVersion: "1.0", creationDateMs: t0 + 40 * day,
            inApp: [
                .init(quantity: 1, productId: "premium.monthly", transactionId: "2000000000000001", originalTransactionId: "2000000000000001",
                      purchaseDateMs: t0, originalPurchaseDateMs: t0, expiresDateMs: t0 + 7 * day, webOrderLineItemId: "2000000000000101"),
                .init(quantity: 2, productId: "coins.100", transactionId: "2000000000000003", originalTransactionId: "2000000000000003",
                      purchaseDateMs: t0 + 20 * day, originalPurchaseDateMs: t0 + 20 * day),
                .init(quantity: 1, productId: "premium.monthly", transactionId: "2000000000000002", originalTransactionId: "2000000000000001",
                      purchaseDateMs: t0 + 7 * day, originalPurchaseDateMs: t0, expiresDateMs: t0 + 38 * day, webOrderLineItemId: "2000000000000102",
                      cancellationDateMs: t0 + 30 * day),
            ])
    }

    @Test(arguments: AppReceipt.Encoding.allCases)
    func receiptsKakinSignsReadBackAndVerifyAgainstTheirRoot(encoding: AppReceipt.Encoding) throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        let receipt = Self.sampleReceipt()
        let der = try receipt.signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate], encoding: encoding)
        if encoding == .xcode { #expect(der[1] == 0x80, "indefinite-length BER, as Xcode writes") }
        let read = try AppReceipt.parse(der: der, trustedRoots: [ca.root], nowMs: Fixtures.now)
        #expect(read == receipt)
        #expect(read.transactionIds == ["2000000000000003", "2000000000000002", "2000000000000001"])
        #expect(read.latestPerOriginal.map(\.transactionId) == ["2000000000000003", "2000000000000002"])

        let other = try SigningCertificateAuthority(nowMs: Fixtures.now)
        #expect(throws: AppReceiptError.self) { try AppReceipt.parse(der: der, trustedRoots: [other.root], nowMs: Fixtures.now) }
    }

    @Test func aReceiptIsVerifiedAtItsCreationDate() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        var receipt = Self.sampleReceipt()
        receipt.creationDateMs = ca.leaf.notAfterMs + Fixtures.dayMs
        let der = try receipt.signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate])
        #expect(throws: AppReceiptError.self) { try AppReceipt.parse(der: der, trustedRoots: [ca.root], nowMs: Fixtures.now) }
        #expect(try AppReceipt.parse(der: der).transactionIds.count == 3)
    }

    @Test func aChangedPayloadNoLongerVerifies() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        var der = try Self.sampleReceipt().signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate])
        // Turn a digit of the first transaction id into another digit: still a readable receipt.
        let needle = Array("2000000000000001".utf8)
        let at = try #require((0...(der.count - needle.count)).first { Array(der[$0..<($0 + needle.count)]) == needle })
        der[at + needle.count - 1] = UInt8(ascii: "9")
        #expect(try AppReceipt.parse(der: der).transactionIds.contains("2000000000000009"))
        #expect(throws: AppReceiptError.self) { try AppReceipt.parse(der: der, trustedRoots: [ca.root], nowMs: Fixtures.now) }
    }

    // MARK: Bad input

    @Test(arguments: ["", "   ", "not base64!", "AAAA", "MIIB", "SGVsbG8sIHdvcmxk", "-_-_", String(repeating: "A", count: 1_100_000)])
    func garbageIsMalformed(base64: String) {
        do {
            _ = try AppReceipt.parse(base64: base64)
            Issue.record("accepted \(base64.prefix(20))")
        } catch {
            guard case .malformed = error else { Issue.record("expected malformed, got \(error)"); return }
        }
    }

    @Test func everyTruncationOfApplesReceiptIsMalformedNeverACrash() throws {
        let der = try AppReceipt.der(fromBase64: try Self.xcodeReceipt("xcode-app-receipt-with-transaction"))
        for length in 0..<der.count {
            #expect(throws: AppReceiptError.self, "prefix of \(length) bytes") { try AppReceipt.parse(der: Array(der[0..<length])) }
        }
    }

    /// A receipt with one to three bytes flipped is read or refused, never a crash — and a tampered receipt never
    /// verifies as anything but what was signed: a change to what it says (its payload, its certificates, its
    /// signature) is refused by the root that signed it. (OpenSSL's PKCS#7 check lets a few unsigned bytes vary — the
    /// SignedData and SignerInfo versions, a digest algorithm's NULL parameters, the letter case of the signer's issuer
    /// name, a constructed bit — so such a copy may still verify; it reads exactly as the original.)
    @Test func flippedBytesAreReadOrRefusedNeverACrashAndATamperedReceiptNeverVerifiesAsSomethingElse() throws {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        let originals: [(der: [UInt8], root: X509Certificate)] = [
            (try AppReceipt.der(fromBase64: try Self.xcodeReceipt("xcode-app-receipt-with-transaction")), try Self.xcodeCertificate()),
            (try Self.sampleReceipt().signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate]), ca.root),
        ]
        var rng = SeededRandom(seed: 42)
        for original in originals {
            let signed = try AppReceipt.parse(der: original.der, trustedRoots: [original.root], nowMs: Fixtures.now)
            var read = 0, refused = 0, verified = 0
            for _ in 0..<2000 {
                var der = original.der
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    der[Int.random(in: 0..<der.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
                }
                guard der != original.der else { continue }   // two flips of one byte may cancel out
                if (try? AppReceipt.parse(der: der)) != nil { read += 1 } else { refused += 1 }
                if let passed = try? AppReceipt.parse(der: der, trustedRoots: [original.root], nowMs: Fixtures.now) {
                    verified += 1
                    #expect(passed == signed, "a tampered receipt verified and reads \(passed)")
                }
            }
            #expect(read > 0 && refused > 0, "read \(read), refused \(refused)")
            #expect(verified < 20, "\(verified) of 2000 changed copies verified")
        }
    }

    /// Payloads built by hand: each breaks one rule of the format and is refused with a reason.
    @Test(arguments: [
        (DER.integer(5), "a SET"),
        (DER.set([DER.attribute(17, DER.set([DER.attribute(1703, DER.utf8String("12a"))]))]), "decimal id"),
        (DER.set([DER.attribute(17, DER.set([DER.attribute(1703, DER.integer(12))]))]), "not a string"),
        (DER.set([DER.attribute(12, DER.ia5String("yesterday"))]), "RFC 3339"),
        (DER.set([DER.sequence([DER.integer(2), DER.integer(1)])]), "value is missing"),
        (DER.set([DER.attribute(17, DER.integer(1))]), "a SET"),
        (DER.set([DER.attribute(1, [0x02, 0x01, 0xFB])]), "negative"),
        (DER.set([DER.attribute(17, DER.set([DER.attribute(1701, [0x02, 0x0A] + [UInt8](repeating: 1, count: 10))]))]), "too large"),
        (DER.set([]) + [0x00], "after the receipt payload"),
        ([0x31, 0x84, 0x7F, 0xFF, 0xFF, 0xFF, 0x30], "runs past"),
        ([0x31, 0x80, 0x00, 0x00], "indefinite"),
    ] as [([UInt8], String)])
    func payloadsThatBreakTheFormatAreRefusedWithAReason(payload: [UInt8], reason: String) {
        do {
            _ = try AppReceipt.parsePayload(payload)
            Issue.record("accepted a payload that should mention \(reason)")
        } catch {
            #expect(error.reason.contains(reason), "\(error.reason)")
        }
    }

    @Test func tooManyInAppPurchasesAreRefused() {
        let one = DER.attribute(17, AppReceipt.InAppPurchase(transactionId: "1").payloadDER)
        let payload = DER.set(Array(repeating: one, count: AppReceipt.inAppMax + 1))
        #expect(throws: AppReceiptError.malformed("more than \(AppReceipt.inAppMax) in-app purchases")) {
            try AppReceipt.parsePayload(payload)
        }
    }

    @Test func emptyDatesAreUnsetAsApplesAre() throws {
        let payload = DER.set([DER.attribute(21, DER.ia5String("")), DER.attribute(12, DER.ia5String(""))])
        #expect(try AppReceipt.parsePayload(payload).creationDateMs == nil)
    }
}
