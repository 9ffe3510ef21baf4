internal import COpenSSL

/// Why a certificate path did not verify: OpenSSL's reason, in words.
public struct X509PathError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// X.509 path validation against pinned roots with OpenSSL's `X509_verify_cert`, at a chosen time (the rule
/// pyOpenSSL and Apple's library use). The roots are the only anchors; what a caller requires of the path
/// (its length, marker extensions, key type) is the caller's rule.
public final class X509TrustStore: @unchecked Sendable {
    /// X509_STORE is internally locked for lookups, so concurrent verifications may share it; it is never
    /// modified after init.
    private let store: OpaquePointer
    public let roots: [X509Certificate]

    public init(roots: [X509Certificate]) throws(CryptoError) {
        guard let store = X509_STORE_new() else { throw CryptoError.openSSL("certificate store") }
        self.store = store
        self.roots = roots
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            throw CryptoError.openSSL("add trusted root")
        }
    }

    deinit { X509_STORE_free(store) }

    /// Verifies `leaf` through `intermediates` (untrusted) to one of `roots` at `atMs` (whole seconds, rounded
    /// down, as `X509_VERIFY_PARAM_set_time` takes them).
    /// - Returns: the verified path, leaf first and root last, as the wrappers the caller and `roots` hold.
    public func verifiedPath(leaf: X509Certificate, intermediates: [X509Certificate], atMs: Int64) throws(X509PathError) -> [X509Certificate] {
        guard !roots.isEmpty else { throw X509PathError("no trusted root certificates configured") }
        guard let context = X509_STORE_CTX_new() else { throw X509PathError("out of memory") }
        defer {
            X509_STORE_CTX_free(context)
            ERR_clear_error()  // lookups may leave entries on this thread's queue even on success
        }
        guard let untrusted = kakin_sk_X509_new_null() else { throw X509PathError("out of memory") }
        defer { kakin_sk_X509_free(untrusted) }  // the certificates stay owned by their wrappers
        for intermediate in intermediates where kakin_sk_X509_push(untrusted, intermediate.pointer) <= 0 {
            throw X509PathError("out of memory")
        }
        guard X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1 else {
            ERR_clear_error()
            throw X509PathError("could not set up chain verification")
        }
        X509_STORE_CTX_set_time(context, 0, time_t(floorDivide(atMs, 1000)))
        guard X509_verify_cert(context) == 1 else {
            let error = X509_STORE_CTX_get_error(context)
            let text = X509_verify_cert_error_string(Int(error)).map { String(cString: $0) } ?? "error \(error)"
            throw X509PathError("certificate chain: \(text)")
        }
        guard let chain = X509_STORE_CTX_get0_chain(context) else { throw X509PathError("no verified chain") }
        let known = [leaf] + intermediates + roots
        var path: [X509Certificate] = []
        for index in 0..<kakin_sk_X509_num(chain) {
            guard let element = kakin_sk_X509_value(chain, index),
                let wrapper = known.first(where: { X509_cmp($0.pointer, element) == 0 })
            else { throw X509PathError("the verified chain holds an unknown certificate") }
            path.append(wrapper)
        }
        return path
    }
}

/// Division rounding toward negative infinity (ms before 1970 still map to the right second).
func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}
