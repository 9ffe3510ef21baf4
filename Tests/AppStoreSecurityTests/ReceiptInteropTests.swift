import AppStoreSecurity
import Foundation
import KakinCore
import Testing

/// Kakin and Apple's own library (Python `ReceiptUtility`, in `<package root>/.venv` like `InteropTests`)
/// read the same transaction IDs from the same app receipts: Apple's Xcode receipts, receipts Kakin writes
/// (App Store DER and Xcode BER), and refuse the same broken ones. `KAKIN_SKIP_INTEROP=1` skips.
@Suite struct ReceiptInteropTests {
    static let script = Fixtures.packageRoot.appendingPathComponent("Tests/AppStoreSecurityTests/Interop/receipt_interop.py")

    static func receipts() throws -> [(name: String, base64: String)] {
        let ca = try SigningCertificateAuthority(nowMs: Fixtures.now)
        let sample = AppReceiptTests.sampleReceipt()
        var many = sample
        many.inApp = (0..<300).map { (i: Int) -> AppReceipt.InAppPurchase in
            let id = 3_000_000_000 + i
            return AppReceipt.InAppPurchase(quantity: 1, productId: "coins.100", transactionId: String(id),
                                            originalTransactionId: String(id - i % 3), purchaseDateMs: Fixtures.now - Int64(i) * 1000)
        }
        var onlyOriginal = sample
        onlyOriginal.inApp = [AppReceipt.InAppPurchase(productId: "noads", originalTransactionId: "4000000000000001")]
        let signedDER = try sample.signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate])
        return [
            ("apple xcode with transaction", try AppReceiptTests.xcodeReceipt("xcode-app-receipt-with-transaction")),
            ("apple xcode empty", try AppReceiptTests.xcodeReceipt("xcode-app-receipt-empty")),
            ("kakin der", Base64.encode(signedDER)),
            ("kakin xcode", Base64.encode(try sample.signed(key: ca.leafKey, certificate: ca.leaf, encoding: .xcode))),
            ("kakin 300 in-apps", Base64.encode(try many.signed(key: ca.leafKey, certificate: ca.leaf, chain: [ca.intermediate]))),
            ("kakin original only", Base64.encode(try onlyOriginal.signed(key: ca.leafKey, certificate: ca.leaf, encoding: .xcode))),
            ("kakin empty", Base64.encode(try AppReceipt(bundleId: "dev.kakin.demo").signed(key: ca.leafKey, certificate: ca.leaf))),
            ("truncated", Base64.encode(Array(signedDER.prefix(signedDER.count / 2)))),
            ("not base64", "this is not a receipt"),
            ("not pkcs7", Base64.encode(Array("hello, receipts".utf8))),
        ]
    }

    @Test(.enabled(if: !InteropTests.skipped, "KAKIN_SKIP_INTEROP=1"))
    func kakinAndApplesReceiptUtilityReadTheSameTransactionIds() throws {
        guard FileManager.default.isExecutableFile(atPath: InteropTests.python.path) else {
            Issue.record("Apple's Python library is needed: python3 -m venv .venv && .venv/bin/pip install app-store-server-library==3.1.2")
            return
        }
        let receipts = try Self.receipts()
        let request: JSONValue = ["receipts": .array(receipts.map { ["name": .string($0.name), "base64": .string($0.base64)] })]
        let answer = try InteropTests.askApple(request, script: Self.script)
        var compared = 0
        for (name, base64) in receipts {
            let apple = try #require(answer["receipts"]?[name], "no answer for \(name)")
            let kakin = Result { () throws(AppReceiptError) in try AppReceipt.parse(base64: base64) }
            switch kakin {
            case .failure(let error):
                #expect(apple["error"] != nil, "\(name): Kakin refused it (\(error)), Apple read it")
            case .success(let receipt):
                #expect(apple["error"] == nil, "\(name): Apple refused it (\(apple["error"]?.stringValue ?? "")), Kakin read it")
                let first = receipt.inApp.first.flatMap { $0.transactionId ?? $0.originalTransactionId }
                #expect(apple["transactionId"] == .string(first), "\(name): ReceiptUtility's transaction id")
                let ours: JSONValue = .array(receipt.inApp.map { [.string($0.transactionId), .string($0.originalTransactionId)] })
                #expect(apple["inApp"] == ours, "\(name): every in-app purchase's ids")
                compared += 1
            }
        }
        #expect(compared == 7)
    }
}
