/// The contract's verification codes: the same strings in `kakin verify`, in 422 answers and in logs.
public enum VerificationCode: String, Sendable, CaseIterable {
    case invalidFormat = "invalid_format"
    case unsupportedAlgorithm = "unsupported_algorithm"
    case untrustedCertificate = "untrusted_certificate"
    case invalidSignature = "invalid_signature"
    case wrongBundleId = "wrong_bundle_id"
    case wrongAppAppleId = "wrong_app_apple_id"
    case wrongEnvironment = "wrong_environment"
    case retryableFailure = "retryable_failure"

    public var errorKind: ErrorKind {
        switch self {
        case .invalidFormat: return .invalidFormat
        case .unsupportedAlgorithm: return .unsupportedAlgorithm
        case .untrustedCertificate: return .untrustedCertificate
        case .invalidSignature: return .invalidSignature
        case .wrongBundleId: return .wrongBundleID
        case .wrongAppAppleId: return .wrongAppAppleID
        case .wrongEnvironment: return .wrongEnvironment
        case .retryableFailure: return .retryableFailure
        }
    }
}

/// Why signed data was refused: a code for callers, a reason for logs (never the JWS itself).
public struct VerificationFailure: Error, Sendable, Equatable, CustomStringConvertible {
    public var code: VerificationCode
    public var reason: String
    public init(_ code: VerificationCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }
    public var description: String { "\(code.rawValue): \(reason)" }
    public var kakinError: KakinError { KakinError(code.errorKind, detail: reason) }
}
