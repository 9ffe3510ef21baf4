internal import COpenSSL

/// One ASN.1 element header, decoded by OpenSSL's `ASN1_get_object`.
public struct ASN1Header: Sendable, Equatable {
    public var tag: Int32
    public var tagClass: Int32
    public var isConstructed: Bool
    /// BER's indefinite length (the content runs to an end-of-contents marker).
    public var isIndefinite: Bool
    /// Bytes of the header itself (tag and length).
    public var headerCount: Int
    /// The announced content length (0 when indefinite).
    public var contentCount: Int

    /// Decodes the header at the start of `bytes`; nil when it is invalid or its length runs past `bytes`.
    public static func read(_ bytes: UnsafeBufferPointer<UInt8>) -> ASN1Header? {
        guard let start = bytes.baseAddress, !bytes.isEmpty else { return nil }
        var length = 0
        var tag: Int32 = 0
        var tagClass: Int32 = 0
        var cursor: UnsafePointer<UInt8>? = start
        let flags = ASN1_get_object(&cursor, &length, &tag, &tagClass, bytes.count)
        guard flags & 0x80 == 0, let cursor else {
            ERR_clear_error()
            return nil
        }
        return ASN1Header(tag: tag, tagClass: tagClass, isConstructed: flags & 0x20 != 0, isIndefinite: flags & 0x01 != 0,
                          headerCount: cursor - start, contentCount: length)
    }
}
