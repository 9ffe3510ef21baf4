import AppStoreSecurity
import KakinCrypto

/// The legacy app receipt reader (PKCS#7 SignedData in DER or Xcode's BER, then the ASN.1 payload), with
/// and without the signature check, and its base64 entry point.
struct ReceiptTarget: FuzzTarget {
    let roots: [X509Certificate]

    init() {
        roots = [try! SigningCertificateAuthority(nowMs: 1_767_225_600_000).root]
    }

    func run(_ input: [UInt8]) {
        _ = try? AppReceipt.parse(der: input)
        _ = try? AppReceipt.parse(der: input, trustedRoots: roots, nowMs: 1_767_225_600_000)
        if let text = String(validating: input, as: UTF8.self) { _ = try? AppReceipt.parse(base64: text) }
    }
}
