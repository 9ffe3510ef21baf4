import KakinCore
import KakinCrypto

/// Writing receipts, for Kakin's App Store simulator (which hands apps a receipt for their simulated
/// purchases, as StoreKit 1 would) and for tests. Attributes are written in type order, as Apple's are.
extension AppReceipt {
    /// How the PKCS#7 envelope is encoded.
    public enum Encoding: String, Sendable, CaseIterable {
        /// DER with definite lengths, like App Store receipts.
        case der
        /// BER with indefinite lengths and the payload in a constructed OCTET STRING, like the receipts
        /// Xcode's StoreKit Testing writes.
        case xcode
    }

    /// The DER payload: `SET OF SEQUENCE { type, version 1, OCTET STRING value }`.
    public var payloadDER: [UInt8] {
        var attributes: [[UInt8]] = []
        func add(_ type: Int64, _ value: [UInt8]?) {
            if let value { attributes.append(DER.attribute(type, value)) }
        }
        add(0, receiptType.map(DER.utf8String))
        add(1, appItemId.map(DER.integer))
        add(2, bundleId.map(DER.utf8String))
        add(3, applicationVersion.map(DER.utf8String))
        add(12, creationDateMs.map(DER.date))
        for purchase in inApp { add(17, purchase.payloadDER) }
        add(19, originalApplicationVersion.map(DER.utf8String))
        return DER.set(attributes)
    }

    /// A signed receipt: PKCS#7 SignedData over `payloadDER`, signed by `key` whose certificate is
    /// `certificate`, carrying `certificate` and `chain` (not the root: verifiers bring their own).
    public func signed(key: P256PrivateKey, certificate: X509Certificate, chain: [X509Certificate] = [],
                       encoding: Encoding = .der) throws(CryptoError) -> [UInt8] {
        try PKCS7SignedData.sign(payloadDER, key: key, certificate: certificate, chain: chain,
                                 encoding: encoding == .xcode ? .streamedBER : .der)
    }
}

extension AppReceipt.InAppPurchase {
    /// The in-app purchase's own `SET` of attributes.
    var payloadDER: [UInt8] {
        var attributes: [[UInt8]] = []
        func add(_ type: Int64, _ value: [UInt8]?) {
            if let value { attributes.append(DER.attribute(type, value)) }
        }
        add(1701, quantity.map(DER.integer))
        add(1702, productId.map(DER.utf8String))
        add(1703, transactionId.map(DER.utf8String))
        add(1704, purchaseDateMs.map(DER.date))
        add(1705, originalTransactionId.map(DER.utf8String))
        add(1706, originalPurchaseDateMs.map(DER.date))
        add(1708, expiresDateMs.map(DER.date))
        add(1711, webOrderLineItemId.flatMap { Int64($0) }.map(DER.integer))
        add(1712, cancellationDateMs.map(DER.date))
        return DER.set(attributes)
    }
}

/// The few DER encodings a receipt needs.
enum DER {
    static func element(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [tag]
        if content.count < 0x80 {
            out.append(UInt8(content.count))
        } else {
            var length = content.count
            var bytes: [UInt8] = []
            while length > 0 {
                bytes.insert(UInt8(length & 0xFF), at: 0)
                length >>= 8
            }
            out.append(0x80 | UInt8(bytes.count))
            out += bytes
        }
        return out + content
    }

    /// A non-negative INTEGER (all a receipt holds).
    static func integer(_ value: Int64) -> [UInt8] {
        precondition(value >= 0)
        var bytes: [UInt8] = []
        var v = UInt64(bitPattern: value)
        repeat {
            bytes.insert(UInt8(v & 0xFF), at: 0)
            v >>= 8
        } while v > 0
        if bytes[0] & 0x80 != 0 { bytes.insert(0, at: 0) }
        return element(0x02, bytes)
    }

    static func utf8String(_ s: String) -> [UInt8] { element(0x0C, Array(s.utf8)) }
    static func ia5String(_ s: String) -> [UInt8] { element(0x16, Array(s.utf8)) }
    /// Apple's receipt dates: RFC 3339 in whole seconds.
    static func date(_ ms: Int64) -> [UInt8] { ia5String(Timestamp.rfc3339(ms - ((ms % 1000) + 1000) % 1000)) }
    static func sequence(_ parts: [[UInt8]]) -> [UInt8] { element(0x30, parts.flatMap { $0 }) }
    static func set(_ parts: [[UInt8]]) -> [UInt8] { element(0x31, parts.flatMap { $0 }) }
    static func attribute(_ type: Int64, _ value: [UInt8]) -> [UInt8] {
        sequence([integer(type), integer(1), element(0x04, value)])
    }
}
