import KakinCore
import KakinCrypto

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

/// Apple's chain rules over `X509TrustStore`'s path validation (OpenSSL's `X509_verify_cert` at a chosen time,
/// like Apple's library through pyOpenSSL). The `x5c` root is never consulted: only the leaf and the
/// intermediate come from the JWS.
final class ChainVerifier: Sendable {
    private let trust: X509TrustStore
    var roots: [X509Certificate] { trust.roots }

    init(roots: [X509Certificate]) throws(CryptoError) {
        trust = try X509TrustStore(roots: roots)
    }

    /// Verifies leaf → intermediate → a pinned root at `atMs`, then Apple's marker extensions.
    func verify(leaf: X509Certificate, intermediate: X509Certificate, atMs: Int64) throws(VerificationFailure) -> VerifiedChain {
        let path: [X509Certificate]
        do {
            path = try trust.verifiedPath(leaf: leaf, intermediates: [intermediate], atMs: atMs)
        } catch {
            throw VerificationFailure(.untrustedCertificate, error.reason)
        }
        // The verified chain must be exactly leaf, the given intermediate, a pinned root: a leaf issued
        // straight by a root, or a longer path, is not Apple's shape.
        guard path.count == 3, path[1] === intermediate else {
            throw VerificationFailure(.untrustedCertificate, "certificate chain is not leaf, intermediate, root")
        }
        let root = path[2]
        guard leaf.hasExtension(oid: appleLeafMarkerOID) else {
            throw VerificationFailure(.untrustedCertificate, "leaf certificate lacks Apple's extension \(appleLeafMarkerOID)")
        }
        guard intermediate.hasExtension(oid: appleIntermediateMarkerOID) else {
            throw VerificationFailure(
                .untrustedCertificate, "intermediate certificate lacks Apple's extension \(appleIntermediateMarkerOID)")
        }
        let leafKey: P256PublicKey
        do {
            leafKey = try leaf.publicKey()
        } catch {
            throw VerificationFailure(.invalidSignature, "leaf certificate key is not a P-256 key")
        }
        return VerifiedChain(
            leafKey: leafKey,
            notBeforeMs: max(leaf.notBeforeMs, intermediate.notBeforeMs, root.notBeforeMs),
            notAfterMs: min(leaf.notAfterMs, intermediate.notAfterMs, root.notAfterMs))
    }
}
