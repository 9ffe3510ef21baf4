internal import COpenSSL

/// A failed cryptographic operation (key parsing, signing, certificate building). The detail names the
/// operation and OpenSSL's reason, never key material or the data being signed.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    public var operation: String
    public var detail: String

    public init(_ operation: String, _ detail: String) {
        self.operation = operation
        self.detail = detail
    }

    public var description: String { detail.isEmpty ? operation : "\(operation): \(detail)" }

    /// Builds an error from OpenSSL's thread-local queue and empties it, so no stale entry is
    /// reported by a later, unrelated call on this thread.
    static func openSSL(_ operation: String) -> CryptoError {
        let code = ERR_peek_last_error()
        var detail = ""
        if code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            detail = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        ERR_clear_error()
        return CryptoError(operation, detail)
    }
}

/// Copies the bytes an `i2d_*` function writes. `i2d` advances the pointer it is given, so it gets a copy.
func derBytes(_ encode: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8]? {
    let length = encode(nil)
    guard length > 0 else { return nil }
    var out = [UInt8](repeating: 0, count: Int(length))
    let written = out.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
        return encode(&cursor)
    }
    guard written == length else { return nil }
    return out
}

/// Reads everything written to a memory BIO.
func memoryBIOContents(_ bio: OpaquePointer) -> [UInt8] {
    var data: UnsafeMutablePointer<CChar>? = nil
    let length = kakin_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { return [] }
    return data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
}

/// SHA-256 through OpenSSL.
public enum SHA256Hash {
    public static let byteCount = 32

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        bytes.withUnsafeBytes { digest($0) }
    }

    static func digest(_ input: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        let done = out.withUnsafeMutableBufferPointer { output in
            EVP_Digest(input.baseAddress, input.count, output.baseAddress, nil, algorithm.pointer, nil) == 1
        }
        precondition(done, "SHA-256 of bytes in memory cannot fail")
        return out
    }

    /// SHA-256 fetched once: OpenSSL 3's one-shot `SHA256()` fetches it from the provider on every call (a lookup
    /// under a lock, on the path of every JWS checked).
    private static let algorithm: FetchedDigest = {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { preconditionFailure("OpenSSL has no SHA-256") }
        return FetchedDigest(pointer: md)
    }()

    /// An `EVP_MD` kept for the process's life; OpenSSL allows using one from any thread.
    private struct FetchedDigest: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    /// Colon-separated upper-case hex, as certificate viewers print fingerprints.
    public static func fingerprintString(_ digest: [UInt8]) -> String {
        digest.map { byte in
            let hex = String(byte, radix: 16, uppercase: true)
            return byte < 16 ? "0" + hex : hex
        }.joined(separator: ":")
    }
}
