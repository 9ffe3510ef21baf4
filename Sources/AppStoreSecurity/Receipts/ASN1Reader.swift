import KakinCrypto

/// One DER element: its tag and where its content lies in the reader's bytes.
struct ASN1Element {
    var tag: Int32
    var tagClass: Int32
    var isConstructed: Bool
    var content: Range<Int>

    static let universal: Int32 = 0
    static let integer: Int32 = 2
    static let octetString: Int32 = 4
    static let utf8String: Int32 = 12
    static let sequence: Int32 = 16
    static let set: Int32 = 17
    static let ia5String: Int32 = 22
}

/// Reads consecutive DER elements from a byte range. `ASN1Header` (OpenSSL's `ASN1_get_object`) decodes each header (and
/// refuses a length that runs past the range); this reader refuses indefinite lengths, counts elements and
/// depth, so hostile input costs at most a bounded walk and never a crash.
struct ASN1Reader {
    let bytes: [UInt8]
    private var position: Int
    private let end: Int
    /// Nesting of this reader (0 for the outermost); `nested(_:)` refuses to go deeper than `depthMax`.
    let depth: Int
    private var count = 0

    init(_ bytes: [UInt8], range: Range<Int>? = nil, depth: Int = 0) {
        self.bytes = bytes
        let r = range ?? 0..<bytes.count
        position = r.lowerBound
        end = r.upperBound
        self.depth = depth
    }

    var isAtEnd: Bool { position >= end }

    /// The next element, or nil at the end of the range.
    mutating func next() throws(AppReceiptError) -> ASN1Element? {
        guard position < end else { return nil }
        count += 1
        guard count <= Self.elementsMax else { throw .malformed("more than \(Self.elementsMax) elements in one structure") }
        let header = bytes.withUnsafeBufferPointer { buffer in
            ASN1Header.read(UnsafeBufferPointer(rebasing: buffer[position..<end]))
        }
        guard let header else { throw .malformed("an ASN.1 header is invalid or its length runs past the data") }
        guard !header.isIndefinite else { throw .malformed("indefinite length inside the receipt payload") }
        let contentStart = position + header.headerCount
        let length = header.contentCount
        guard header.headerCount > 0, length >= 0, contentStart <= end, length <= end - contentStart else {
            throw .malformed("an ASN.1 length runs past the data")
        }
        position = contentStart + length
        return ASN1Element(tag: header.tag, tagClass: header.tagClass, isConstructed: header.isConstructed, content: contentStart..<(contentStart + length))
    }

    /// The next element, which must be a universal one with this tag.
    mutating func next(_ tag: Int32, _ what: String) throws(AppReceiptError) -> ASN1Element {
        guard let element = try next() else { throw .malformed("\(what) is missing") }
        guard element.tagClass == ASN1Element.universal, element.tag == tag else { throw .malformed("\(what) has the wrong ASN.1 type") }
        return element
    }

    /// A reader over an element's content, one level deeper.
    func nested(_ element: ASN1Element) throws(AppReceiptError) -> ASN1Reader {
        guard depth < Self.depthMax else { throw .malformed("ASN.1 nested deeper than \(Self.depthMax) levels") }
        return ASN1Reader(bytes, range: element.content, depth: depth + 1)
    }

    func content(_ element: ASN1Element) -> ArraySlice<UInt8> { bytes[element.content] }

    /// A DER INTEGER's value, when it fits in 63 bits and is not negative.
    func nonNegativeInteger(_ element: ASN1Element) throws(AppReceiptError) -> Int64 {
        let c = content(element)
        guard !c.isEmpty, c.count <= 9 else { throw .malformed("an INTEGER is empty or too large") }
        guard c.first! & 0x80 == 0 else { throw .malformed("an INTEGER is negative") }
        guard c.count < 9 || c.first! == 0 else { throw .malformed("an INTEGER is too large") }
        var value: UInt64 = 0
        for byte in c { value = value << 8 | UInt64(byte) }
        guard value <= UInt64(Int64.max) else { throw .malformed("an INTEGER is too large") }
        return Int64(value)
    }
}
