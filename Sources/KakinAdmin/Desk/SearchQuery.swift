import KakinCore

/// What one search box string may be. The shape decides which lookups run; a string that fits several
/// (digits are both a transaction ID and maybe a customer ID) runs all of them and every hit is shown.
public enum SearchTarget: Sendable, Hashable {
    /// `KKN-1234`, optionally with the request ID the app showed beside it.
    case errorId(String, requestId: String?)
    /// `req_…` from an error body or `X-Request-Id`.
    case requestId(String)
    case appAccountToken(String)
    case notificationUUID(String)
    /// Decimal App Store IDs: transaction or original transaction.
    case transactionId(String)
    /// Apple's order ID from the customer's receipt e-mail (e.g. `MK5TTTVWJH`).
    case orderId(String)
    case customerId(String)
    /// The app's `X-Purchase-Process-Id`.
    case purchaseProcessId(String)
    /// A Google Play order ID (`GPA.…`, a renewal `..N`) or purchase token: the chain Kakin read it in.
    case playPurchase(String)
}

public enum SearchQuery {
    /// The lookups a query asks for, most specific first. Empty for an empty or oversized query.
    public static func targets(_ raw: String) -> [SearchTarget] {
        // Forms may send a space as `+`; no ID this box looks up contains one.
        let words = raw.split(whereSeparator: { $0 == " " || $0 == "+" || $0 == "\t" || $0 == "\n" || $0 == "\r" || $0 == "," })
            .map(String.init)
        guard let first = words.first, raw.utf8.count <= lengthMax else { return [] }
        if isErrorId(first) {
            let request = words.dropFirst().first { $0.hasPrefix("req_") }
            return [.errorId(first.uppercased(), requestId: request)]
        }
        let q = words.count == 1 ? first : words.joined(separator: " ")
        if q.hasPrefix("req_"), words.count == 1 { return [.requestId(q)] }
        var out: [SearchTarget] = []
        if UUIDText.isValid(q) {
            out += [.appAccountToken(q.lowercased()), .notificationUUID(q.lowercased())]
        } else if isDigits(q) {
            out.append(.transactionId(q))
        } else if isOrderIdShaped(q) {
            out.append(.orderId(q.uppercased()))
        }
        if isPlayOrderIdShaped(q) {
            out.append(.playPurchase("GPA." + q.dropFirst(4)))
        } else if isPlayTokenShaped(q) {
            out.append(.playPurchase(q))
        }
        if CustomerID.isValid(q) { out.append(.customerId(q)) }
        if q.utf8.count <= 128 { out.append(.purchaseProcessId(q)) }
        return out
    }

    /// Play's order IDs: `GPA.` then digits and dashes (`GPA.3383-1234-5678-91234`), a renewal `..N` after them.
    static func isPlayOrderIdShaped(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count > 4, u.count <= 64, String(s.prefix(4)).uppercased() == "GPA." else { return false }
        return u[4...].allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E }
    }

    /// Play's purchase tokens: long opaque strings of letters, digits, `.`, `_`, `-` (at least 40).
    static func isPlayTokenShaped(_ s: String) -> Bool {
        s.utf8.count >= 40 && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A)
            || $0 == 0x2D || $0 == 0x2E || $0 == 0x5F }
    }

    static func isErrorId(_ s: String) -> Bool {
        let u = Array(s.uppercased().utf8)
        return u.count == 8 && u.starts(with: Array("KKN-".utf8)) && u[4...].allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    static func isDigits(_ s: String) -> Bool { !s.isEmpty && s.utf8.count <= 24 && s.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }

    /// Apple's order IDs are 10–12 capital letters and digits with at least one letter (case-insensitive here,
    /// since people retype them).
    static func isOrderIdShaped(_ s: String) -> Bool {
        let u = Array(s.uppercased().utf8)
        guard (10...12).contains(u.count) else { return false }
        let alnum = u.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) }
        return alnum && u.contains { $0 >= 0x41 && $0 <= 0x5A }
    }
}
