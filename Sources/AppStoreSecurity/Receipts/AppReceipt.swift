import KakinCore
import KakinCrypto

/// Why an app receipt was refused. `malformed`: not a readable receipt (bad base64, not PKCS#7 signed
/// data, truncated, a field of the wrong type, a bound exceeded). `untrusted`: readable, but its signature
/// does not verify or its certificates do not chain to a trusted root at the receipt's creation date.
public enum AppReceiptError: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed(String)
    case untrusted(String)

    public var reason: String {
        switch self {
        case .malformed(let r), .untrusted(let r): return r
        }
    }

    public var description: String {
        switch self {
        case .malformed(let r): return "malformed app receipt: \(r)"
        case .untrusted(let r): return "untrusted app receipt: \(r)"
        }
    }
}

/// An App Store app receipt (the original StoreKit's `appStoreReceiptURL`, reference §9): a PKCS#7
/// SignedData whose content is a DER `SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
/// Read for its transaction IDs, which Kakin then looks up in the App Store Server API: the receipt itself
/// is never trusted for what it says about purchases.
public struct AppReceipt: Sendable, Hashable {
    /// One `in_app` entry (attribute 17).
    public struct InAppPurchase: Sendable, Hashable {
        public var quantity: Int64?
        public var productId: String?
        public var transactionId: String?
        public var originalTransactionId: String?
        public var purchaseDateMs: Int64?
        public var originalPurchaseDateMs: Int64?
        public var expiresDateMs: Int64?
        public var webOrderLineItemId: String?
        public var cancellationDateMs: Int64?

        public init(quantity: Int64? = nil, productId: String? = nil, transactionId: String? = nil, originalTransactionId: String? = nil,
                    purchaseDateMs: Int64? = nil, originalPurchaseDateMs: Int64? = nil, expiresDateMs: Int64? = nil,
                    webOrderLineItemId: String? = nil, cancellationDateMs: Int64? = nil) {
            self.quantity = quantity
            self.productId = productId
            self.transactionId = transactionId
            self.originalTransactionId = originalTransactionId
            self.purchaseDateMs = purchaseDateMs
            self.originalPurchaseDateMs = originalPurchaseDateMs
            self.expiresDateMs = expiresDateMs
            self.webOrderLineItemId = webOrderLineItemId
            self.cancellationDateMs = cancellationDateMs
        }
    }

    /// Attribute 0: `Production`, `ProductionSandbox`, `Xcode` (unconfirmed by Apple; seen in receipts).
    public var receiptType: String?
    /// Attribute 1: the App Apple ID (0 in Xcode and sandbox receipts).
    public var appItemId: Int64?
    public var bundleId: String?
    public var applicationVersion: String?
    public var originalApplicationVersion: String?
    public var creationDateMs: Int64?
    /// In the receipt's order.
    public var inApp: [InAppPurchase]

    public init(receiptType: String? = nil, appItemId: Int64? = nil, bundleId: String? = nil, applicationVersion: String? = nil,
                originalApplicationVersion: String? = nil, creationDateMs: Int64? = nil, inApp: [InAppPurchase] = []) {
        self.receiptType = receiptType
        self.appItemId = appItemId
        self.bundleId = bundleId
        self.applicationVersion = applicationVersion
        self.originalApplicationVersion = originalApplicationVersion
        self.creationDateMs = creationDateMs
        self.inApp = inApp
    }

    // MARK: Bounds

    // MARK: Reading

    /// Reads a base64 receipt as the app sends it (whitespace ignored). No signature check.
    public static func parse(base64: String) throws(AppReceiptError) -> AppReceipt {
        try parse(der: try der(fromBase64: base64))
    }

    /// The DER bytes of a base64 receipt (whitespace ignored; standard alphabet only, as Apple encodes it).
    public static func der(fromBase64 base64: String) throws(AppReceiptError) -> [UInt8] {
        let text = base64.utf8.filter { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }
        guard !text.isEmpty else { throw .malformed("the receipt is empty") }
        guard text.count <= (derBytesMax / 3 + 1) * 4 else { throw .malformed("the receipt is larger than \(derBytesMax) bytes") }
        guard !text.contains(UInt8(ascii: "-")), !text.contains(UInt8(ascii: "_")), let der = Base64.decode(text) else {
            throw .malformed("the receipt is not base64")
        }
        return der
    }

    /// Reads a receipt's DER (PKCS#7 SignedData, DER or the BER Xcode writes). No signature check.
    public static func parse(der: [UInt8]) throws(AppReceiptError) -> AppReceipt {
        let signed = try SignedReceipt(der: der)
        return try parsePayload(signed.payload)
    }

    /// Reads a receipt and checks its PKCS#7 signature against `trustedRoots`, at the receipt's creation date
    /// (or `nowMs` when it has none), accepting any key usage (receipt certificates are not S/MIME ones).
    /// Apple's receipts chain to Apple Inc. Root (`AppleRootCertificates.appleIncRoot`); Xcode's to the
    /// StoreKit Testing certificate of the project.
    public static func parse(der: [UInt8], trustedRoots: [X509Certificate], nowMs: Int64) throws(AppReceiptError) -> AppReceipt {
        let signed = try SignedReceipt(der: der)
        let receipt = try parsePayload(signed.payload)
        try signed.verify(trustedRoots: trustedRoots, atMs: receipt.creationDateMs ?? nowMs)
        return receipt
    }

    static func parsePayload(_ payload: [UInt8]) throws(AppReceiptError) -> AppReceipt {
        var outer = ASN1Reader(payload)
        let set = try outer.next(ASN1Element.set, "the receipt payload (a SET)")
        guard outer.isAtEnd else { throw .malformed("bytes after the receipt payload") }
        var receipt = AppReceipt()
        var attributes = try outer.nested(set)
        while let attribute = try attributes.next() {
            let (type, value) = try Self.attribute(attribute, in: attributes)
            switch type {
            case 0: receipt.receiptType = try string(value, "receipt type")
            case 1: receipt.appItemId = try integer(value, "app item id")
            case 2: receipt.bundleId = try string(value, "bundle id")
            case 3: receipt.applicationVersion = try string(value, "application version")
            case 12: receipt.creationDateMs = try date(value, "receipt creation date")
            case 19: receipt.originalApplicationVersion = try string(value, "original application version")
            case 17:
                guard receipt.inApp.count < inAppMax else { throw .malformed("more than \(inAppMax) in-app purchases") }
                receipt.inApp.append(try inAppPurchase(value))
            default: continue
            }
        }
        return receipt
    }

    /// The bytes inside an attribute's value OCTET STRING, and its type.
    static func attribute(_ element: ASN1Element, in parent: ASN1Reader) throws(AppReceiptError) -> (Int64, [UInt8]) {
        guard element.tagClass == ASN1Element.universal, element.tag == ASN1Element.sequence else {
            throw .malformed("a receipt attribute is not a SEQUENCE")
        }
        var fields = try parent.nested(element)
        let type = try fields.nonNegativeInteger(try fields.next(ASN1Element.integer, "an attribute's type"))
        _ = try fields.next(ASN1Element.integer, "an attribute's version")
        let value = try fields.next(ASN1Element.octetString, "an attribute's value")
        guard fields.isAtEnd else { throw .malformed("extra fields in a receipt attribute") }
        return (type, Array(fields.content(value)))
    }

    static func inAppPurchase(_ bytes: [UInt8]) throws(AppReceiptError) -> InAppPurchase {
        var outer = ASN1Reader(bytes, depth: 2)
        let set = try outer.next(ASN1Element.set, "an in-app purchase (a SET)")
        guard outer.isAtEnd else { throw .malformed("bytes after an in-app purchase") }
        var purchase = InAppPurchase()
        var attributes = try outer.nested(set)
        while let attribute = try attributes.next() {
            let (type, value) = try Self.attribute(attribute, in: attributes)
            switch type {
            case 1701: purchase.quantity = try integer(value, "quantity")
            case 1702: purchase.productId = try string(value, "product id")
            case 1703: purchase.transactionId = try transactionId(value, "transaction id")
            case 1704: purchase.purchaseDateMs = try date(value, "purchase date")
            case 1705: purchase.originalTransactionId = try transactionId(value, "original transaction id")
            case 1706: purchase.originalPurchaseDateMs = try date(value, "original purchase date")
            case 1708: purchase.expiresDateMs = try date(value, "expires date")
            case 1711: purchase.webOrderLineItemId = try integer(value, "web order line item id").map { String($0) }
            case 1712: purchase.cancellationDateMs = try date(value, "cancellation date")
            default: continue
            }
        }
        return purchase
    }

    // MARK: Attribute values (each a DER element inside the OCTET STRING)

    static func single(_ bytes: [UInt8], _ what: String) throws(AppReceiptError) -> (ASN1Reader, ASN1Element)? {
        guard !bytes.isEmpty else { return nil }
        var reader = ASN1Reader(bytes, depth: 4)
        guard let element = try reader.next() else { return nil }
        guard reader.isAtEnd else { throw .malformed("bytes after the \(what)") }
        return (reader, element)
    }

    static func string(_ bytes: [UInt8], _ what: String) throws(AppReceiptError) -> String? {
        guard let (reader, element) = try single(bytes, what) else { return nil }
        guard element.tagClass == ASN1Element.universal, element.tag == ASN1Element.utf8String || element.tag == ASN1Element.ia5String else {
            throw .malformed("the \(what) is not a string")
        }
        guard element.content.count <= stringBytesMax, let s = String(validating: reader.content(element), as: UTF8.self) else {
            throw .malformed("the \(what) is not UTF-8 text of at most \(stringBytesMax) bytes")
        }
        return s
    }

    static func integer(_ bytes: [UInt8], _ what: String) throws(AppReceiptError) -> Int64? {
        guard let (reader, element) = try single(bytes, what) else { return nil }
        guard element.tagClass == ASN1Element.universal, element.tag == ASN1Element.integer else {
            throw .malformed("the \(what) is not an INTEGER")
        }
        return try reader.nonNegativeInteger(element)
    }

    /// RFC 3339 in an IA5String; empty means unset (Apple leaves some dates empty).
    static func date(_ bytes: [UInt8], _ what: String) throws(AppReceiptError) -> Int64? {
        guard let s = try string(bytes, what), !s.isEmpty else { return nil }
        guard let ms = Timestamp.parseRFC3339(s) else { throw .malformed("the \(what) is not an RFC 3339 date") }
        return ms
    }

    static func transactionId(_ bytes: [UInt8], _ what: String) throws(AppReceiptError) -> String? {
        guard let s = try string(bytes, what) else { return nil }
        guard !s.isEmpty, s.utf8.count <= transactionIdLengthMax,
              s.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            throw .malformed("the \(what) is not a decimal id of at most \(transactionIdLengthMax) digits")
        }
        return s
    }

    // MARK: What Kakin does with it

    /// Every transaction ID the receipt names, once each: the newest purchase first (by purchase date, then
    /// later in the receipt), each entry's `transactionId` before its `originalTransactionId`.
    public var transactionIds: [String] {
        var seen = Set<String>()
        var ids: [String] = []
        for purchase in newestFirst {
            for id in [purchase.transactionId, purchase.originalTransactionId].compactMap({ $0 }) where seen.insert(id).inserted {
                ids.append(id)
            }
        }
        return ids
    }

    /// The in-app purchases, newest first (by purchase date; later in the receipt first on a tie).
    public var newestFirst: [InAppPurchase] {
        inApp.enumerated().sorted { a, b in
            let (da, db) = (a.element.purchaseDateMs ?? Int64.min, b.element.purchaseDateMs ?? Int64.min)
            return da != db ? da > db : a.offset > b.offset
        }.map(\.element)
    }

    /// The latest entry of each purchase chain (one per original transaction: a subscription's renewals
    /// share it; each consumable is its own), newest first. These are the transactions to look up.
    public var latestPerOriginal: [InAppPurchase] {
        var seen = Set<String>()
        return newestFirst.filter { p in
            guard let key = p.originalTransactionId ?? p.transactionId else { return false }
            return seen.insert(key).inserted
        }
    }
}

/// The PKCS#7 envelope of a receipt (`PKCS7SignedData`), bounded in size.
struct SignedReceipt {
    let envelope: PKCS7SignedData
    var payload: [UInt8] { envelope.content }

    init(der: [UInt8]) throws(AppReceiptError) {
        guard !der.isEmpty else { throw .malformed("the receipt is empty") }
        guard der.count <= AppReceipt.derBytesMax else { throw .malformed("the receipt is larger than \(AppReceipt.derBytesMax) bytes") }
        do {
            envelope = try PKCS7SignedData(der: der)
        } catch {
            throw .malformed(error.reason)
        }
    }

    /// `PKCS7_verify` with the receipt's own certificates as the untrusted chain and `trustedRoots` as anchors.
    func verify(trustedRoots: [X509Certificate], atMs: Int64) throws(AppReceiptError) {
        guard !trustedRoots.isEmpty else { throw .untrusted("no trusted root") }
        do {
            try envelope.verify(trustedRoots: trustedRoots, atMs: atMs)
        } catch {
            throw .untrusted(error.detail.isEmpty ? "the signature does not verify" : error.detail)
        }
    }
}
