import KakinCore

/// Stripe's webhook signature scheme, used both ways: Kakin checks `Stripe-Signature` on Stripe's webhooks and
/// signs its own webhooks with `Kakin-Signature` in the same shape, so a team reuses the verifier it has.
///
/// Header: `t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>.<body>")>[,v1=…]`. Several `v1` values
/// appear while a secret is rotated (one per secret); other schemes (`v0=`, unknown keys) are ignored.
public enum TimestampedSignature {
    public enum Failure: Error, Equatable, Sendable {
        /// No header, or no `t=` / `v1=` in it, or a malformed one.
        case malformedHeader
        /// The timestamp is farther than the tolerance from now (a replay, or a clock far off).
        case timestampOutsideTolerance
        /// No `v1` signature matches any of the secrets.
        case noMatchingSignature
    }

    /// The header value for `body` signed at `timestamp` (unix seconds) with each secret, in order.
    public static func header(body: [UInt8], timestamp: Int64, secrets: [[UInt8]]) -> String {
        precondition(!secrets.isEmpty, "a signature needs at least one secret")
        var parts = ["t=\(timestamp)"]
        for secret in secrets { parts.append("v1=\(Hex.encode(signature(body: body, timestamp: timestamp, secret: secret)))") }
        return parts.joined(separator: ",")
    }

    /// HMAC-SHA256(secret, "<timestamp>.<body>").
    public static func signature(body: [UInt8], timestamp: Int64, secret: [UInt8]) -> [UInt8] {
        HMACSHA256.authenticationCode(key: secret, message: Array("\(timestamp).".utf8) + body)
    }

    /// Checks a header against the body and any of `secrets`; answers the signed timestamp.
    /// `toleranceSeconds` bounds |now − t| (Stripe's default is 300); 0 or less skips the check.
    @discardableResult
    public static func verify(header: String?, body: [UInt8], secrets: [[UInt8]], nowSeconds: Int64,
                              toleranceSeconds: Int64) throws(Failure) -> Int64 {
        guard let header, !header.isEmpty, header.utf8.count <= headerLengthMax else { throw .malformedHeader }
        var timestamp: Int64?
        var signatures: [[UInt8]] = []
        for item in header.split(separator: ",", omittingEmptySubsequences: true) {
            guard let eq = item.firstIndex(of: "=") else { continue }
            let key = item[..<eq].trimmingSpaces
            let value = item[item.index(after: eq)...].trimmingSpaces
            switch key {
            case "t":
                guard timestamp == nil, let t = Int64(value), t >= 0 else { throw .malformedHeader }
                timestamp = t
            case "v1":
                guard signatures.count < signaturesMax else { continue }
                guard let bytes = Hex.decode(String(value)), bytes.count == 32 else { continue }
                signatures.append(bytes)
            default:
                continue
            }
        }
        guard let timestamp, !signatures.isEmpty else { throw .malformedHeader }
        if toleranceSeconds > 0 {
            let (difference, overflow) = nowSeconds.subtractingReportingOverflow(timestamp)
            guard !overflow, difference.magnitude <= UInt64(toleranceSeconds) else { throw .timestampOutsideTolerance }
        }
        for secret in secrets {
            let expected = signature(body: body, timestamp: timestamp, secret: secret)
            for candidate in signatures where HMACSHA256.constantTimeEqual(expected, candidate) { return timestamp }
        }
        throw .noMatchingSignature
    }
}

private extension Substring {
    var trimmingSpaces: Substring {
        var s = self
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}
