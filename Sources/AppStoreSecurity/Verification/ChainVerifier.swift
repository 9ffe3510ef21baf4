internal import COpenSSL
import KakinCore

/// Extension Apple puts on every App Store signing leaf ("Mac App Store Receipt Signing").
let appleLeafMarkerOID = "1.2.840.113635.100.6.11.1"
/// Extension Apple puts on the intermediate (Apple Worldwide Developer Relations CA, G6 and later).
let appleIntermediateMarkerOID = "1.2.840.113635.100.6.2.1"

/// A chain leaf → intermediate → pinned root that verified once. Verifying the same two certificates
/// again can only differ by time, so a cache of these needs only the window check.
struct VerifiedChain: Sendable {
    let leafKey: P256PublicKey
    /// The intersection of the three certificates' validity windows (ms; valid when
    /// `notBeforeMs <= t < notAfterMs`, OpenSSL's rule).
    let notBeforeMs: Int64
    let notAfterMs: Int64

    func isValid(atMs t: Int64) -> Bool { notBeforeMs <= t && t < notAfterMs }
}

/// X.509 path validation against the pinned roots with OpenSSL's `X509_verify_cert`, at a chosen time,
/// like Apple's library (which uses the same OpenSSL routine through pyOpenSSL). The `x5c` root is never
/// consulted: only the leaf and the intermediate come from the JWS.
final class ChainVerifier: @unchecked Sendable {
    /// X509_STORE is internally locked for lookups, so concurrent verifications may share it; it is
    /// never modified after init.
    private let store: OpaquePointer
    let roots: [X509Certificate]

    init(roots: [X509Certificate]) throws(CryptoError) {
        guard let store = X509_STORE_new() else { throw CryptoError.openSSL("certificate store") }
        self.store = store
        self.roots = roots
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            throw CryptoError.openSSL("add trusted root")
        }
    }

    deinit { X509_STORE_free(store) }

    /// Verifies leaf → intermediate → a pinned root at `atMs`, then Apple's marker extensions.
    func verify(leaf: X509Certificate, intermediate: X509Certificate, atMs: Int64) throws(VerificationFailure) -> VerifiedChain {
        guard !roots.isEmpty else { throw VerificationFailure(.untrustedCertificate, "no trusted root certificates configured") }
        guard let context = X509_STORE_CTX_new() else { throw VerificationFailure(.untrustedCertificate, "out of memory") }
        defer {
            X509_STORE_CTX_free(context)
            ERR_clear_error()  // lookups may leave entries on this thread's queue even on success
        }
        guard let untrusted = kakin_sk_X509_new_null() else { throw VerificationFailure(.untrustedCertificate, "out of memory") }
        defer { kakin_sk_X509_free(untrusted) }  // the certificates stay owned by their wrappers
        guard kakin_sk_X509_push(untrusted, intermediate.pointer) > 0,
            X509_STORE_CTX_init(context, store, leaf.pointer, untrusted) == 1
        else {
            ERR_clear_error()
            throw VerificationFailure(.untrustedCertificate, "could not set up chain verification")
        }
        // Seconds, as X509_VERIFY_PARAM_set_time takes them (Apple's library uses signedDate // 1000).
        X509_STORE_CTX_set_time(context, 0, time_t(floorDivide(atMs, 1000)))

        guard X509_verify_cert(context) == 1 else {
            let error = X509_STORE_CTX_get_error(context)
            let text = X509_verify_cert_error_string(Int(error)).map { String(cString: $0) } ?? "error \(error)"
            ERR_clear_error()
            throw VerificationFailure(.untrustedCertificate, "certificate chain: \(text)")
        }
        // The verified chain must be exactly leaf, the given intermediate, a pinned root: a leaf issued
        // straight by a root, or a longer path, is not Apple's shape.
        guard let chain = X509_STORE_CTX_get0_chain(context), kakin_sk_X509_num(chain) == 3,
            let chainIntermediate = kakin_sk_X509_value(chain, 1), X509_cmp(chainIntermediate, intermediate.pointer) == 0,
            let root = kakin_sk_X509_value(chain, 2)
        else {
            throw VerificationFailure(.untrustedCertificate, "certificate chain is not leaf, intermediate, root")
        }
        guard leaf.hasExtension(oid: appleLeafMarkerOID) else {
            throw VerificationFailure(.untrustedCertificate, "leaf certificate lacks Apple's extension \(appleLeafMarkerOID)")
        }
        guard intermediate.hasExtension(oid: appleIntermediateMarkerOID) else {
            throw VerificationFailure(
                .untrustedCertificate, "intermediate certificate lacks Apple's extension \(appleIntermediateMarkerOID)")
        }
        guard let rootNotBefore = X509Certificate.epochMs(X509_get0_notBefore(root)),
            let rootNotAfter = X509Certificate.epochMs(X509_get0_notAfter(root))
        else {
            throw VerificationFailure(.untrustedCertificate, "root certificate validity unreadable")
        }
        let leafKey: P256PublicKey
        do {
            leafKey = try leaf.publicKey()
        } catch {
            throw VerificationFailure(.invalidSignature, "leaf certificate key is not a P-256 key")
        }
        return VerifiedChain(
            leafKey: leafKey,
            notBeforeMs: max(leaf.notBeforeMs, intermediate.notBeforeMs, rootNotBefore),
            notAfterMs: min(leaf.notAfterMs, intermediate.notAfterMs, rootNotAfter))
    }
}

/// Division rounding toward negative infinity (ms before 1970 still map to the right second).
func floorDivide(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
}
