import KakinCore
import KakinCrypto

/// Apple's root certificates that Kakin trusts by default, embedded so that the `kakin` binary works
/// wherever it is copied. `Resources/AppleRootCA-G3.cer` is the same file (a test keeps them equal).
public enum AppleRootCertificates {
    /// SHA-256 of Apple Root CA - G3 as Apple publishes it (https://www.apple.com/certificateauthority/).
    public static let rootCAG3Fingerprint =
        "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79"

    /// Apple Root CA - G3 (the anchor of every App Store JWS), DER in base64.
    public static let rootCAG3Base64 =
        "MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwSQXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQL"
        + "DB1BcHBsZSBDZXJ0aWZpY2F0aW9uIEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcNMTQwNDMw"
        + "MTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBSb290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRp"
        + "ZmljYXRpb24gQXV0aG9yaXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49AgEGBSuBBAAiA2IA"
        + "BJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtfTjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqX"
        + "l5dvMVztK517IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySrMA8GA1UdEwEB/wQFMAMBAf8w"
        + "DgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gAMGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWT"
        + "xnS4at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM6BgD56KyKA=="

    /// Apple Root CA - G3 as DER, fingerprint checked at first use. A mismatch means a corrupted binary:
    /// the process stops rather than trust anything else.
    public static let appleRootCAG3: [UInt8] = {
        do {
            return try rootCAG3()
        } catch {
            fatalError("\(error)")
        }
    }()

    /// Apple Root CA - G3 as DER, after checking its fingerprint; throws if the embedded bytes were altered.
    public static func rootCAG3() throws(CryptoError) -> [UInt8] {
        guard let der = Base64.decode(rootCAG3Base64) else {
            throw CryptoError("Apple Root CA - G3", "embedded certificate is not valid base64")
        }
        let fingerprint = SHA256Hash.fingerprintString(SHA256Hash.digest(der))
        guard fingerprint == rootCAG3Fingerprint else {
            throw CryptoError(
                "Apple Root CA - G3", "embedded certificate has fingerprint \(fingerprint), expected \(rootCAG3Fingerprint)")
        }
        return der
    }
}
